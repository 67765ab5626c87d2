// SPDX-License-Identifier: MIT
// abc tests: control::RandomFeature (RFA) against a float64 plain-loop reference of Eq. 4.5–4.8
// with unit-norm (the default) and raw inputs, the gate limits, the denominator rule, inputs of
// every magnitude, and the approach to softmax attention as D grows.
#include <abc/bounded_attention.hpp>
#include <abc/control/identity.hpp>
#include <abc/control/random_feature.hpp>
#include <abc/feature/arc_cosine.hpp>
#include <abc/feature/input_norm.hpp>
#include <abc/feature/projection.hpp>
#include <abc/feature/random_fourier.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace random_feature_test {

namespace {

using abc::Index;
using abc::feature::InputNorm;

// φ(x) = sqrt(1/D)[sin(Wx̂), cos(Wx̂)] (or sqrt(1/D) relu(Wx̂)), in double, from the definition;
// x̂ = x/‖x‖ (unit: divided by max|x_j| first, so that float64 subnormals and huge entries have a
// norm) or x (raw). The zero vector stays zero.
std::vector<double> phi(const ref::Mat& w, std::vector<double> x, bool arccos, bool unit) {
  if (unit) {
    double m = 0;
    for (double e : x) m = std::max(m, std::abs(e));
    if (m > 0) {
      for (auto& e : x) e /= m;
      const double nx = std::sqrt(ref::dot(x, x));
      for (auto& e : x) e /= nx;
    }
  }
  const size_t D = w.size();
  std::vector<double> f(arccos ? D : 2 * D);
  for (size_t i = 0; i < D; ++i) {
    const double p = ref::dot(w[i], x);
    if (arccos) {
      f[i] = std::max(p, 0.0) / std::sqrt(double(D));
    } else {
      f[i] = std::sin(p) / std::sqrt(double(D));
      f[D + i] = std::cos(p) / std::sqrt(double(D));
    }
  }
  return f;
}

// The masked quadratic form with the unrolled gate weights a_{t,i} = (1 − g_i) Π_{j=i+1..t} g_j
// (a ≡ 1 without gates): out_t = Σ_i a_{t,i} (φq_t·φk_i) v_i / Σ_i a_{t,i} (φq_t·φk_i).
// Non-causal: every query over all keys, a ≡ 1.
ref::Mat rfa(const ref::Mat& w, const ref::Mat& q, const ref::Mat& k, const ref::Mat& v, bool causal,
             const std::vector<double>& gates, bool arccos, bool unit) {
  ref::Mat out;
  for (size_t t = 0; t < q.size(); ++t) {
    const auto fq = phi(w, q[t], arccos, unit);
    const size_t end = causal ? t + 1 : k.size();
    std::vector<double> num(v[0].size(), 0.0);
    double den = 0;
    for (size_t i = 0; i < end; ++i) {
      double a = 1;
      if (!gates.empty()) {
        a = 1 - gates[i];
        for (size_t j = i + 1; j <= t; ++j) a *= gates[j];
      }
      const double s = a * ref::dot(fq, phi(w, k[i], arccos, unit));
      den += s;
      for (size_t c = 0; c < num.size(); ++c) num[c] += s * v[i][c];
    }
    for (auto& e : num) e = den == 0 ? 0.0 : e / den;
    out.push_back(num);
  }
  return out;
}

const Index kSizes[] = {1, 7, 63, 65, 100};

}  // namespace

