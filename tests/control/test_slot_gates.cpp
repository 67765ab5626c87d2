// SPDX-License-Identifier: MIT
// abc tests: control::SlotGates (Gated Slot Attention) against a float64 plain-loop run of the GSA
// recurrence K̃_t = diag(f_t) K̃_{t−1} + (1 − f_t) ⊗ k_t, f_t = σ(W_f x_t + b_f)^(1/τ): every form and
// split, gates from 1e-30 to 1 − 1e-7, logits of ±1e4, the fla layer convention, errors.
#include <abc/bounded_attention.hpp>
#include <abc/control/slot_gates.hpp>
#include <abc/state_io.hpp>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace slot_gates_test {

namespace {

using abc::Index;
using abc::control::SlotGates;

// log f = log σ(s) / τ in double, straight from the definition; log σ(s) is written for each sign
// of s so that neither branch takes the exponential of a positive number.
double log_gate(double s, double tau) {
  const double log_sigma = s >= 0 ? -std::log1p(std::exp(-s)) : s - std::log1p(std::exp(s));
  return log_sigma / tau;
}

// The logit s with σ(s)^(1/τ) = f: log σ = τ log f, s = log σ − log(1 − σ).
double logit_for_gate(double log_f, double tau) {
  const double log_sigma = tau * log_f;
  return log_sigma - std::log(-std::expm1(log_sigma));
}

// The GSA schedule of token t: decay f_t, write 1 − f_t (from the log, so 1 − f keeps its digits).
struct GsaRef {
  ref::Mat w, x;          // W_f [n × d_x], X [N × d_x]
  std::vector<double> b;  // b_f [n]
  double tau;

  ref::Step step(size_t t) const {
    ref::Step s{std::vector<double>(w.size()), std::vector<double>(w.size())};
    for (size_t l = 0; l < w.size(); ++l) {
      const double lf = log_gate(ref::dot(w[l], x[t]) + b[l], tau);
      s.a[l] = std::exp(lf);
      s.w[l] = -std::expm1(lf);
    }
    return s;
  }
  ref::ScheduleFn schedule() const {
    return [this](size_t t) { return step(t); };
  }
};

template <class T>
GsaRef reference(const SlotGates<T>& c, const abc::Matrix<T>& x) {
  const abc::Matrix<T> b = c.bias().transpose();
  return GsaRef{ref::from(c.weights()), ref::from(x), ref::from(b)[0], double(c.tau())};
}

template <class T>
abc::Matrix<T> step_loop(const abc::BoundedAttention<SlotGates<T>>& attn, const abc::Matrix<T>& q,
                         const abc::Matrix<T>& k, const abc::Matrix<T>& v, const abc::Matrix<T>& x) {
  auto state = attn.make_state(k.cols(), v.cols());
  abc::Matrix<T> out(q.rows(), v.cols());
  for (Index t = 0; t < q.rows(); ++t)
    out.row(t) = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose(),
                           x.row(t).transpose()).transpose();
  return out;
}

// The sequence cut at every position in `cuts` (increasing), each piece continued from the carried
// state; pieces alternate between forward_causal and a step loop.
template <class T>
abc::Matrix<T> pieces(const abc::BoundedAttention<SlotGates<T>>& attn, const abc::Matrix<T>& q, const abc::Matrix<T>& k,
                      const abc::Matrix<T>& v, const abc::Matrix<T>& x, std::vector<Index> cuts, bool steps) {
  auto state = attn.make_state(k.cols(), v.cols());
  abc::Matrix<T> out(q.rows(), v.cols());
  cuts.push_back(q.rows());
  Index begin = 0;
  for (size_t i = 0; i < cuts.size(); ++i) {
    const Index c = cuts[i] - begin;
    if (steps && i % 2 == 1) {
      for (Index t = begin; t < cuts[i]; ++t)
        out.row(t) = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose(),
                               x.row(t).transpose()).transpose();
    } else {
      out.middleRows(begin, c) = attn.forward_causal(state, q.middleRows(begin, c), k.middleRows(begin, c),
                                                     v.middleRows(begin, c), x.middleRows(begin, c));
    }
    begin = cuts[i];
  }
  REQUIRE(state.position() == q.rows());
  return out;
}

