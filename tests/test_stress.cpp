// SPDX-License-Identifier: MIT
// abc tests: numerical stress (issue 9). Extreme ABC-MLP logits for the sigmoid and relu
// activations (the exp case is oracle 15 in control/test_mlp.cpp), keys and values of magnitude
// 1e15, denormal keys and values, finite keys and queries whose q·k overflows, and a 10^6-token
// decode through `step` checked against float64
// references at sampled positions. Every reference here is written from the equations of
// docs/design.md §1 in double, never from the library's kernels.
#include <abc/bounded_attention.hpp>
#include <abc/control/identity.hpp>
#include <abc/control/mlp.hpp>
#include <abc/control/sliding_window.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <type_traits>
#include <vector>

#include "support/approx.hpp"
#include "support/batch_width.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace stress_test {

namespace {

using abc::Index;
using abc::control::Activation;
constexpr double inf = std::numeric_limits<double>::infinity();

// log α = log act(s) in double, stably (log σ(s) = −log(1 + e^{−s}) without overflow).
double log_alpha(double s, Activation act) {
  switch (act) {
    case Activation::exp: return s;
    case Activation::sigmoid: return s >= 0 ? -std::log1p(std::exp(-s)) : s - std::log1p(std::exp(s));
    case Activation::relu: return s > 0 ? std::log(s) : -inf;
  }
  return s;
}

// ABC-MLP with prefix normalisation as an online softmax over time, per slot, in double: the
// unnormalised sums Σ_i e^{λ_i − m} (k_i, v_i) with the running maximum m factored out. A different
// formulation from the library's (which carries the normalised memory and a decay), so agreement is
// evidence, not tautology. read() is the softmax read over slots with mass (ref::read).
struct OnlineMlpRef {
  std::vector<std::vector<double>> w;  // W_φ [n × d_x]
  Activation act;
  std::vector<double> m, z;
  ref::Mat ks, vs;

  OnlineMlpRef(const ref::Mat& w_phi, Activation a, size_t d, size_t dv)
      : w(w_phi), act(a), m(w_phi.size(), -inf), z(w_phi.size(), 0.0),
        ks(w_phi.size(), std::vector<double>(d, 0.0)), vs(w_phi.size(), std::vector<double>(dv, 0.0)) {}

  void push(const std::vector<double>& x, const std::vector<double>& k, const std::vector<double>& v) {
    for (size_t l = 0; l < w.size(); ++l) {
      const double lam = log_alpha(ref::dot(w[l], x), act);
      if (lam == -inf) continue;
      if (lam > m[l]) {  // new maximum: rescale what is there
        const double r = m[l] == -inf ? 0.0 : std::exp(m[l] - lam);
        z[l] *= r;
        for (auto& e : ks[l]) e *= r;
        for (auto& e : vs[l]) e *= r;
        m[l] = lam;
      }
      const double a = std::exp(lam - m[l]);
      z[l] += a;
      for (size_t c = 0; c < k.size(); ++c) ks[l][c] += a * k[c];
      for (size_t c = 0; c < v.size(); ++c) vs[l][c] += a * v[c];
    }
  }

  std::vector<double> read(const std::vector<double>& q, double scale) const {
    ref::Mat km(ks.size()), vm(vs.size());
    std::vector<bool> readable(ks.size());
    for (size_t l = 0; l < ks.size(); ++l) {
      readable[l] = z[l] > 0;
      km[l] = ks[l];
      vm[l] = vs[l];
      if (!readable[l]) continue;
      for (auto& e : km[l]) e /= z[l];
      for (auto& e : vm[l]) e /= z[l];
    }
    return ref::read(q, km, vm, readable, scale);
  }
};

template <class T>
std::vector<double> row(const abc::Matrix<T>& m, Index i) {
  std::vector<double> r(static_cast<size_t>(m.cols()));
  for (Index j = 0; j < m.cols(); ++j) r[size_t(j)] = static_cast<double>(m(i, j));
  return r;
}

template <class Attn, class T>
abc::Matrix<T> step_loop(const Attn& attn, const abc::Matrix<T>& q, const abc::Matrix<T>& k,
                         const abc::Matrix<T>& v, const abc::Matrix<T>& x) {
  auto state = attn.make_state(k.cols(), v.cols());
  abc::Matrix<T> out(q.rows(), v.cols());
  for (Index t = 0; t < q.rows(); ++t)
    out.row(t) = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose(),
                           x.row(t).transpose()).transpose();
  return out;
}