TEMPLATE_TEST_CASE("RandomFeature matches the float64 reference: non-causal, causal, cross, gated; unit (default) and raw inputs",
                   "[control][random_feature]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 5, D = 24;
  for (Index n_tok : kSizes)
    for (bool arccos : {false, true})
      for (InputNorm norm : {InputNorm::unit, InputNorm::raw}) {
        const bool unit = norm == InputNorm::unit;
        const std::uint64_t seed = std::uint64_t(n_tok) * 7 + (arccos ? 1 : 0);
        auto q = ref::random<T>(n_tok, d, seed + 1), k = ref::random<T>(n_tok, d, seed + 2);
        auto v = ref::random<T>(n_tok, dv, seed + 3), qx = ref::random<T>(n_tok / 2 + 3, d, seed + 4);
        const abc::Matrix<T> w = abc::feature::Projection<T>(D, d, abc::Seed(seed), T(0.8)).draw(3);
        const auto rw = ref::from(w), rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
        // Gates in (0, 1) per position, and the learned-gate form below.
        std::vector<T> gates(static_cast<size_t>(n_tok));
        for (Index i = 0; i < n_tok; ++i) gates[size_t(i)] = T(0.5 + 0.45 * std::sin(double(i)));
        std::vector<double> rg(gates.begin(), gates.end());
        INFO("N = " << n_tok << ", arccos " << arccos << ", unit " << unit);
        auto check = [&](const auto& fmap) {
          REQUIRE(fmap.input_norm() == norm);
          abc::BoundedAttention plain{abc::control::RandomFeature<T, std::decay_t<decltype(fmap)>>{fmap}};
          ref::require_close(plain.forward(q, k, v), rfa(rw, rq, rk, rv, false, {}, arccos, unit));
          ref::require_close(plain.forward(qx, k, v), rfa(rw, ref::from(qx), rk, rv, false, {}, arccos, unit));
          ref::require_close(plain.forward_causal(q, k, v), rfa(rw, rq, rk, rv, true, {}, arccos, unit));
          abc::BoundedAttention gated{abc::control::RandomFeature<T, std::decay_t<decltype(fmap)>>{fmap, gates}};
          ref::require_close(gated.forward_causal(q, k, v), rfa(rw, rq, rk, rv, true, rg, arccos, unit));
        };
        // The maps built without an InputNorm are the default, which must be `unit`.
        if (arccos)
          check(unit ? abc::feature::ArcCosine<T>(w) : abc::feature::ArcCosine<T>(w, InputNorm::raw));
        else
          check(unit ? abc::feature::RandomFourier<T>(w) : abc::feature::RandomFourier<T>(w, InputNorm::raw));
      }
}

TEMPLATE_TEST_CASE("RandomFeature: step loop = chunked = split at every position, plain and gated, unit and raw inputs",
                   "[control][random_feature][recurrent]", float, double) {
  using T = TestType;
  const Index d = 5, dv = 4, D = 16, n_tok = 70;
  auto q = ref::random<T>(n_tok, d, 11), k = ref::random<T>(n_tok, d, 12), v = ref::random<T>(n_tok, dv, 13);
  auto x = ref::random<T>(n_tok, 3, 14);
  const abc::Matrix<T> w = abc::feature::Projection<T>(D, d, abc::Seed{5}).draw();
  abc::Vector<T> wg = ref::random<T>(3, 1, 15, 2.0);
  using RF = abc::control::RandomFeature<T>;
  for (InputNorm norm : {InputNorm::unit, InputNorm::raw})
    for (int form = 0; form < 2; ++form)
      for (Index chunk : {Index(1), Index(9), Index(64)}) {
        abc::Options opts;
        opts.chunk = chunk;
        const RF control = form == 0 ? RF{abc::feature::RandomFourier<T>(w, norm)}
                                     : RF{abc::feature::RandomFourier<T>(w, norm), wg, T(0.3)};
        abc::BoundedAttention attn{control, opts};
        INFO("unit " << (norm == InputNorm::unit) << ", form " << form << ", chunk " << chunk);
        const abc::Matrix<T> whole = form == 0 ? attn.forward_causal(q, k, v) : attn.forward_causal(q, k, v, x);
        auto state = attn.make_state(d, dv);
        abc::Matrix<T> steps(n_tok, dv);
        for (Index t = 0; t < n_tok; ++t)
          steps.row(t) = (form == 0 ? attn.step(state, q.row(t), k.row(t), v.row(t))
                                    : attn.step(state, q.row(t), k.row(t), v.row(t), x.row(t))).transpose();
        ref::require_same(steps, whole);
        for (Index split : {Index(0), Index(1), Index(33), Index(64), Index(69), Index(70)}) {
          auto s = attn.make_state(d, dv);
          abc::Matrix<T> out(n_tok, dv);
          const Index rest = n_tok - split;
          if (form == 0) {
            out.topRows(split) = attn.forward_causal(s, q.topRows(split), k.topRows(split), v.topRows(split));
            out.bottomRows(rest) = attn.forward_causal(s, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest));
          } else {
            out.topRows(split) = attn.forward_causal(s, q.topRows(split), k.topRows(split), v.topRows(split), x.topRows(split));
            out.bottomRows(rest) = attn.forward_causal(s, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest), x.bottomRows(rest));
          }
          INFO("split at " << split);
          ref::require_same(out, whole);
        }
      }
}