double swish(double z) { return z / (1 + std::exp(-z)); }

}  // namespace

TEMPLATE_TEST_CASE("SlotGates matches the float64 GSA recurrence in every form", "[control][slot_gates]", float,
                   double) {
  using T = TestType;
  const Index d = 8, dv = 5, dx = 11;  // d_x ≠ d ≠ dv
  static_assert(abc::is_control_policy_v<SlotGates<T>>, "a control");
  static_assert(!abc::is_sparse_control_v<SlotGates<T>>, "dense");
  for (Index n : {Index(1), Index(5), Index(64)})
    for (Index n_tok : {Index(1), Index(7), Index(37), Index(65), Index(100)})
      for (double tau : {8.0, 1.0}) {
        const std::uint64_t seed = std::uint64_t(n * 1000 + n_tok);
        auto q = ref::random<T>(n_tok, d, seed + 1), k = ref::random<T>(n_tok, d, seed + 2);
        auto v = ref::random<T>(n_tok, dv, seed + 3), x = ref::random<T>(n_tok, dx, seed + 4, 2.0);
        auto qx = ref::random<T>(n_tok / 3 + 2, d, seed + 5);  // cross: queries of another length
        const abc::Matrix<T> w = ref::random<T>(n, dx, seed + 6, 1.5);
        const abc::Vector<T> b = ref::random<T>(n, 1, seed + 7, 2.0);
        const SlotGates<T> control(w, b, T(tau));
        const GsaRef r = reference(control, x);
        const double scale = 1 / std::sqrt(double(d));
        const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
        INFO("n = " << n << ", N = " << n_tok << ", tau = " << tau);
        abc::BoundedAttention attn{control};
        ref::require_close(attn.forward(q, k, v, x), ref::recurrence_noncausal(r.schedule(), size_t(n), rq, rk, rv, scale));
        ref::require_close(attn.forward(qx, k, v, x),
                           ref::recurrence_noncausal(r.schedule(), size_t(n), ref::from(qx), rk, rv, scale));
        ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(r.schedule(), size_t(n), rq, rk, rv, scale), &x);
      }
}

TEMPLATE_TEST_CASE("SlotGates: split anywhere (N = 37 cut at 1, 13, 36) equals one call and the reference",
                   "[control][slot_gates][recurrent]", float, double) {
  using T = TestType;
  const Index d = 7, dv = 6, dx = 3, n = 9, n_tok = 37;
  auto q = ref::random<T>(n_tok, d, 301), k = ref::random<T>(n_tok, d, 302), v = ref::random<T>(n_tok, dv, 303);
  auto x = ref::random<T>(n_tok, dx, 304, 3.0);
  const SlotGates<T> control(abc::Slots{n}, dx, abc::Seed{17});
  const GsaRef r = reference(control, x);
  const ref::Mat want = ref::recurrence_causal(r.schedule(), size_t(n), ref::from(q), ref::from(k), ref::from(v),
                                               1 / std::sqrt(double(d)));
  for (auto kernel : {abc::CausalKernel::chunked, abc::CausalKernel::recurrent})
    for (Index chunk : {Index(1), Index(4), Index(16), Index(64)}) {
      abc::BoundedAttention attn{control, ref::kernel_options(kernel, chunk)};
      INFO("kernel " << int(kernel) << ", chunk " << chunk);
      const abc::Matrix<T> whole = attn.forward_causal(q, k, v, x);
      ref::require_close(whole, want);
      ref::require_same(step_loop(attn, q, k, v, x), whole);
      for (bool steps : {false, true}) {
        INFO("pieces by " << (steps ? "forward_causal and step" : "forward_causal"));
        const abc::Matrix<T> cut = pieces(attn, q, k, v, x, {1, 13, 36}, steps);
        ref::require_same(cut, whole);
        ref::require_close(cut, want);
      }
      for (Index split = 0; split <= n_tok; ++split) {
        INFO("split at " << split);
        ref::require_same(pieces(attn, q, k, v, x, {split}, false), whole);
      }
    }
}