template <class T>
bool all_finite(const abc::Matrix<T>& m) {
  return m.allFinite();
}

}  // namespace

TEMPLATE_TEST_CASE("stress: Mlp sigmoid and relu with logits of ±1e4 are finite and exact",
                   "[stress][mlp][numerics]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, dx = 4, n = 6, n_tok = 130;
  // As oracle 15: integer weights ×1000 and inputs in {−1, 0, 1}, so logits are exact multiples of
  // 1000 up to ±1.4e4 in both types. sigmoid saturates (log σ(−1e4) = −1e4, log σ(1e4) = −0 to
  // rounding); relu gives log α = log(s) for s > 0 and empty slots for s ≤ 0 (masked).
  abc::Matrix<T> w(n, dx), x(n_tok, dx);
  const auto wr = ref::random<double>(n, dx, 901, 3.49), xr = ref::random<double>(n_tok, dx, 902, 1.49);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < dx; ++j) w(i, j) = T(1000 * std::round(wr(i, j)));
  for (Index i = 0; i < n_tok; ++i)
    for (Index j = 0; j < dx; ++j) x(i, j) = T(std::round(xr(i, j)));
  REQUIRE(static_cast<double>((x * w.transpose()).cwiseAbs().maxCoeff()) >= 5000);
  const auto q = ref::random<T>(n_tok, d, 903), k = ref::random<T>(n_tok, d, 904);
  const auto v = ref::random<T>(n_tok, dv, 905);
  for (auto act : {Activation::sigmoid, Activation::relu, Activation::exp}) {
    INFO("activation " << int(act));
    abc::BoundedAttention attn{abc::control::Mlp<T>(w, act)};
    OnlineMlpRef r(ref::from(w), act, size_t(d), size_t(dv));
    ref::Mat want;
    for (Index t = 0; t < n_tok; ++t) {
      r.push(row(x, t), row(k, t), row(v, t));
      want.push_back(r.read(row(q, t), 0.5));
    }
    const abc::Matrix<T> par = attn.forward_causal(q, k, v, x), rec = step_loop(attn, q, k, v, x);
    REQUIRE(all_finite(par));
    REQUIRE(all_finite(rec));
    ref::require_close(par, want);
    ref::require_close(rec, want);
  }
}