TEMPLATE_TEST_CASE("RandomFeature gate limits: g ≡ 0 returns v_t", "[control][random_feature][gate]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, n_tok = 30;
  auto q = ref::random<T>(n_tok, d, 21), k = ref::random<T>(n_tok, d, 22), v = ref::random<T>(n_tok, dv, 23);
  const abc::Matrix<T> w = abc::feature::Projection<T>(32, d, abc::Seed{9}, T(0.5)).draw();
  abc::BoundedAttention attn{abc::control::RandomFeature<T>{abc::feature::RandomFourier<T>(w), std::vector<T>(n_tok, T(0))}};
  // S_t = φ(k_t) ⊗ v_t and z_t = φ(k_t): the ratio is v_t whenever φ(q_t)·φ(k_t) ≠ 0.
  ref::require_close(attn.forward_causal(q, k, v), ref::from(v));
}

TEMPLATE_TEST_CASE("RandomFeature: the denominator rule at zero and negative denominators",
                   "[control][random_feature][numerics]", float, double) {
  using T = TestType;
  // D = 1, d = 1, raw inputs: φ(q)·φ(k) = cos(w (q − k)). With w (q − k) = 2.5 it is cos 2.5 < 0.
  // (Unit inputs in d = 1 are ±1: q − k could not be 2.5.)
  abc::Matrix<T> w(1, 1), q(1, 1), k(1, 1), v(1, 2);
  w << T(1);
  q << T(2.5);
  k << T(0);
  v << T(0.25), T(-2);
  const abc::feature::RandomFourier<T> raw(w, InputNorm::raw);
  abc::BoundedAttention exact{abc::control::RandomFeature<T>{raw}};
  ref::require_close(exact.forward(q, k, v), ref::Mat{{0.25, -2.0}});  // num/den = v: the sign cancels
  abc::BoundedAttention floored{abc::control::RandomFeature<T>{raw, T(0.1)}};
  const double c = std::cos(2.5);  // numerator c·v over the floor 0.1
  ref::require_close(floored.forward(q, k, v), ref::Mat{{c * 0.25 / 0.1, c * -2.0 / 0.1}});
  // Arc-cos: a query whose features are all inactive has φ(q) = 0, so den = 0: it reads 0, not NaN.
  abc::Matrix<T> wa(2, 1), qa(1, 1), ka(2, 1), va(2, 1);
  wa << T(1), T(2);
  qa << T(-1);
  ka << T(1), T(0.5);
  va << T(3), T(4);
  abc::BoundedAttention arc{abc::control::RandomFeature<T, abc::feature::ArcCosine<T>>{abc::feature::ArcCosine<T>(wa)}};
  const abc::Matrix<T> out = arc.forward(qa, ka, va);
  REQUIRE(out(0, 0) == T(0));
  auto state = arc.make_state(1, 1);
  const abc::Vector<T> o = arc.step(state, qa.row(0), ka.row(0), va.row(0));
  REQUIRE(o(0) == T(0));
}