TEMPLATE_TEST_CASE("SlotGates gates: exact from 1e-30 to 1 − 1e-7, where the naive form loses 1 − f",
                   "[control][slot_gates][numerics]", float, double) {
  using T = TestType;
  // W_f = 0, so the logits are the biases exactly and the gate values measure the conversion alone.
  const double targets[] = {1e-30, 1e-12, 1e-3, 0.5, 1 - 1e-4, 1 - 1e-7};
  const Index n = 6, dx = 2;
  for (double tau : {1.0, 8.0, 0.5}) {
    abc::Vector<T> b(n);
    for (Index l = 0; l < n; ++l) b(l) = T(logit_for_gate(std::log(targets[l]), tau));
    const SlotGates<T> control(abc::Matrix<T>::Zero(n, dx), b, T(tau));
    abc::Matrix<T> x = ref::random<T>(3, dx, 1), slot_state(2, n), decay(3, n), write(3, n);
    control.schedule(0, x, slot_state, decay, write);
    for (Index l = 0; l < n; ++l) {
      // The reference from the same (rounded) logit: what remains is the kernel's own error. log f
      // carries a relative rounding of a few ε, so f carries |log f| times that (4e-6 in float at
      // f = 1e-30); 1 − f keeps a few ε.
      const double lf = log_gate(double(b(l)), tau), f = std::exp(lf), one_minus_f = -std::expm1(lf);
      const double eps = std::numeric_limits<T>::epsilon();
      INFO("tau " << tau << ", target gate " << targets[l] << ", gate " << f << ", 1 − f " << one_minus_f);
      for (Index t = 0; t < 3; ++t) {
        REQUIRE(std::abs(double(decay(t, l)) - f) <= 8 * eps * std::max(1.0, std::abs(lf)) * f);
        REQUIRE(std::abs(double(write(t, l)) - one_minus_f) <= 8 * eps * one_minus_f);
      }
      REQUIRE(std::abs(f - targets[l]) <= 1e-3 * targets[l]);  // the biases hit their targets
    }
  }
  // Naively, σ(s) rounded to T and then 1 − σ: in float the gate 1 − 1e-7 becomes 1 − 1.19e-7.
  const T s = T(logit_for_gate(std::log(1 - 1e-7), 1.0));
  const T naive = T(1) - T(1) / (T(1) + std::exp(-s));
  const double naive_err = std::abs(double(naive) - 1e-7) / 1e-7;
  if (std::is_same<T, float>::value) REQUIRE(naive_err > 0.05);
  abc::Matrix<T> x1 = abc::Matrix<T>::Ones(1, 1), slot_state(2, 1), decay(1, 1), write(1, 1);
  SlotGates<T>(abc::Matrix<T>::Ones(1, 1) * s, T(1)).schedule(0, x1, slot_state, decay, write);
  REQUIRE(std::abs(double(write(0, 0)) - 1e-7) <= 1e-5 * 1e-7);  // the logit's rounding in T, 1e-6
}

