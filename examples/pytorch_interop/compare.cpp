// SPDX-License-Identifier: MIT
// abc example: check abc's ABC-MLP against a PyTorch layer written from the equations.
//
//   python3 abc_mlp_torch.py DIR     # writes the weights, inputs and reference outputs as .npy
//   compare DIR                      # runs abc on them and prints the max abs differences
//
// The PyTorch side (abc_mlp_torch.py) is a multi-head attention layer: q, k, v projections, per
// head the normalised ABC-MLP memory with W_φ[h] [n × d] and the head's keys as control input,
// then the output projection. Here the per-head q, k, v from the files go through
//     abc::BoundedAttention{abc::control::Mlp<float>(W_phi[h])}
// three ways (forward, forward_causal, and a step() loop), the heads are concatenated and
// multiplied by W_oᵀ, and each result is compared with PyTorch's float64 output. The projections
// of x are recomputed too, as a check that the layouts agree. Exit status 1 if any difference
// exceeds 1e-5, 2 on a bad file.
#include <abc/abc.hpp>
#include <abc/multi_head_attention.hpp>

#include "../npy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// The .npy files: float32/float64, little-endian, C order, format 1.0 (../npy.hpp, shared with
// bench/compare --npy).
using NpyArray = npy::Array;
using npy::shape_string;

NpyArray read_npy(const std::string& path) { return npy::read(path); }

void expect_shape(const std::string& name, const NpyArray& a, const std::vector<abc::Index>& want) {
  if (a.shape != want)
    throw std::runtime_error(name + ".npy: shape " + shape_string(a.shape) + ", expected " + shape_string(want));
}

// rows × cols entries of `a` starting at element `offset`, as a float matrix.
abc::Matrix<float> block(const NpyArray& a, abc::Index offset, abc::Index rows, abc::Index cols) {
  abc::Matrix<float> m(rows, cols);
  for (abc::Index i = 0; i < rows * cols; ++i)
    m.data()[i] = static_cast<float>(a.data[static_cast<std::size_t>(offset + i)]);
  return m;
}

double max_abs_diff(const abc::Matrix<float>& got, const NpyArray& want, abc::Index offset) {
  double m = 0;
  for (abc::Index i = 0; i < got.size(); ++i) {
    const double e = std::abs(double(got.data()[i]) - want.data[static_cast<std::size_t>(offset + i)]);
    if (std::isnan(e)) return e;  // a NaN anywhere fails the comparison (std::max would drop it)
    m = std::max(m, e);
  }
  return m;
}