TEMPLATE_TEST_CASE("RandomFeature configuration and shape errors", "[control][random_feature][errors]", float, double) {
  using T = TestType;
  const abc::Matrix<T> w = abc::feature::Projection<T>(8, 4, abc::Seed{1}).draw();
  REQUIRE_THROWS_AS(abc::control::RandomFeature<T>(abc::feature::RandomFourier<T>(w), T(-1)), abc::config_error);
  REQUIRE_THROWS_WITH(abc::control::RandomFeature<T>(abc::feature::RandomFourier<T>(w), T(-1)), ABC_CONTAINS("floor is -1"));
  REQUIRE_THROWS_WITH(abc::control::RandomFeature<T>(abc::feature::RandomFourier<T>(w), std::vector<T>{T(0.5), T(1.5)}),
                      ABC_CONTAINS("gates[1] is 1.5"));
  abc::BoundedAttention attn{abc::control::RandomFeature<T>{abc::feature::RandomFourier<T>(w)}};
  auto q = ref::random<T>(5, 3, 1), v = ref::random<T>(5, 2, 2);
  REQUIRE_THROWS_AS(attn.forward(q, q, v), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward(q, q, v), ABC_CONTAINS("k is [5 x 3], expected [5 x 4]"));
  // Given gates bound the sequence length.
  abc::BoundedAttention gated{abc::control::RandomFeature<T>{abc::feature::RandomFourier<T>(w), std::vector<T>(3, T(0.5))}};
  auto q4 = ref::random<T>(5, 4, 3);
  REQUIRE_THROWS_AS(gated.forward_causal(q4, q4, v), abc::config_error);
  REQUIRE_THROWS_WITH(gated.forward_causal(q4, q4, v),
                      ABC_CONTAINS("abc::BoundedAttention::forward_causal: the token count (state position + new tokens) "
                                   "is 5, expected at most 3"));
}

TEST_CASE("RFA tends to softmax attention with inverse temperature s² as D grows (oracle 19)",
          "[control][random_feature][statistical]") {
  // Unit-norm q and k, w = s·w̃: RFA → softmax(s² q̂·k̂) V. The error is averaged over draws; it must
  // fall with D, roughly as D^-1/2 (the ratio estimator also has an O(1/D) bias, so the trend is
  // asserted on averages, not per draw).
  const Index d = 8, dv = 4, n_tok = 24, draws = 24;
  const double s = 1.5;
  auto q = ref::random<double>(n_tok, d, 31), k = ref::random<double>(n_tok, d, 32), v = ref::random<double>(n_tok, dv, 33);
  for (Index i = 0; i < n_tok; ++i) {
    q.row(i).normalize();
    k.row(i).normalize();
  }
  abc::Options unit;
  unit.scale = s * s;
  const abc::Matrix<double> exact = abc::BoundedAttention{abc::control::Identity<double>{n_tok}, unit}.forward(q, k, v);
  std::vector<double> err;
  for (Index D : {Index(16), Index(64), Index(256), Index(1024)}) {
    double total = 0;
    for (Index r = 0; r < draws; ++r) {
      const abc::Matrix<double> w = abc::feature::Projection<double>(D, d, abc::Seed{77}, s).draw(std::uint64_t(r));
      abc::BoundedAttention attn{abc::control::RandomFeature<double>{abc::feature::RandomFourier<double>(w)}};
      total += (attn.forward(q, k, v) - exact).cwiseAbs().mean();
    }
    err.push_back(total / double(draws));
  }
  INFO("mean abs error at D = 16, 64, 256, 1024: " << err[0] << ", " << err[1] << ", " << err[2] << ", " << err[3]);
  for (size_t i = 1; i < err.size(); ++i) REQUIRE(err[i] < err[i - 1]);
  // D^-1/2 is the asymptotic rate (log-log slope −0.5). At D = 16 the ratio estimator's O(1/D) bias
  // still dominates and steepens the first step, so the slope is measured from D = 64 on, and over
  // the last step alone.
  const double slope = std::log(err[3] / err[1]) / std::log(1024.0 / 64.0);
  const double last = std::log(err[3] / err[2]) / std::log(4.0);
  INFO("slope from D = 64: " << slope << ", over the last step: " << last);
  for (double sl : {slope, last}) {
    REQUIRE(sl < -0.35);
    REQUIRE(sl > -0.7);
  }
}