TEMPLATE_TEST_CASE("SlotGates with gates from 1e-30 to 1 − 1e-7 matches the reference in every form",
                   "[control][slot_gates][numerics]", float, double) {
  using T = TestType;
  const double targets[] = {1e-30, 1e-12, 1e-3, 0.5, 1 - 1e-4, 1 - 1e-7};
  const Index d = 6, dv = 4, dx = 3, n = 6, n_tok = 37;
  auto q = ref::random<T>(n_tok, d, 401), k = ref::random<T>(n_tok, d, 402), v = ref::random<T>(n_tok, dv, 403);
  auto x = ref::random<T>(n_tok, dx, 404);
  const abc::Matrix<T> w = ref::random<T>(n, dx, 405, 0.05);  // gates within a few percent of the targets
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  for (double tau : {1.0, 8.0}) {
    abc::Vector<T> b(n);
    for (Index l = 0; l < n; ++l) b(l) = T(logit_for_gate(std::log(targets[l]), tau));
    const SlotGates<T> control(w, b, T(tau));
    const GsaRef r = reference(control, x);
    INFO("tau " << tau);
    abc::BoundedAttention attn{control};
    const abc::Matrix<T> nc = attn.forward(q, k, v, x);
    REQUIRE(nc.allFinite());
    ref::require_close(nc, ref::recurrence_noncausal(r.schedule(), size_t(n), rq, rk, rv, 1 / std::sqrt(double(d))));
    ref::require_causal_forms(control, q, k, v,
                              ref::recurrence_causal(r.schedule(), size_t(n), rq, rk, rv, 1 / std::sqrt(double(d))), &x);
    auto state = attn.make_state(d, dv);
    const abc::Matrix<T> oc = attn.forward_causal(state, q, k, v, x);
    REQUIRE(oc.allFinite());
    REQUIRE(state.keys().allFinite());
    REQUIRE(state.values().allFinite());
    REQUIRE(state.num_written() == n);  // every gate below 1: every slot written from token 0
    // The slot with gate 1 − 1e-7 holds 1e-7 Σ_i k_i (to 4e-6): it is neither lost nor rounded to 0.
    std::vector<double> slow(size_t(d), 0.0);
    for (Index t = 0; t < n_tok; ++t) {
      const ref::Step s = r.step(size_t(t));
      for (Index j = 0; j < d; ++j) slow[size_t(j)] = s.a[5] * slow[size_t(j)] + s.w[5] * double(k(t, j));
    }
    ref::require_close(abc::Matrix<T>(state.keys().row(5)), ref::Mat{slow});
  }
}

TEMPLATE_TEST_CASE("SlotGates logits of ±1e4 give finite outputs equal to the reference", "[control][slot_gates][numerics]",
                   float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, dx = 4, n = 6, n_tok = 130;
  // Integer weights ×1000 and inputs in {−1, 0, 1}: logits are exact multiples of 1000 up to ±1e4
  // in both types. 1000 and above give a gate of exactly 1 (no write), −1000 and below a gate of 0.
  const abc::Matrix<T> w = ref::integers<T>(n, dx, 701, 3.49, 1000), x = ref::integers<T>(n_tok, dx, 702, 1.49);
  const abc::Matrix<T> logits = x * w.transpose();
  REQUIRE(logits.cwiseAbs().maxCoeff() >= T(5000));
  REQUIRE(logits.cwiseAbs().maxCoeff() <= T(14000));
  REQUIRE((logits.array() >= T(1000)).count() > 0);
  REQUIRE((logits.array() <= T(-1000)).count() > 0);
  auto q = ref::random<T>(n_tok, d, 703), k = ref::random<T>(n_tok, d, 704), v = ref::random<T>(n_tok, dv, 705);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  for (double tau : {1.0, 8.0}) {
    abc::Options opts;
    opts.scale = 0.5;
    const SlotGates<T> control(w, T(tau));
    const GsaRef r = reference(control, x);
    abc::BoundedAttention attn{control, opts};
    INFO("tau " << tau);
    ref::require_close(attn.forward(q, k, v, x), ref::recurrence_noncausal(r.schedule(), size_t(n), rq, rk, rv, 0.5));
    const ref::Mat want = ref::recurrence_causal(r.schedule(), size_t(n), rq, rk, rv, 0.5);
    ref::require_close(attn.forward_causal(q, k, v, x), want);
    ref::require_close(step_loop(attn, q, k, v, x), want);
  }
}