// Finite keys and queries whose q·k overflows. Where the step's two sums of the dot meet as
// +∞ + (−∞) the score is NaN: it takes no mass, and a larger score in an earlier SIMD batch at the
// same lane is still the max. The regression: on AVX and AVX-512 the slot softmax's NaN check
// compiled to nothing and the vector max then dropped that lane's larger score, so exp(800 − 0)
// overflowed and every read past the NaN slot was NaN. (The non-causal read sums the dot in one
// chain of fused multiply-adds, where big · (−big) is not rounded before it meets +∞: the score is
// +∞ and, by the rule for overflowed logits, takes all the mass. Either way the read is finite.)
TEMPLATE_TEST_CASE("stress: a q·k that overflows takes no mass as NaN, all of it as +∞, in every form",
                   "[stress][numerics]", float, double) {
  using T = TestType;
  const Index w = ref::batch_width<T>(), n_tok = 3 * w + 3, d = 8, dv = 4;
  const T big = T(2 * std::sqrt(double(std::numeric_limits<T>::max())));  // big · big overflows
  abc::Matrix<T> q = abc::Matrix<T>::Zero(n_tok, d), k = abc::Matrix<T>::Zero(n_tok, d);
  const abc::Matrix<T> v = ref::random<T>(n_tok, dv, 921);
  q.col(0).setConstant(big);
  q.col(1).setConstant(big);
  q.col(2).setConstant(T(1));
  k(0, 2) = T(800);  // slot 0: score 800, the row's largest finite score (e^800 overflows double too)
  k(w, 0) = big;     // slot w, the same lane one batch on: big² − big², +∞ − ∞ once rounded
  k(w, 1) = -big;
  k(2 * w, 2) = T(-1);  // and a smaller score a batch further
  abc::Options opts;
  opts.scale = 1;
  const abc::BoundedAttention id{abc::control::Identity<T>{n_tok}, opts};
  const double tol = std::is_same<T, float>::value ? 1e-6 : 1e-12;
  const auto is_row = [&](const abc::Matrix<T>& out, Index t, Index slot) {
    return (out.row(t) - v.row(slot)).cwiseAbs().maxCoeff() <= tol * v.cwiseAbs().maxCoeff();
  };
  // The token loop (forward_causal of a one-hot control) and the step: slot 0's weight is 1 to
  // within e^−799, slot w's is 0.
  const abc::Matrix<T> causal = id.forward_causal(q, k, v), steps = step_loop(id, q, k, v, k);
  REQUIRE(all_finite(causal));
  REQUIRE(all_finite(steps));
  for (Index t = 0; t < n_tok; ++t) {
    INFO("token " << t);
    REQUIRE(is_row(causal, t, 0));
    REQUIRE(is_row(steps, t, 0));
  }
  // The non-causal read: finite, and all the mass on one of the two extreme slots.
  const abc::Matrix<T> all = id.forward(q, k, v);
  REQUIRE(all_finite(all));
  for (Index t = 0; t < n_tok; ++t) {
    INFO("token " << t);
    REQUIRE((is_row(all, t, 0) || is_row(all, t, w)));
  }
}

TEST_CASE("stress: keys and values of magnitude 1e15 (double)", "[stress][numerics]") {
  using T = double;
  const Index n_tok = 80, d = 8, dv = 5;
  // (a) keys 1e15 with unit queries: scores of ~1e15, the softmax is one-hot to double precision;
  // (b) keys 1e15 with queries 1e-15: unit-scale scores from huge memory rows; values 1e15 in both.
  // The reference subtracts the max score (ref::read); 1e-12 relative to the largest output.
  for (double qmag : {1.0, 1e-15}) {
    INFO("query magnitude " << qmag);
    const auto q = ref::random<T>(n_tok, d, 911, qmag), k = ref::random<T>(n_tok, d, 912, 1e15);
    const auto v = ref::random<T>(n_tok, dv, 913, 1e15);
    const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
    abc::Options opts;
    opts.scale = 0.25;
    const abc::BoundedAttention id{abc::control::Identity<T>{n_tok}, opts};
    ref::require_close(id.forward(q, k, v), ref::attention(rq, rk, rv, 0.25, false));
    ref::require_close(id.forward_causal(q, k, v), ref::attention(rq, rk, rv, 0.25, true));
    const abc::BoundedAttention win{abc::control::SlidingWindow<T>{16}, opts};
    ref::require_close(win.forward_causal(q, k, v), ref::window_attention(rq, rk, rv, 0.25, 16));
    ref::require_close(step_loop(win, q, k, v, k), ref::window_attention(rq, rk, rv, 0.25, 16));
    // Mlp with the keys as control input: logits of ~1e15 · |W_φ|, one-hot per slot in practice.
    const abc::Matrix<T> w_phi = ref::random<T>(6, d, 914);
    const abc::BoundedAttention mlp{abc::control::Mlp<T>(w_phi), opts};
    OnlineMlpRef r(ref::from(w_phi), Activation::exp, size_t(d), size_t(dv));
    ref::Mat want;
    for (Index t = 0; t < n_tok; ++t) {
      r.push(row(k, t), row(k, t), row(v, t));
      want.push_back(r.read(row(q, t), 0.25));
    }
    ref::require_close(mlp.forward_causal(q, k, v), want);
    ref::require_close(step_loop(mlp, q, k, v, k), want);
  }
}