namespace {

// Bernstein's inequality for the mean of D i.i.d. terms with variance σ² and |X − μ| ≤ b:
// P(|mean − μ| ≥ ε) ≤ 2 exp(−D ε² / (2σ² + 2bε/3)). Returns the ε at which that is 2 e^{−L}.
double bernstein(double var, double b, double D, double L) {
  const double a = b * L / (3 * D);
  return a + std::sqrt(a * a + 2 * var * L / D);
}

// Where sin/cos RFA of one query tends as D grows, and how far from it D features can stray.
// With Δ_i = x_q − x_i (the inputs the map projects: q̂ − k̂_i, or q − k_i raw) and rows w_j ~ N(0, s²I),
// φ(q)·φ(k_i) = (1/D) Σ_j cos(w_j·Δ_i), of mean κ_i = exp(−s²‖Δ_i‖²/2). So the readout is exactly
// o + Ŷ/Ẑ, with o = Σ κ_i v_i / Z the limit, Ẑ = (1/D) Σ_j Σ_i cos(w_j·Δ_i) of mean Z = Σ κ_i, and
// Ŷ_c = (1/D) Σ_j Σ_i cos(w_j·Δ_i) (v_ic − o_c) of mean 0: both means of D i.i.d. bounded terms whose
// variance is known in closed form, since E[cos a cos b] = (E cos(a − b) + E cos(a + b))/2. With
// probability ≥ 1 − 2e^{−L} each, |Ẑ − Z| ≤ ε_Z and |Ŷ_c| ≤ ε_Y, so |out_c − o_c| ≤ ε_Y / (Z − ε_Z).
struct Limit {
  std::vector<double> out, tol;
};

Limit rfa_limit(const std::vector<double>& xq, const ref::Mat& xk, const ref::Mat& v, double s, double D, double L) {
  const size_t n = xk.size(), dv = v[0].size(), d = xq.size();
  ref::Mat delta(n, std::vector<double>(d));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < d; ++j) delta[i][j] = xq[j] - xk[i][j];
  const auto mean_cos = [&](size_t i, size_t l, double sign) {  // E cos(w·(Δ_i + sign Δ_l))
    double d2 = 0;
    for (size_t j = 0; j < d; ++j) d2 += (delta[i][j] + sign * delta[l][j]) * (delta[i][j] + sign * delta[l][j]);
    return std::exp(-s * s * d2 / 2);
  };
  std::vector<double> kappa(n);
  double Z = 0;
  for (size_t i = 0; i < n; ++i) Z += kappa[i] = mean_cos(i, i, 0);
  ref::Mat cov(n, std::vector<double>(n));
  for (size_t i = 0; i < n; ++i)
    for (size_t l = 0; l < n; ++l) cov[i][l] = (mean_cos(i, l, -1) + mean_cos(i, l, 1)) / 2 - kappa[i] * kappa[l];
  const auto variance = [&](const std::vector<double>& c) {
    double var = 0;
    for (size_t i = 0; i < n; ++i)
      for (size_t l = 0; l < n; ++l) var += c[i] * c[l] * cov[i][l];
    return std::max(var, 0.0);
  };
  const double eps_z = bernstein(variance(std::vector<double>(n, 1.0)), double(n) + Z, D, L);
  REQUIRE(eps_z < Z / 2);  // the bound says something at this D
  Limit r;
  for (size_t c = 0; c < dv; ++c) {
    double o = 0, b = 0;
    for (size_t i = 0; i < n; ++i) o += kappa[i] * v[i][c] / Z;
    std::vector<double> centred(n);
    for (size_t i = 0; i < n; ++i) {
      centred[i] = v[i][c] - o;
      b += std::abs(centred[i]);
    }
    r.out.push_back(o);
    r.tol.push_back(bernstein(variance(centred), b, D, L) / (Z - eps_z) + 1e-12);
  }
  return r;
}

std::vector<double> unit_row(std::vector<double> x) {
  const double n = std::sqrt(ref::dot(x, x));
  for (auto& e : x) e /= n;
  return x;
}

}  // namespace