TEMPLATE_TEST_CASE("SlotGates: finite inputs whose logits overflow give gates in [0, 1] and finite states",
                   "[control][slot_gates][numerics]", float, double) {
  using T = TestType;
  // W_f x overflows to +∞, −∞ or NaN (+∞ − ∞) on finite inputs: saturated, or a gate of σ(0)^(1/τ).
  const T big = std::numeric_limits<T>::max() / T(2);
  const Index d = 4, dv = 2, n = 3, n_tok = 6;
  abc::Matrix<T> w(n, d);
  w << 1, 1, 1, 1,  //
      1, -1, 1, -1,  //
      -1, -1, 0, 0;
  abc::Matrix<T> x = abc::Matrix<T>::Constant(n_tok, d, big);
  x.row(2).setConstant(T(0.5));
  const auto q = ref::random<T>(n_tok, d, 1), k = ref::random<T>(n_tok, d, 2), v = ref::random<T>(n_tok, dv, 3);
  abc::BoundedAttention attn{SlotGates<T>(w)};
  auto state = attn.make_state(d, dv);
  for (Index t = 0; t < n_tok; ++t) {
    const abc::Vector<T> o = attn.step(state, q.row(t), k.row(t), v.row(t), x.row(t));
    INFO("token " << t);
    REQUIRE(o.allFinite());
    REQUIRE(state.keys().allFinite());
    REQUIRE(state.values().allFinite());
  }
  REQUIRE(attn.forward_causal(q, k, v, x).allFinite());
  REQUIRE(attn.forward(q, k, v, x).allFinite());
  // The kernel alone: NaN counts as 0, ±∞ as ±max.
  abc::Matrix<T> s(1, 4), decay(1, 4), write(1, 4);
  s << std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(), T(0);
  abc::kernel::forget_gate(s.data(), T(8), decay.data(), write.data(), 4);
  REQUIRE(decay(0, 0) == decay(0, 3));
  REQUIRE(write(0, 0) == write(0, 3));
  REQUIRE(std::abs(double(decay(0, 3)) - std::pow(0.5, 1.0 / 8)) <= 1e-6);
  REQUIRE((decay(0, 1) == T(1) && write(0, 1) == T(0)));
  REQUIRE((decay(0, 2) == T(0) && write(0, 2) == T(1)));
}

TEMPLATE_TEST_CASE("SlotGates: a slot whose gates are exactly 1 holds nothing and is masked until written",
                   "[control][slot_gates][empty]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, n = 3, n_tok = 12;
  // Slot 2's logit is +1e4 while x = 1 (a gate of exactly 1: no write) and −1e4 from token 5 on.
  abc::Matrix<T> w(n, 1);
  w << T(0.3), T(-0.7), T(1e4);
  abc::Matrix<T> x = abc::Matrix<T>::Ones(n_tok, 1);
  x.bottomRows(n_tok - 5).setConstant(T(-1));
  auto q = ref::random<T>(n_tok, d, 11), k = ref::random<T>(n_tok, d, 12), v = ref::random<T>(n_tok, dv, 13);
  const SlotGates<T> control(w);
  abc::BoundedAttention attn{control};
  auto state = attn.make_state(d, dv);
  for (Index t = 0; t < n_tok; ++t) {
    attn.step(state, q.row(t), k.row(t), v.row(t), x.row(t));
    REQUIRE(state.written(0));
    REQUIRE(state.written(1));
    REQUIRE(state.written(2) == (t >= 5));
    if (t < 5) REQUIRE(state.keys().row(2).isZero(0));
  }
  const GsaRef r = reference(control, x);
  const double scale = 0.5;
  const ref::Mat want = ref::recurrence_causal(r.schedule(), size_t(n), ref::from(q), ref::from(k), ref::from(v), scale);
  ref::require_causal_forms(control, q, k, v, want, &x);
  // Read literally, the empty slot takes mass exp(0) for its zero key: the first outputs differ.
  abc::Options literal;
  literal.empty_slots = abc::EmptySlots::literal;
  const abc::Matrix<T> lit = abc::BoundedAttention{control, literal}.forward_causal(q, k, v, x);
  const abc::Matrix<T> masked = attn.forward_causal(q, k, v, x);
  REQUIRE((lit.topRows(5) - masked.topRows(5)).cwiseAbs().maxCoeff() > T(1e-3));
  ref::require_same(abc::Matrix<T>(lit.bottomRows(n_tok - 5)), abc::Matrix<T>(masked.bottomRows(n_tok - 5)));
}