// The larger of two differences, NaN if either is (std::max would keep the other).
double worst(double a, double b) { return std::isnan(a) ? a : std::isnan(b) ? b : std::max(a, b); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: compare DIR   (DIR written by abc_mlp_torch.py)\n";
    return 2;
  }
  const std::string dir = argv[1];
  const auto load = [&](const std::string& name) { return read_npy(dir + "/" + name + ".npy"); };
  try {
    const NpyArray x = load("x"), w_phi = load("w_phi");
    if (x.shape.size() != 3) throw std::runtime_error("x.npy: expected [B, N, d_model], got " + shape_string(x.shape));
    if (w_phi.shape.size() != 3) throw std::runtime_error("w_phi.npy: expected [H, n, d_model], got " + shape_string(w_phi.shape));
    const abc::Index B = x.shape[0], N = x.shape[1], D = x.shape[2];
    const abc::Index H = w_phi.shape[0], n = w_phi.shape[1];
    if (D % H != 0) throw std::runtime_error("x.npy: d_model = " + std::to_string(D) + " is not a multiple of H = " + std::to_string(H));
    const abc::Index d = D / H;
    expect_shape("w_phi", w_phi, {H, n, D});

    NpyArray w[4] = {load("w_q"), load("w_k"), load("w_v"), load("w_o")};
    NpyArray qkv[3] = {load("q"), load("k"), load("v")};
    const char* wn[4] = {"w_q", "w_k", "w_v", "w_o"};
    const char* qn[3] = {"q", "k", "v"};
    for (int i = 0; i < 4; ++i) expect_shape(wn[i], w[i], {D, D});
    for (int i = 0; i < 3; ++i) expect_shape(qn[i], qkv[i], {B, H, N, d});
    const NpyArray ref_causal = load("out_causal"), ref_noncausal = load("out_noncausal"), ref_step = load("out_step");
    expect_shape("out_causal", ref_causal, {B, N, D});
    expect_shape("out_noncausal", ref_noncausal, {B, N, D});
    expect_shape("out_step", ref_step, {B, N, D});

    std::cout << "abc vs PyTorch ABC-MLP: B=" << B << " N=" << N << " d_model=" << D << " H=" << H << " d=" << d
              << " n=" << n << ", W_phi reading the layer input\n";

    // The projections, recomputed from x: torch.nn.Linear stores W as [out, in], y = x Wᵀ.
    double diff_proj = 0;
    for (abc::Index b = 0; b < B; ++b)
      for (abc::Index h = 0; h < H; ++h)
        for (int i = 0; i < 3; ++i) {
          const abc::Matrix<float> proj = block(x, b * N * D, N, D) * block(w[i], 0, D, D).middleRows(h * d, d).transpose();
          diff_proj = worst(diff_proj, max_abs_diff(proj, qkv[i], (b * H + h) * N * d));
        }

    // One multi-head layer: a control per head (its own W_φ [n × d_model]), all reading the same
    // layer input x, so the slot logits of every head are one product x [W_φ¹; …; W_φᴴ]ᵀ.
    std::vector<abc::control::Mlp<float>> controls;
    for (abc::Index h = 0; h < H; ++h) controls.emplace_back(block(w_phi, h * n * D, n, D));
    const abc::MultiHeadAttention<abc::control::Mlp<float>> mha(controls, H, H);
    // q, k, v as the files hold them, [B, H, N, d]; x [B, N, d_model] as one shared input head.
    const auto floats = [](const NpyArray& a) { return std::vector<float>(a.data.begin(), a.data.end()); };
    const std::vector<float> qf = floats(qkv[0]), kf = floats(qkv[1]), vf = floats(qkv[2]), xf = floats(x);
    using In = abc::HeadTensor<const float>;
    using Out = abc::HeadTensor<float>;
    const In q = In::bhsd(qf.data(), B, H, N, d), k = In::bhsd(kf.data(), B, H, N, d), v = In::bhsd(vf.data(), B, H, N, d);
    const In xs = In::bshd(xf.data(), B, N, 1, D);
    // Outputs [B, N, H, d]: each token's heads side by side, the concatenation W_o reads.
    std::vector<float> causal(std::size_t(B * N * D)), noncausal(causal.size()), stepped(causal.size());
    mha.forward_causal(q, k, v, xs, Out::bshd(causal.data(), B, N, H, d));
    mha.forward(q, k, v, xs, Out::bshd(noncausal.data(), B, N, H, d));
    // Decoding: every sequence of the batch one token per call, through the pool.
    abc::MultiHeadAttention<abc::control::Mlp<float>>::Pool pool;
    std::vector<std::uint64_t> ids;
    for (abc::Index b = 0; b < B; ++b) {
      ids.push_back(std::uint64_t(b));
      mha.add(pool, ids.back(), d, d);
    }
    for (abc::Index t = 0; t < N; ++t) {
      // Token t of every sequence: strided views into the same buffers (no copy).
      const auto token = [&](const std::vector<float>& data) {
        return In::strided(data.data() + t * d, B, 1, H, d, H * N * d, d, N * d);
      };
      mha.forward_causal(pool, ids, token(qf), token(kf), token(vf), In::strided(xf.data() + t * D, B, 1, 1, D, N * D, D, D),
                         Out::strided(stepped.data() + t * D, B, 1, H, d, N * D, D, d));
    }

    const abc::Matrix<float> w_o = block(w[3], 0, D, D);
    double diff_causal = 0, diff_noncausal = 0, diff_step = 0;
    for (abc::Index b = 0; b < B; ++b) {
      const auto rows = [&](const std::vector<float>& o) {
        return Eigen::Map<const abc::Matrix<float>>(o.data() + b * N * D, N, D) * w_o.transpose();
      };
      diff_causal = worst(diff_causal, max_abs_diff(rows(causal), ref_causal, b * N * D));
      diff_noncausal = worst(diff_noncausal, max_abs_diff(rows(noncausal), ref_noncausal, b * N * D));
      diff_step = worst(diff_step, max_abs_diff(rows(stepped), ref_step, b * N * D));
    }

    const double tol = 1e-5;
    bool ok = true;
    const auto report = [&](const char* kind, double diff) {
      const bool pass = diff <= tol;
      ok = ok && pass;
      std::cout << "  " << std::left << std::setw(34) << kind << "max |abc - torch| = " << std::scientific
                << std::setprecision(3) << diff << (pass ? "  ok" : "  FAIL (tolerance 1e-5)") << '\n';
    };
    report("q/k/v projections (x W^T)", diff_proj);
    report("forward_causal", diff_causal);
    report("forward (non-causal)", diff_noncausal);
    report("pool decode, one token per call", diff_step);
    std::cout << (ok ? "all within 1e-5 (float)\n" : "difference above 1e-5\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "compare: " << e.what() << '\n';
    return 2;
  }
}