TEST_CASE("RFA with the default unit-norm inputs tends to softmax(s² q̂·k̂) V, within a Bernstein bound at each D; raw to the Gaussian kernel's weights",
          "[control][random_feature][statistical]") {
  // Queries and keys of norms between 0.3 and 1.5, given to the map as they are: the default map
  // must normalise them. The unit limit Σ_i exp(−s²‖q̂ − k̂_i‖²/2) v_i / Σ_i … is softmax(s² q̂·k̂) V
  // (the factor e^{−s²} cancels), checked below against the library's exact softmax as well. The
  // bounds hold together with probability ≥ 1 − 1e−9 over the draw of W (union bound over every
  // query, column, D and form), so the seeded draw is no lucky pick; they shrink as D^{−1/2}.
  const Index d = 4, dv = 3, n_keys = 16, n_q = 8;
  const double s = 1.0;
  auto q = ref::random<double>(n_q, d, 61), k = ref::random<double>(n_keys, d, 62), v = ref::random<double>(n_keys, dv, 63);
  const auto rescale = [&](abc::Matrix<double>& m, std::uint64_t seed) {
    const auto f = ref::random<double>(m.rows(), 1, seed);
    for (Index i = 0; i < m.rows(); ++i) m.row(i) *= (0.3 + 1.2 * (f(i, 0) + 1) / 2) / m.row(i).norm();
  };
  rescale(q, 64);
  rescale(k, 65);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  ref::Mat uq, uk;
  for (const auto& r : rq) uq.push_back(unit_row(r));
  for (const auto& r : rk) uk.push_back(unit_row(r));
  const std::vector<Index> sizes = {4096, 16384, 65536};
  const double events = double(sizes.size()) * 2 * double(n_q) * double(dv + 1);
  const double L = std::log(2 * events / 1e-9);
  // The exact softmax over the normalised inputs, inverse temperature s².
  abc::Matrix<double> qn = q, kn = k;
  for (Index i = 0; i < n_q; ++i) qn.row(i).normalize();
  for (Index i = 0; i < n_keys; ++i) kn.row(i).normalize();
  abc::Options inv_temp;
  inv_temp.scale = s * s;
  const abc::Matrix<double> softmax =
      abc::BoundedAttention{abc::control::Identity<double>{n_keys}, inv_temp}.forward(qn, kn, v);
  int apart = 0;  // outputs whose two limits differ by more than both bounds at the largest D
  for (Index D : sizes) {
    const abc::Matrix<double> w = abc::feature::Projection<double>(D, d, abc::Seed{2021}, s).draw();
    const abc::Matrix<double> unit =
        abc::BoundedAttention{abc::control::RandomFeature<double>{abc::feature::RandomFourier<double>(w)}}.forward(q, k, v);
    const abc::Matrix<double> raw = abc::BoundedAttention{abc::control::RandomFeature<double>{
        abc::feature::RandomFourier<double>(w, InputNorm::raw)}}.forward(q, k, v);
    for (Index t = 0; t < n_q; ++t) {
      const Limit lu = rfa_limit(uq[size_t(t)], uk, rv, s, double(D), L);
      const Limit lr = rfa_limit(rq[size_t(t)], rk, rv, s, double(D), L);
      for (Index c = 0; c < dv; ++c) {
        const size_t cc = size_t(c);
        INFO("D = " << D << ", query " << t << ", column " << c << ": unit " << unit(t, c) << " vs " << lu.out[cc]
                    << " ± " << lu.tol[cc] << ", raw " << raw(t, c) << " vs " << lr.out[cc] << " ± " << lr.tol[cc]);
        REQUIRE(std::abs(lu.out[cc] - softmax(t, c)) < 1e-12);
        REQUIRE(std::abs(unit(t, c) - lu.out[cc]) <= lu.tol[cc]);
        REQUIRE(std::abs(raw(t, c) - lr.out[cc]) <= lr.tol[cc]);
        if (D == sizes.back() && std::abs(lu.out[cc] - lr.out[cc]) > lu.tol[cc] + lr.tol[cc]) ++apart;
      }
    }
  }
  // The two limits are far enough apart, beyond both bounds, that the default cannot be raw.
  REQUIRE(2 * apart >= int(n_q * dv));
}