TEMPLATE_TEST_CASE("a GSA layer in the fla convention equals its plain-loop definition",
                   "[control][slot_gates][gsa]", float, double) {
  using T = TestType;
  // fla's GatedSlotAttention: q = swish(x W_qᵀ), k = swish(x W_kᵀ), v = swish(x W_vᵀ), gate logits
  // x W_fᵀ (no bias), f = σ(·)^(1/8), read with scale 1 by a softmax over all n slots; the output
  // norm and projection follow the attention and are not part of it.
  const Index n_tok = 37, d_model = 12, d = 8, dv = 6, n = 16;
  const double tau = 8;
  const abc::Matrix<T> x = ref::random<T>(n_tok, d_model, 901, 1.5);
  const abc::Matrix<T> wq = ref::random<T>(d, d_model, 902, 0.5), wk = ref::random<T>(d, d_model, 903, 0.5);
  const abc::Matrix<T> wv = ref::random<T>(dv, d_model, 904, 0.5), wf = ref::random<T>(n, d_model, 905, 0.5);
  const auto rx = ref::from(x), rwq = ref::from(wq), rwk = ref::from(wk), rwv = ref::from(wv), rwf = ref::from(wf);

  // The definition, in double: two loops over tokens and slots, nothing shared with the library.
  ref::Mat rq, rk, rv, want;
  ref::Mat km(size_t(n), std::vector<double>(size_t(d), 0.0)), vm(size_t(n), std::vector<double>(size_t(dv), 0.0));
  for (Index t = 0; t < n_tok; ++t) {
    std::vector<double> qt, kt, vt;
    for (Index j = 0; j < d; ++j) qt.push_back(swish(ref::dot(rwq[size_t(j)], rx[size_t(t)])));
    for (Index j = 0; j < d; ++j) kt.push_back(swish(ref::dot(rwk[size_t(j)], rx[size_t(t)])));
    for (Index j = 0; j < dv; ++j) vt.push_back(swish(ref::dot(rwv[size_t(j)], rx[size_t(t)])));
    rq.push_back(qt);
    rk.push_back(kt);
    rv.push_back(vt);
    std::vector<double> logit(static_cast<size_t>(n));
    double mx = -std::numeric_limits<double>::infinity();
    for (Index l = 0; l < n; ++l) {
      const double f = std::pow(1 / (1 + std::exp(-ref::dot(rwf[size_t(l)], rx[size_t(t)]))), 1 / tau);
      for (Index j = 0; j < d; ++j) km[size_t(l)][size_t(j)] = f * km[size_t(l)][size_t(j)] + (1 - f) * kt[size_t(j)];
      for (Index j = 0; j < dv; ++j) vm[size_t(l)][size_t(j)] = f * vm[size_t(l)][size_t(j)] + (1 - f) * vt[size_t(j)];
      logit[size_t(l)] = ref::dot(km[size_t(l)], qt);  // scale 1
      mx = std::max(mx, logit[size_t(l)]);
    }
    std::vector<double> o(size_t(dv), 0.0);
    double total = 0;
    for (Index l = 0; l < n; ++l) total += std::exp(logit[size_t(l)] - mx);
    for (Index l = 0; l < n; ++l)
      for (Index j = 0; j < dv; ++j) o[size_t(j)] += std::exp(logit[size_t(l)] - mx) / total * vm[size_t(l)][size_t(j)];
    want.push_back(o);
  }

  // The library: the caller projects and applies swish; the control reads the layer input x.
  auto project = [](const abc::Matrix<T>& in, const abc::Matrix<T>& wt) {
    abc::Matrix<T> p = in * wt.transpose();
    return abc::Matrix<T>(p.unaryExpr([](T z) { return T(z / (T(1) + std::exp(-z))); }));
  };
  const abc::Matrix<T> q = project(x, wq), k = project(x, wk), v = project(x, wv);
  ref::require_close(q, rq);  // the projections themselves agree before attention
  const SlotGates<T> gsa(wf);  // τ = 8, fla's gate_logit_normalizer
  REQUIRE(gsa.tau() == T(8));
  REQUIRE(gsa.input_dim() == d_model);
  for (auto empty : {abc::EmptySlots::masked, abc::EmptySlots::literal}) {
    abc::Options opts;
    opts.scale = 1;  // fla's GatedSlotAttention default
    opts.empty_slots = empty;  // every gate < 1 writes every slot from token 0: both readings agree
    abc::BoundedAttention attn{gsa, opts};
    INFO("empty slots " << int(empty));
    ref::require_close(attn.forward_causal(q, k, v, x), want);
    ref::require_close(step_loop(attn, q, k, v, x), want);
    auto state = attn.make_state(d, dv);
    attn.forward_causal(state, q.topRows(13), k.topRows(13), v.topRows(13), x.topRows(13));
    attn.forward_causal(state, q.bottomRows(24), k.bottomRows(24), v.bottomRows(24), x.bottomRows(24));
    ref::require_close(state.keys(), km);  // fla's final recurrent state (its h_k is K̃ transposed)
    ref::require_close(state.values(), vm);
  }
}