TEMPLATE_TEST_CASE("stress: denormal keys and values give no NaN and the right answer",
                   "[stress][numerics]", float, double) {
  using T = TestType;
  const Index n_tok = 70, d = 6, dv = 4;
  const double tiny = std::is_same<T, float>::value ? 1e-39 : 1e-310;  // below the smallest normal
  REQUIRE(tiny < static_cast<double>(std::numeric_limits<T>::min()));
  const auto q = ref::random<T>(n_tok, d, 921), k = ref::random<T>(n_tok, d, 922, tiny);
  const auto v = ref::random<T>(n_tok, dv, 923, tiny);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  // Denormals carry an absolute precision of denorm_min, not a relative one: each output is a
  // convex combination of at most n_tok values, each product rounded to a multiple of denorm_min, so
  // the error is bounded by n_tok · denorm_min plus the usual relative error of the weights.
  const double ulp = static_cast<double>(std::numeric_limits<T>::denorm_min());
  const double rel = std::is_same<T, float>::value ? 1e-5 : 1e-12;
  auto check = [&](const abc::Matrix<T>& got, const ref::Mat& want) {
    REQUIRE(all_finite(got));
    const ref::Errors e = ref::errors(got, want);
    double vmax = 0;
    for (const auto& r : want)
      for (double c : r) vmax = std::max(vmax, std::abs(c));
    INFO("max_abs " << e.max_abs << ", bound " << double(n_tok) * ulp + rel * vmax);
    REQUIRE(e.max_abs <= double(n_tok) * ulp + rel * vmax);
  };
  const abc::BoundedAttention id{abc::control::Identity<T>{n_tok}};
  check(id.forward(q, k, v), ref::attention(rq, rk, rv, 1 / std::sqrt(double(d)), false));
  check(id.forward_causal(q, k, v), ref::attention(rq, rk, rv, 1 / std::sqrt(double(d)), true));
  const abc::BoundedAttention win{abc::control::SlidingWindow<T>{8}};
  check(step_loop(win, q, k, v, k), ref::window_attention(rq, rk, rv, 1 / std::sqrt(double(d)), 8));
  // Mlp driven by denormal keys: logits are (nearly) 0, so every slot is the running mean.
  const abc::Matrix<T> w_phi = ref::random<T>(5, d, 924);
  const abc::BoundedAttention mlp{abc::control::Mlp<T>(w_phi)};
  OnlineMlpRef r(ref::from(w_phi), Activation::exp, size_t(d), size_t(dv));
  ref::Mat want;
  for (Index t = 0; t < n_tok; ++t) {
    r.push(row(k, t), row(k, t), row(v, t));
    want.push_back(r.read(row(q, t), 1 / std::sqrt(double(d))));
  }
  check(mlp.forward_causal(q, k, v), want);
  check(step_loop(mlp, q, k, v, k), want);
}

namespace {

// Counter-based uniform in [−1, 1): token t, column c, stream s. The long test regenerates its
// inputs instead of storing 10^6 × 48 floats.
inline double uniform(std::uint64_t t, std::uint64_t c, std::uint64_t s) {
  std::uint64_t x = (t * 0x9E3779B97F4A7C15ull) ^ (c * 0xBF58476D1CE4E5B9ull) ^ (s * 0x94D049BB133111EBull);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-52 - 1.0;
}

}  // namespace

