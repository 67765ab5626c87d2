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

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// ---- a small .npy reader ------------------------------------------------------------------------
// Format version 1.0 only: magic "\x93NUMPY", bytes 1 and 0, a little-endian uint16 header length,
// then a Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (4, 37), }
// padded with spaces and a newline, then the data. Reads float32 ('<f4') and float64 ('<f8'),
// little-endian, C order; anything else is an error that says what the file holds.

struct NpyArray {
  std::vector<abc::Index> shape;
  std::vector<double> data;  // float32 files are widened exactly

  abc::Index size() const noexcept { return static_cast<abc::Index>(data.size()); }
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

// The position just after `'key':` and any spaces in the header dict.
std::size_t value_of(const std::string& path, const std::string& header, const std::string& key) {
  const std::string quoted = "'" + key + "'";
  std::size_t p = header.find(quoted);
  if (p == std::string::npos) fail(path, "the .npy header has no " + quoted + " entry: " + header);
  p = header.find(':', p + quoted.size());
  if (p == std::string::npos) fail(path, "malformed .npy header: " + header);
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  return p;
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };

  static const char magic[] = "\x93NUMPY";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), magic, 6) != 0) fail(path, "not a .npy file");
  if (byte(6) != 1 || byte(7) != 0)
    fail(path, "unsupported .npy format version " + std::to_string(byte(6)) + "." + std::to_string(byte(7)) +
                   " (only 1.0 is read; numpy writes 1.0 unless the header exceeds 64 KiB)");
  const std::size_t header_len = byte(8) | (std::size_t(byte(9)) << 8);
  if (bytes.size() < 10 + header_len) fail(path, "truncated .npy header");
  std::string header(bytes.data() + 10, header_len);
  header.erase(header.find_last_not_of(" \n") + 1);  // the padding, kept out of messages

  // 'descr': a quoted string such as '<f4'
  std::size_t p = value_of(path, header, "descr");
  if (p >= header.size() || header[p] != '\'') fail(path, "malformed 'descr' in header: " + header);
  const std::size_t end = header.find('\'', p + 1);
  if (end == std::string::npos) fail(path, "malformed 'descr' in header: " + header);
  const std::string descr = header.substr(p + 1, end - p - 1);
  std::size_t item = 0;
  if (descr == "<f4")
    item = 4;
  else if (descr == "<f8")
    item = 8;
  else
    fail(path, "unsupported dtype '" + descr +
                   "': only little-endian float32 ('<f4') and float64 ('<f8') are read");

  // 'fortran_order': True / False
  p = value_of(path, header, "fortran_order");
  if (header.compare(p, 5, "False") != 0)
    fail(path, "Fortran-order (column-major) arrays are not read; save a C-contiguous array "
               "(numpy.ascontiguousarray)");

  // 'shape': a tuple of integers, () for a scalar, (n,) for one dimension
  p = value_of(path, header, "shape");
  if (p >= header.size() || header[p] != '(') fail(path, "malformed 'shape' in header: " + header);
  const std::size_t close = header.find(')', p);
  if (close == std::string::npos) fail(path, "malformed 'shape' in header: " + header);
  NpyArray a;
  std::size_t count = 1;
  for (std::size_t i = p + 1; i < close;) {
    if (header[i] == ' ' || header[i] == ',') {
      ++i;
      continue;
    }
    if (header[i] < '0' || header[i] > '9') fail(path, "malformed 'shape' in header: " + header);
    std::size_t dim = 0;
    for (; i < close && header[i] >= '0' && header[i] <= '9'; ++i)
      dim = dim * 10 + static_cast<std::size_t>(header[i] - '0');
    a.shape.push_back(static_cast<abc::Index>(dim));
    count *= dim;
  }

  const std::size_t offset = 10 + header_len;
  if (bytes.size() - offset != count * item)
    fail(path, "holds " + std::to_string(bytes.size() - offset) + " data bytes, but its header (" + header +
                   ") says " + std::to_string(count * item));
  const std::uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  if (first != 1) fail(path, "this reader assumes a little-endian host");

  a.data.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    const char* src = bytes.data() + offset + i * item;
    if (item == 4) {
      float f;
      std::memcpy(&f, src, 4);
      a.data[i] = f;
    } else {
      std::memcpy(&a.data[i], src, 8);
    }
  }
  return a;
}