TEMPLATE_TEST_CASE("SlotGates: seeded weights, accessors, state blobs", "[control][slot_gates]", float, double) {
  using T = TestType;
  const SlotGates<T> a(abc::Slots{3}, 5, abc::Seed{7}), b(abc::Slots{3}, 5, abc::Seed{7});
  REQUIRE(a.weights() == b.weights());
  REQUIRE(a.weights().rows() == 3);
  REQUIRE(a.num_slots() == 3);
  REQUIRE(a.input_dim() == 5);
  REQUIRE(a.bias() == abc::Vector<T>::Zero(3));
  REQUIRE(a.tau() == T(8));
  REQUIRE(SlotGates<T>(abc::Slots{3}, 5, abc::Seed{8}).weights() != a.weights());
  REQUIRE(SlotGates<T>(abc::Slots{3}, 5, abc::Seed{7}, T(2)).tau() == T(2));
  // Entries N(0, 1/d_x): the sample variance of a large draw is 1/d_x to a few percent.
  const auto big = SlotGates<double>(abc::Slots{64}, 64, abc::Seed{3}).weights();
  REQUIRE(std::abs(big.squaredNorm() / double(big.size()) * 64 - 1) < 0.05);
  REQUIRE(SlotGates<T>::tag() == "abc::control::SlotGates");
  // Deduction from the weights.
  const abc::Matrix<T> w = ref::random<T>(4, 6, 1);
  SlotGates deduced{w, 2.0};
  static_assert(std::is_same<decltype(deduced), SlotGates<T>>::value, "scalar type from W_f");
  REQUIRE(deduced.tau() == T(2));
  // A state saves and loads bit for bit and continues like the original.
  const Index d = 6, dv = 4;
  abc::BoundedAttention attn{SlotGates<T>(abc::Slots{5}, d, abc::Seed{11})};
  auto q = ref::random<T>(20, d, 31), k = ref::random<T>(20, d, 32), v = ref::random<T>(20, dv, 33);
  auto s1 = attn.make_state(d, dv);
  attn.forward_causal(s1, q.topRows(9), k.topRows(9), v.topRows(9));
  auto s2 = attn.make_state(d, dv);
  abc::load_state(attn, abc::save_state(attn, s1), s2);
  REQUIRE(s2 == s1);
  REQUIRE(attn.forward_causal(s1, q.bottomRows(11), k.bottomRows(11), v.bottomRows(11)) ==
          attn.forward_causal(s2, q.bottomRows(11), k.bottomRows(11), v.bottomRows(11)));
}