TEST_CASE("stress: 10^6 tokens through step stay finite and match float64 at sampled positions",
          "[stress][long]") {
  using T = float;
  const Index d = 16, dv = 16, n = 64;
  const std::uint64_t n_tok = 1000000, every = 100000;
  const double scale = 1 / std::sqrt(double(d));
  const abc::Matrix<T> w_phi = ref::random<T>(n, d, 931);
  const abc::BoundedAttention win{abc::control::SlidingWindow<T>{n}};
  const abc::BoundedAttention mlp{abc::control::Mlp<T>(w_phi)};
  auto sw = win.make_state(d, dv), sm = mlp.make_state(d, dv);
  OnlineMlpRef r(ref::from(w_phi), Activation::exp, size_t(d), size_t(dv));
  ref::Mat last_k(static_cast<size_t>(n)), last_v(static_cast<size_t>(n));  // the window reference: a ring of the last n tokens
  abc::Vector<T> q(d), k(d), v(dv), ow(dv), om(dv);
  std::vector<double> qd(static_cast<size_t>(d)), kd(static_cast<size_t>(d)), vd(static_cast<size_t>(dv));
  double err_win = 0, err_mlp = 0, ref_max = 0;
  const auto t_start = std::chrono::steady_clock::now();
  for (std::uint64_t t = 0; t < n_tok; ++t) {
    for (Index c = 0; c < d; ++c) {
      q(c) = T(uniform(t, std::uint64_t(c), 1));
      k(c) = T(uniform(t, std::uint64_t(c), 2));
      qd[size_t(c)] = double(q(c));
      kd[size_t(c)] = double(k(c));
    }
    for (Index c = 0; c < dv; ++c) {
      v(c) = T(uniform(t, std::uint64_t(c), 3));
      vd[size_t(c)] = double(v(c));
    }
    win.step_into(sw, q, k, v, ow);
    mlp.step_into(sm, q, k, v, om);
    r.push(kd, kd, vd);
    last_k[t % std::uint64_t(n)] = kd;
    last_v[t % std::uint64_t(n)] = vd;
    if ((t + 1) % every != 0 && t != 0 && t != 63 && t != 64) continue;
    const size_t filled = std::min<size_t>(size_t(t) + 1, size_t(n));
    const ref::Mat kk(last_k.begin(), last_k.begin() + long(filled)), vv(last_v.begin(), last_v.begin() + long(filled));
    const auto want_w = ref::read(qd, kk, vv, std::vector<bool>(filled, true), scale);
    const auto want_m = r.read(qd, scale);
    for (Index c = 0; c < dv; ++c) {
      err_win = std::max(err_win, std::abs(double(ow(c)) - want_w[size_t(c)]));
      err_mlp = std::max(err_mlp, std::abs(double(om(c)) - want_m[size_t(c)]));
      ref_max = std::max(ref_max, std::abs(want_m[size_t(c)]));
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::cout << "stress 10^6 tokens: " << secs << " s, max abs error at sampled positions: window "
            << err_win << ", mlp " << err_mlp << " (largest reference output " << ref_max << ")\n";
  REQUIRE(sw.position() == Index(n_tok));
  REQUIRE(sw.keys().allFinite());
  REQUIRE(sw.values().allFinite());
  REQUIRE(sm.keys().allFinite());
  REQUIRE(sm.values().allFinite());
  REQUIRE(sm.slot_state().row(1).allFinite());
  INFO("window error " << err_win << ", mlp error " << err_mlp);
  // The window holds the last 64 tokens and nothing else: no error accumulates over time, so the
  // unit-scale float bound of docs/design.md §3 applies unchanged.
  CHECK(err_win <= 1e-4);
  // Mlp: each slot is a running mean, K̃_t = a_t K̃_{t−1} + w_t k_t with a_t ≈ 1 − 1/t. A float
  // rounding (relative ε = 2^-24 ≈ 6e-8) made at step i is carried into step t multiplied by
  // Π_{i<j≤t} a_j ≈ i/t, so the accumulated error is Σ_i (i/t) ε_i |k|: with independent
  // round-to-nearest errors its standard deviation is ε sqrt(Σ (i/t)^2) ≈ ε sqrt(t/3) ≈ 3.5e-5 at
  // t = 10^6 per entry (the same holds for Ṽ and for the normaliser sum Z). The read is a convex
  // combination of Ṽ rows (bounded by the same error) plus the score error (≈ |q| · the K̃ error,
  // scale · sqrt(d) ≈ 1 times it) moving the softmax weights. A bound of 6 standard deviations
  // of the worst sampled entry, 6 ε sqrt(N/3) ≈ 2.1e-4, is the bound (measured: ~1.5e-6). A
  // systematic defect (a decay off by O(ε) in one direction at every step, a dropped rescale of
  // the normaliser) accumulates linearly instead, ε·N/2 ≈ 3e-2, and fails it.
  const double eps = double(std::numeric_limits<float>::epsilon()) / 2;
  const double mlp_bound = 6 * eps * std::sqrt(double(n_tok) / 3);
  INFO("mlp bound " << mlp_bound);
  CHECK(err_mlp <= mlp_bound);
}

}  // namespace stress_test