std::string shape_string(const std::vector<abc::Index>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

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
    if (w_phi.shape.size() != 3) throw std::runtime_error("w_phi.npy: expected [H, n, d], got " + shape_string(w_phi.shape));
    const abc::Index B = x.shape[0], N = x.shape[1], D = x.shape[2];
    const abc::Index H = w_phi.shape[0], n = w_phi.shape[1], d = w_phi.shape[2];
    if (H * d != D) throw std::runtime_error("w_phi.npy: H·d = " + std::to_string(H * d) + " != d_model = " + std::to_string(D));

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
              << " n=" << n << '\n';

    const abc::Matrix<float> w_o = block(w[3], 0, D, D);
    double diff_proj = 0, diff_causal = 0, diff_noncausal = 0, diff_step = 0;
    for (abc::Index b = 0; b < B; ++b) {
      const abc::Matrix<float> xb = block(x, b * N * D, N, D);
      abc::Matrix<float> heads_causal(N, D), heads_noncausal(N, D), heads_step(N, D);
      for (abc::Index h = 0; h < H; ++h) {
        const abc::Index at = (b * H + h) * N * d;  // q[b, h] is a contiguous [N × d] block
        const abc::Matrix<float> q = block(qkv[0], at, N, d), k = block(qkv[1], at, N, d),
                                 v = block(qkv[2], at, N, d);

        // The projections, recomputed from x: torch.nn.Linear stores W as [out, in], y = x Wᵀ.
        for (int i = 0; i < 3; ++i) {
          const abc::Matrix<float> wi = block(w[i], 0, D, D);
          const abc::Matrix<float> proj = xb * wi.middleRows(h * d, d).transpose();
          diff_proj = worst(diff_proj, max_abs_diff(proj, qkv[i], at));
        }

        const abc::BoundedAttention attn{abc::control::Mlp<float>(block(w_phi, h * n * d, n, d))};
        heads_causal.middleCols(h * d, d) = attn.forward_causal(q, k, v);
        heads_noncausal.middleCols(h * d, d) = attn.forward(q, k, v);
        auto state = attn.make_state(d, d);
        abc::Vector<float> out(d);
        for (abc::Index t = 0; t < N; ++t) {
          attn.step_into(state, q.row(t), k.row(t), v.row(t), out);
          heads_step.block(t, h * d, 1, d) = out.transpose();
        }
      }
      // Concatenated heads times W_oᵀ, as the layer does.
      diff_causal = worst(diff_causal, max_abs_diff(heads_causal * w_o.transpose(), ref_causal, b * N * D));
      diff_noncausal = worst(diff_noncausal, max_abs_diff(heads_noncausal * w_o.transpose(), ref_noncausal, b * N * D));
      diff_step = worst(diff_step, max_abs_diff(heads_step * w_o.transpose(), ref_step, b * N * D));
    }

    const double tol = 1e-5;
    bool ok = true;
    const auto report = [&](const char* kind, double diff) {
      const bool pass = diff <= tol;
      ok = ok && pass;
      std::cout << "  " << std::left << std::setw(28) << kind << "max |abc - torch| = " << std::scientific
                << std::setprecision(3) << diff << (pass ? "  ok" : "  FAIL (tolerance 1e-5)") << '\n';
    };
    report("q/k/v projections (x W^T)", diff_proj);
    report("forward_causal", diff_causal);
    report("forward (non-causal)", diff_noncausal);
    report("step loop", diff_step);
    std::cout << (ok ? "all within 1e-5 (float)\n" : "difference above 1e-5\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "compare: " << e.what() << '\n';
    return 2;
  }
}