TEMPLATE_TEST_CASE("SlotGates configuration errors name the argument, the expected and the actual value",
                   "[control][slot_gates][errors]", float, double) {
  using T = TestType;
  using M = abc::Matrix<T>;
  using V = abc::Vector<T>;
  REQUIRE_THROWS_AS(SlotGates<T>(M(0, 3)), abc::config_error);
  REQUIRE_THROWS_WITH(SlotGates<T>(M(0, 3)),
                      ABC_CONTAINS("abc::control::SlotGates: W_f.rows() (slots) is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(SlotGates<T>(M(2, 0)), ABC_CONTAINS("W_f.cols() (input width) is 0, expected at least 1"));
  M w = M::Ones(2, 3);
  w(1, 2) = std::numeric_limits<T>::quiet_NaN();
  REQUIRE_THROWS_AS(SlotGates<T>(w), abc::config_error);
  REQUIRE_THROWS_WITH(SlotGates<T>(w), ABC_CONTAINS("W_f holds a non-finite value at row 1, column 2, expected finite values"));
  const M ok = M::Ones(2, 3);
  REQUIRE_THROWS_AS(SlotGates<T>(ok, V::Zero(3)), abc::config_error);
  REQUIRE_THROWS_WITH(SlotGates<T>(ok, V::Zero(3)),
                      ABC_CONTAINS("b_f.size() is 3, expected 2 (one bias per slot: the rows of W_f)"));
  V b = V::Zero(2);
  b(1) = std::numeric_limits<T>::infinity();
  REQUIRE_THROWS_WITH(SlotGates<T>(ok, b), ABC_CONTAINS("b_f holds a non-finite value at row 1, column 0"));
  for (T tau : {T(0), T(-1), std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN()}) {
    REQUIRE_THROWS_AS(SlotGates<T>(ok, tau), abc::config_error);
    REQUIRE_THROWS_WITH(SlotGates<T>(ok, tau), ABC_CONTAINS("abc::control::SlotGates: tau is "));
    REQUIRE_THROWS_WITH(SlotGates<T>(ok, V::Zero(2), tau), ABC_CONTAINS(", expected a finite value > 0"));
  }
  REQUIRE_THROWS_WITH(SlotGates<T>(ok, T(0)), ABC_CONTAINS("tau is 0.000000, expected a finite value > 0"));
  REQUIRE_THROWS_WITH(SlotGates<T>(abc::Slots{4}, 0, abc::Seed{1}),
                      ABC_CONTAINS("abc::control::SlotGates: d_x is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(SlotGates<T>(abc::Slots{0}, 4, abc::Seed{1}), ABC_CONTAINS("abc::control::SlotGates: n is 0, expected at least 1"));
  const Index huge = std::numeric_limits<Index>::max() / 2;
  REQUIRE_THROWS_WITH(SlotGates<T>(abc::Slots{huge}, huge, abc::Seed{1}), ABC_CONTAINS("n × d_x (the weights' entries) overflows"));
  REQUIRE_THROWS_WITH(SlotGates<T>(abc::Slots{2}, 4, abc::Seed{1}, T(-2)), ABC_CONTAINS("tau is -2.000000"));
  REQUIRE_NOTHROW(SlotGates<T>(ok, V::Zero(2), T(1e-3)));
  // At call time the keys stand in for the control input, so their width must be d_x.
  abc::BoundedAttention attn{SlotGates<T>(abc::Slots{4}, 5, abc::Seed{1})};
  const M q = ref::random<T>(3, 8, 1);
  REQUIRE_THROWS_AS(attn.forward(q, q, q), abc::shape_error);
  REQUIRE_THROWS_WITH(attn.forward(q, q, q), ABC_CONTAINS("k is [3 x 8], expected [3 x 5]"));
  REQUIRE_NOTHROW(attn.forward(q, q, q, ref::random<T>(3, 5, 2)));
}

}  // namespace slot_gates_test