TEMPLATE_TEST_CASE("RFA with unit inputs: zero, subnormal and huge rows give finite outputs that match the float64 reference in every form",
                   "[control][random_feature][numerics]", float, double) {
  using T = TestType;
  using lim = std::numeric_limits<T>;
  const Index d = 3, dv = 2, D = 32;
  // Rows of every magnitude; the direction of each is an ordinary unit vector, so the features and
  // the outputs are of ordinary size and the float tolerances of ref::require_close apply.
  const T dm = lim::denorm_min(), big = T(1e30), mx = lim::max();
  const std::vector<std::vector<T>> rows = {
      {T(0.3), T(-0.7), T(0.2)}, {T(0), T(0), T(0)},     {dm, -2 * dm, 3 * dm},      {big, -big, T(0.5) * big},
      {mx, mx, -mx},             {mx, dm, T(-1)},         {T(-0.4), T(0.1), T(0.9)}, {lim::min(), T(0), -lim::min()},
      {T(-1e-30), T(2e-30), T(0)}, {T(0.8), T(0.6), T(-0.1)}};
  const Index n_tok = Index(rows.size());
  abc::Matrix<T> q(n_tok, d), k(n_tok, d);
  for (Index i = 0; i < n_tok; ++i)
    for (Index j = 0; j < d; ++j) {
      q(i, j) = rows[size_t(i)][size_t(j)];
      k(n_tok - 1 - i, j) = rows[size_t(i)][size_t(j)];  // every kind of row meets every other
    }
  const abc::Matrix<T> v = ref::random<T>(n_tok, dv, 71);
  // σ = 0.5 keeps the sin/cos kernel of unit inputs ≥ e^{−1/2}: the denominators stay well away from 0.
  const abc::Matrix<T> w = abc::feature::Projection<T>(D, d, abc::Seed{72}, T(0.5)).draw();
  const auto rw = ref::from(w), rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  for (bool arccos : {false, true}) {
    INFO("arccos " << arccos);
    const auto run = [&](const auto& fmap) {
      using Map = std::decay_t<decltype(fmap)>;
      const abc::BoundedAttention attn{abc::control::RandomFeature<T, Map>{fmap}};
      const auto causal = rfa(rw, rq, rk, rv, true, {}, arccos, true);
      ref::require_close(attn.forward(q, k, v), rfa(rw, rq, rk, rv, false, {}, arccos, true));
      for (auto kernel : {abc::CausalKernel::chunked, abc::CausalKernel::recurrent})
        for (Index chunk : {Index(1), Index(4), Index(64)}) {
          abc::Options o;
          o.causal_kernel = kernel;
          o.chunk = chunk;
          INFO("kernel " << int(kernel) << ", chunk " << chunk);
          ref::require_close(abc::BoundedAttention{abc::control::RandomFeature<T, Map>{fmap}, o}.forward_causal(q, k, v),
                             causal);
        }
      auto state = attn.make_state(d, dv);
      abc::Matrix<T> steps(n_tok, dv);
      for (Index t = 0; t < n_tok; ++t)
        steps.row(t) = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose()).transpose();
      ref::require_close(steps, causal);
      for (Index split : {Index(1), Index(3), Index(7)}) {
        INFO("split at " << split);
        auto st = attn.make_state(d, dv);
        abc::Matrix<T> out(n_tok, dv);
        const Index rest = n_tok - split;
        out.topRows(split) = attn.forward_causal(st, q.topRows(split), k.topRows(split), v.topRows(split));
        out.bottomRows(rest) = attn.forward_causal(st, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest));
        ref::require_close(out, causal);
      }
    };
    if (arccos)
      run(abc::feature::ArcCosine<T>(w));
    else
      run(abc::feature::RandomFourier<T>(w));
  }
}

}  // namespace random_feature_test
