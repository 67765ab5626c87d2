// SPDX-License-Identifier: MIT
// abc tests: control::RandomFeature (RFA) against a float64 plain-loop reference of Eq. 4.5–4.8,
// the gate limits, the denominator rule, and the approach to softmax attention as D grows.
#include <abc/bounded_attention.hpp>
#include <abc/control/identity.hpp>
#include <abc/control/random_feature.hpp>
#include <abc/feature/arc_cosine.hpp>
#include <abc/feature/projection.hpp>
#include <abc/feature/random_fourier.hpp>

#include <cmath>
#include <vector>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"

namespace {

using abc::Index;

// φ(x) = sqrt(1/D)[sin(Wx), cos(Wx)] (or sqrt(1/D) relu(Wx)), in double, from the definition.
std::vector<double> phi(const ref::Mat& w, std::vector<double> x, bool arccos, bool normalize) {
  if (normalize) {
    const double nx = std::sqrt(ref::dot(x, x));
    if (nx > 0)
      for (auto& e : x) e /= nx;
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
             const std::vector<double>& gates, bool arccos, bool normalize) {
  ref::Mat out;
  for (size_t t = 0; t < q.size(); ++t) {
    const auto fq = phi(w, q[t], arccos, normalize);
    const size_t end = causal ? t + 1 : k.size();
    std::vector<double> num(v[0].size(), 0.0);
    double den = 0;
    for (size_t i = 0; i < end; ++i) {
      double a = 1;
      if (!gates.empty()) {
        a = 1 - gates[i];
        for (size_t j = i + 1; j <= t; ++j) a *= gates[j];
      }
      const double s = a * ref::dot(fq, phi(w, k[i], arccos, normalize));
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

TEMPLATE_TEST_CASE("RandomFeature matches the float64 reference: non-causal, causal, cross, gated",
                   "[control][random_feature]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 5, D = 24;
  for (Index n_tok : kSizes)
    for (bool arccos : {false, true}) {
      const std::uint64_t seed = std::uint64_t(n_tok) * 7 + (arccos ? 1 : 0);
      auto q = ref::random<T>(n_tok, d, seed + 1), k = ref::random<T>(n_tok, d, seed + 2);
      auto v = ref::random<T>(n_tok, dv, seed + 3), qx = ref::random<T>(n_tok / 2 + 3, d, seed + 4);
      const abc::Matrix<T> w = abc::feature::Projection<T>(D, d, seed, T(0.8)).draw(3);
      const auto rw = ref::from(w), rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
      // Gates in (0, 1) per position, and the learned-gate form below.
      std::vector<T> gates(static_cast<size_t>(n_tok));
      for (Index i = 0; i < n_tok; ++i) gates[size_t(i)] = T(0.5 + 0.45 * std::sin(double(i)));
      std::vector<double> rg(gates.begin(), gates.end());
      INFO("N = " << n_tok << ", arccos " << arccos);
      auto check = [&](const auto& fmap) {
        abc::BoundedAttention plain{abc::control::RandomFeature<T, std::decay_t<decltype(fmap)>>{fmap}};
        ref::require_close(plain.forward(q, k, v), rfa(rw, rq, rk, rv, false, {}, arccos, true));
        ref::require_close(plain.forward(qx, k, v), rfa(rw, ref::from(qx), rk, rv, false, {}, arccos, true));
        ref::require_close(plain.forward_causal(q, k, v), rfa(rw, rq, rk, rv, true, {}, arccos, true));
        abc::BoundedAttention gated{abc::control::RandomFeature<T, std::decay_t<decltype(fmap)>>{fmap, gates}};
        ref::require_close(gated.forward_causal(q, k, v), rfa(rw, rq, rk, rv, true, rg, arccos, true));
      };
      if (arccos)
        check(abc::feature::ArcCosine<T>(w, true));
      else
        check(abc::feature::RandomFourier<T>(w, true));
    }
}

TEMPLATE_TEST_CASE("RandomFeature: step loop = chunked = split at every position, plain and gated",
                   "[control][random_feature][recurrent]", float, double) {
  using T = TestType;
  const Index d = 5, dv = 4, D = 16, n_tok = 70;
  auto q = ref::random<T>(n_tok, d, 11), k = ref::random<T>(n_tok, d, 12), v = ref::random<T>(n_tok, dv, 13);
  auto x = ref::random<T>(n_tok, 3, 14);
  const abc::Matrix<T> w = abc::feature::Projection<T>(D, d, 5).draw();
  abc::Vector<T> wg = ref::random<T>(3, 1, 15, 2.0);
  using RF = abc::control::RandomFeature<T>;
  for (int form = 0; form < 2; ++form)
    for (Index chunk : {Index(1), Index(9), Index(64)}) {
      abc::Options opts;
      opts.chunk = chunk;
      const RF control = form == 0 ? RF{abc::feature::RandomFourier<T>(w)}
                                   : RF{abc::feature::RandomFourier<T>(w), wg, T(0.3)};
      abc::BoundedAttention attn{control, opts};
      INFO("form " << form << ", chunk " << chunk);
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
  const abc::Matrix<T> w = abc::feature::Projection<T>(32, d, 9, T(0.5)).draw();
  abc::BoundedAttention attn{abc::control::RandomFeature<T>{abc::feature::RandomFourier<T>(w), std::vector<T>(n_tok, T(0))}};
  // S_t = φ(k_t) ⊗ v_t and z_t = φ(k_t): the ratio is v_t whenever φ(q_t)·φ(k_t) ≠ 0.
  ref::require_close(attn.forward_causal(q, k, v), ref::from(v));
}

TEMPLATE_TEST_CASE("RandomFeature: the denominator rule at zero and negative denominators",
                   "[control][random_feature][numerics]", float, double) {
  using T = TestType;
  // D = 1, d = 1: φ(q)·φ(k) = cos(w (q − k)). With w (q − k) = 2.5 it is cos 2.5 < 0.
  abc::Matrix<T> w(1, 1), q(1, 1), k(1, 1), v(1, 2);
  w << T(1);
  q << T(2.5);
  k << T(0);
  v << T(0.25), T(-2);
  abc::BoundedAttention exact{abc::control::RandomFeature<T>{abc::feature::RandomFourier<T>(w)}};
  ref::require_close(exact.forward(q, k, v), ref::Mat{{0.25, -2.0}});  // num/den = v: the sign cancels
  abc::BoundedAttention floored{abc::control::RandomFeature<T>{abc::feature::RandomFourier<T>(w), T(0.1)}};
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
  const abc::Matrix<T> w = abc::feature::Projection<T>(8, 4, 1).draw();
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
      const abc::Matrix<double> w = abc::feature::Projection<double>(D, d, 77, s).draw(std::uint64_t(r));
      abc::BoundedAttention attn{abc::control::RandomFeature<double>{abc::feature::RandomFourier<double>(w, true)}};
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
