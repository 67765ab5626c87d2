// SPDX-License-Identifier: MIT
// abc tests: control::Mlp (ABC-MLP) against a float64 plain-loop reference of Eq. 7, and the
// identities of docs/testing.md (oracles 11–15).
#include <abc/bounded_attention.hpp>
#include <abc/control/mlp.hpp>
#include <abc/control/sliding_window.hpp>
#include <abc/kernel/online_normalise.hpp>
#include <abc/kernel/rows.hpp>

#include <cmath>
#include <limits>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace mlp_test {

namespace {

using abc::Index;
using abc::control::Activation;
using abc::control::Normalization;
constexpr double inf = std::numeric_limits<double>::infinity();

// log α for the activation, in double, straight from the definition.
double log_alpha(double s, Activation act) {
  switch (act) {
    case Activation::exp: return s;
    case Activation::sigmoid: return std::log(1.0 / (1.0 + std::exp(-s)));
    case Activation::relu: return s > 0 ? std::log(s) : -inf;
  }
  return s;
}

// The control weights φ_i of Eq. 7 at time t (tokens 0..t), per slot:
//  prefix:    φ_iℓ = α_iℓ / Σ_{j≤t} α_jℓ        (row-normalised memory, the default)
//  per_token: φ_iℓ = α_iℓ / Σ_{j≤i} α_jℓ        (the footnote read literally)
// computed with the maximum factored out so exp never overflows; readable[ℓ]: Σ α > 0.
struct MlpRef {
  ref::Mat w, x;  // W_φ [n × d_x], X [N × d_x]
  Activation act;
  Normalization norm;

  // λ_iℓ = log α(w_ℓ · x_i) for the first n_tok tokens: computed once a run, read by every φ.
  ref::Mat lambdas(size_t n_tok) const {
    ref::Mat lam(n_tok, std::vector<double>(w.size()));
    for (size_t i = 0; i < n_tok; ++i)
      for (size_t l = 0; l < w.size(); ++l) lam[i][l] = log_alpha(ref::dot(w[l], x[i]), act);
    return lam;
  }

  // φ at time t (inclusive) for all tokens 0..t, and which slots hold mass.
  ref::Mat phi(const ref::Mat& lam, size_t t, std::vector<bool>& readable) const {
    const size_t n = w.size();
    ref::Mat p(t + 1, std::vector<double>(n, 0.0));
    readable.assign(n, false);
    // The maximum and the sum over λ_{0..upto, ℓ}; a maximum of -∞ means no mass yet.
    auto normaliser = [&](size_t l, size_t upto, double& mx, double& z) {
      mx = -inf;
      for (size_t j = 0; j <= upto; ++j) mx = std::max(mx, lam[j][l]);
      z = 0;
      if (mx == -inf) return;
      for (size_t j = 0; j <= upto; ++j) z += std::exp(lam[j][l] - mx);
    };
    for (size_t l = 0; l < n; ++l) {
      double mx = -inf, z = 0;
      normaliser(l, t, mx, z);
      readable[l] = mx > -inf;
      for (size_t i = 0; i <= t; ++i) {
        if (norm == Normalization::per_token) normaliser(l, i, mx, z);
        if (mx > -inf) p[i][l] = std::exp(lam[i][l] - mx) / z;
      }
    }
    return p;
  }

  // Causal: output t reads the memory of tokens 0..t. Non-causal: every query reads the memory of
  // all tokens, normalised over the whole sequence (both normalisations coincide there).
  ref::Mat run(const ref::Mat& q, const ref::Mat& k, const ref::Mat& v, double scale, bool causal) const {
    ref::Mat out;
    if (!causal) {
      MlpRef whole = *this;
      whole.norm = Normalization::prefix;
      std::vector<bool> readable;
      const ref::Mat p = whole.phi(lambdas(k.size()), k.size() - 1, readable);
      const ref::Mat km = ref::memory(p, k, k.size()), vm = ref::memory(p, v, v.size());
      for (const auto& qi : q) out.push_back(ref::read(qi, km, vm, readable, scale));
      return out;
    }
    const ref::Mat lam = lambdas(q.size());
    for (size_t t = 0; t < q.size(); ++t) {
      std::vector<bool> readable;
      const ref::Mat p = phi(lam, t, readable);
      out.push_back(ref::read(q[t], ref::memory(p, k, t + 1), ref::memory(p, v, t + 1), readable, scale));
    }
    return out;
  }
};

template <class T>
abc::Matrix<T> step_loop(const abc::BoundedAttention<abc::control::Mlp<T>>& attn, const abc::Matrix<T>& q,
                         const abc::Matrix<T>& k, const abc::Matrix<T>& v, const abc::Matrix<T>& x) {
  auto state = attn.make_state(k.cols(), v.cols());
  abc::Matrix<T> out(q.rows(), v.cols());
  for (Index t = 0; t < q.rows(); ++t)
    out.row(t) = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose(),
                           x.row(t).transpose()).transpose();
  return out;
}

const Activation kActivations[] = {Activation::exp, Activation::sigmoid, Activation::relu};

}  // namespace

TEMPLATE_TEST_CASE("Mlp matches the float64 reference: non-causal, causal and cross", "[control][mlp]", float, double) {
  using T = TestType;
  const Index d = 8, dv = 5, dx = 11;  // d_x ≠ d ≠ dv
  for (Index n : {Index(1), Index(7), Index(64)})
    for (Index n_tok : {Index(1), Index(63), Index(64), Index(65), Index(257)}) {
      const std::uint64_t seed = std::uint64_t(n * 1000 + n_tok);
      auto q = ref::random<T>(n_tok, d, seed + 1), k = ref::random<T>(n_tok, d, seed + 2);
      auto v = ref::random<T>(n_tok, dv, seed + 3), x = ref::random<T>(n_tok, dx, seed + 4, 2.0);
      auto qx = ref::random<T>(n_tok / 3 + 2, d, seed + 5);  // cross: queries of another length
      abc::control::Mlp<T> control(abc::Slots{n}, dx, abc::Seed{seed});
      abc::BoundedAttention attn{control};
      const MlpRef r{ref::from(control.weights()), ref::from(x), Activation::exp, Normalization::prefix};
      const double scale = 1 / std::sqrt(double(d));
      INFO("n = " << n << ", N = " << n_tok);
      const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
      ref::require_close(attn.forward(q, k, v, x), r.run(rq, rk, rv, scale, false));
      ref::require_close(attn.forward_causal(q, k, v, x), r.run(rq, rk, rv, scale, true));
      ref::require_close(attn.forward(qx, k, v, x), r.run(ref::from(qx), rk, rv, scale, false));
    }
}

TEMPLATE_TEST_CASE("Mlp activations and normalisations match the reference", "[control][mlp]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 4, dx = 5, n = 9, n_tok = 70;
  auto q = ref::random<T>(n_tok, d, 201), k = ref::random<T>(n_tok, d, 202), v = ref::random<T>(n_tok, dv, 203);
  auto x = ref::random<T>(n_tok, dx, 204, 2.0);
  abc::Matrix<T> w = ref::random<T>(n, dx, 205);
  w.row(3).setZero();  // relu: this slot never receives mass, so it stays empty and masked
  for (auto act : kActivations)
    for (auto norm : {Normalization::prefix, Normalization::per_token}) {
      abc::BoundedAttention attn{abc::control::Mlp<T>(w, act, norm)};
      const MlpRef r{ref::from(w), ref::from(x), act, norm};
      INFO("activation " << int(act) << ", normalization " << int(norm));
      const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
      ref::require_close(attn.forward(q, k, v, x), r.run(rq, rk, rv, 1 / std::sqrt(6.0), false));
      ref::require_close(attn.forward_causal(q, k, v, x), r.run(rq, rk, rv, 1 / std::sqrt(6.0), true));
    }
}

TEMPLATE_TEST_CASE("Mlp: step loop = chunked forward_causal = split at every position", "[control][mlp][recurrent]",
                   float, double) {
  using T = TestType;
  const Index d = 7, dv = 6, dx = 3, n = 5, n_tok = 67;
  auto q = ref::random<T>(n_tok, d, 301), k = ref::random<T>(n_tok, d, 302), v = ref::random<T>(n_tok, dv, 303);
  auto x = ref::random<T>(n_tok, dx, 304, 3.0);
  for (auto act : kActivations)
    for (auto norm : {Normalization::prefix, Normalization::per_token})
      for (Index chunk : {Index(1), Index(16), Index(64)}) {
        abc::Options opts;
        opts.chunk = chunk;
        abc::BoundedAttention attn{abc::control::Mlp<T>(abc::Slots{n}, dx, abc::Seed{17}, act, norm), opts};
        INFO("activation " << int(act) << ", normalization " << int(norm) << ", chunk " << chunk);
        const abc::Matrix<T> whole = attn.forward_causal(q, k, v, x);
        ref::require_same(step_loop(attn, q, k, v, x), whole);
        for (Index split = 0; split <= n_tok; ++split) {
          auto state = attn.make_state(d, dv);
          abc::Matrix<T> out(n_tok, dv);
          out.topRows(split) = attn.forward_causal(state, q.topRows(split), k.topRows(split), v.topRows(split), x.topRows(split));
          const Index rest = n_tok - split;
          out.bottomRows(rest) = attn.forward_causal(state, q.bottomRows(rest), k.bottomRows(rest), v.bottomRows(rest), x.bottomRows(rest));
          INFO("split at " << split);
          ref::require_same(out, whole);
        }
      }
}

// A token alone (a step, the token loop) sums its logits W_φ x in two interleaved chains
// (kernel::weighted_rows_interleaved, tested against its scalar oracle); a block of tokens in one
// chain per logit. So the step loop and the recurrent kernel agree bit for bit, outputs and state,
// and the chunked kernel agrees with them to rounding (the test above). 16 and 32 slots: full SIMD
// batches; 5: the scalar path.
TEMPLATE_TEST_CASE("Mlp: a token alone sums its logits interleaved; the step loop is the token loop bit for bit",
                   "[control][mlp][recurrent]", float, double) {
  using T = TestType;
  const Index d = 8, dv = 6, dx = 64, n_tok = 23;
  auto q = ref::random<T>(n_tok, d, 311), k = ref::random<T>(n_tok, d, 312), v = ref::random<T>(n_tok, dv, 313);
  auto x = ref::random<T>(n_tok, dx, 314, 3.0);
  for (Index n : {Index(5), Index(16), Index(32)}) {
    INFO(n << " slots");
    const abc::control::Mlp<T> control(abc::Slots{n}, dx, abc::Seed{23});
    // The schedule of one row is the schedule of its interleaved logits, bit for bit.
    const abc::Matrix<T> w_t = control.input_projection().transpose();
    abc::Matrix<T> logits(1, n), ss_a(2, n), ss_b(2, n), decay_a(1, n), decay_b(1, n), write_a(1, n), write_b(1, n);
    ss_a.row(0).setConstant(-std::numeric_limits<T>::infinity());
    ss_a.row(1).setZero();
    ss_b = ss_a;
    for (Index t = 0; t < 3; ++t) {
      abc::kernel::weighted_rows_interleaved(w_t.data(), n, dx, n, x.row(t).data(), logits.data());
      control.schedule(t, x.row(t), ss_a, decay_a, write_a);
      control.schedule_projected(t, logits, ss_b, decay_b, write_b);
      REQUIRE(ss_a == ss_b);
      REQUIRE(decay_a == decay_b);
      REQUIRE(write_a == write_b);
    }
    abc::BoundedAttention attn{control, ref::kernel_options(abc::CausalKernel::recurrent, 64)};
    auto loop_state = attn.make_state(d, dv), token_state = attn.make_state(d, dv);
    abc::Matrix<T> loop(n_tok, dv);
    for (Index t = 0; t < n_tok; ++t)
      loop.row(t) = attn.step(loop_state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose(),
                              x.row(t).transpose()).transpose();
    const abc::Matrix<T> tokens = attn.forward_causal(token_state, q, k, v, x);
    REQUIRE(loop == tokens);
    REQUIRE(loop_state == token_state);
  }
}

TEMPLATE_TEST_CASE("Mlp with one slot does not depend on the query (oracle 12)", "[control][mlp][identity]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 4, n_tok = 40;
  auto k = ref::random<T>(n_tok, d, 401), v = ref::random<T>(n_tok, dv, 402);
  auto q1 = ref::random<T>(n_tok, d, 403), q2 = ref::random<T>(n_tok, d, 404, 10.0);
  abc::control::Mlp<T> control(abc::Slots{1}, d, abc::Seed{5});
  abc::BoundedAttention attn{control};
  const abc::Matrix<T> a = attn.forward(q1, k, v), b = attn.forward(q2, k, v);
  REQUIRE(a == b);
  REQUIRE(attn.forward_causal(q1, k, v) == attn.forward_causal(q2, k, v));
  // ... and equals attn(w_φ, K, V): pseudo-query attention over the inputs (keys here), scale 1.
  const auto want_row = ref::read(ref::from(abc::Matrix<T>(control.weights()))[0], ref::from(k), ref::from(v),
                                  std::vector<bool>(size_t(n_tok), true), 1.0);
  ref::require_close(abc::Matrix<T>(a.row(0)), ref::Mat{want_row});
}

TEMPLATE_TEST_CASE("each Mlp slot is its pseudo-query's attention over the prefix (oracle 11)",
                   "[control][mlp][identity]", float, double) {
  using T = TestType;
  const Index d = 5, dv = 3, dx = 4, n = 6, n_tok = 50;
  auto q = ref::random<T>(n_tok, d, 501), k = ref::random<T>(n_tok, d, 502), v = ref::random<T>(n_tok, dv, 503);
  auto x = ref::random<T>(n_tok, dx, 504, 2.0);
  abc::control::Mlp<T> control(abc::Slots{n}, dx, abc::Seed{9});
  abc::BoundedAttention attn{control};
  const auto w = ref::from(control.weights()), rx = ref::from(x), rk = ref::from(k), rv = ref::from(v);
  auto state = attn.make_state(d, dv);
  Index done = 0;
  for (Index upto : {Index(1), Index(2), Index(17), Index(50)}) {
    attn.forward_causal(state, q.middleRows(done, upto - done), k.middleRows(done, upto - done),
                        v.middleRows(done, upto - done), x.middleRows(done, upto - done));
    done = upto;
    ref::Mat want_k, want_v;
    for (Index l = 0; l < n; ++l) {
      // Slot ℓ: softmax_i(W_φ[ℓ]·x_i) over i < upto, applied to keys and values (scale 1).
      ref::Mat xs(rx.begin(), rx.begin() + long(upto)), ks(rk.begin(), rk.begin() + long(upto)),
          vs(rv.begin(), rv.begin() + long(upto));
      want_k.push_back(ref::read(w[size_t(l)], xs, ks, std::vector<bool>(size_t(upto), true), 1.0));
      want_v.push_back(ref::read(w[size_t(l)], xs, vs, std::vector<bool>(size_t(upto), true), 1.0));
    }
    INFO("prefix of " << upto);
    ref::require_close(state.keys(), want_k);
    ref::require_close(state.values(), want_v);
  }
}

TEMPLATE_TEST_CASE("a per-slot constant added to the Mlp logits changes nothing (oracle 14)",
                   "[control][mlp][identity]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 4, dx = 4, n = 5, n_tok = 80;
  auto q = ref::random<T>(n_tok, d, 601), k = ref::random<T>(n_tok, d, 602), v = ref::random<T>(n_tok, dv, 603);
  abc::Matrix<T> x(n_tok, dx + 1);
  x.leftCols(dx) = ref::random<T>(n_tok, dx, 604);
  x.col(dx).setOnes();  // a constant input column turns the last weight column into a per-slot bias
  abc::Matrix<T> w0(n, dx + 1), w1(n, dx + 1);
  w0.leftCols(dx) = ref::random<T>(n, dx, 605);
  w0.col(dx).setZero();
  w1 = w0;
  w1.col(dx) = ref::random<T>(n, 1, 606, 20.0);  // shifts of up to ±20 per slot
  for (auto act : {Normalization::prefix, Normalization::per_token}) {
    abc::BoundedAttention a{abc::control::Mlp<T>(w0, Activation::exp, act)}, b{abc::control::Mlp<T>(w1, Activation::exp, act)};
    ref::require_same(a.forward(q, k, v, x), b.forward(q, k, v, x));
    ref::require_same(a.forward_causal(q, k, v, x), b.forward_causal(q, k, v, x));
  }
}

TEMPLATE_TEST_CASE("the two normalisations: a hand-computed 3-token example (oracle 13)", "[control][mlp][identity]",
                   float, double) {
  using T = TestType;
  // One slot, so every output is the value memory itself. Logits log 1, log 3, log 2 (α = 1, 3, 2)
  // from the control input; values 1, 2, 4.
  abc::Matrix<T> w(1, 1);
  w << T(1);
  abc::Matrix<T> x(3, 1), v(3, 1), qk(3, 1);
  x << T(0), T(std::log(3.0)), T(std::log(2.0));
  v << T(1), T(2), T(4);
  qk << T(0.3), T(-0.2), T(0.9);
  abc::BoundedAttention prefix{abc::control::Mlp<T>(w)};
  abc::BoundedAttention literal{abc::control::Mlp<T>(w, Activation::exp, Normalization::per_token)};
  // Prefix: Ṽ_t = Σ α_i v_i / Σ α_i        = 1, 7/4, 15/6.
  // Per token: φ = 1, 3/4, 2/6;  Ṽ_t = Σ φ_i v_i = 1, 5/2, 5/2 + 4/3.
  ref::require_close(prefix.forward_causal(qk, qk, v, x), ref::Mat{{1.0}, {7.0 / 4}, {15.0 / 6}});
  ref::require_close(literal.forward_causal(qk, qk, v, x), ref::Mat{{1.0}, {2.5}, {2.5 + 4.0 / 3}});
  // Non-causally both are Eq. 7: every query reads 15/6.
  ref::require_close(prefix.forward(qk, qk, v, x), ref::Mat{{2.5}, {2.5}, {2.5}});
  ref::require_close(literal.forward(qk, qk, v, x), ref::Mat{{2.5}, {2.5}, {2.5}});
}

TEMPLATE_TEST_CASE("Mlp logits of ±1e4 give finite outputs equal to the reference (oracle 15)",
                   "[control][mlp][numerics]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, dx = 4, n = 6, n_tok = 130;
  // Integer weights ×1000 and inputs in {−1, 0, 1}: logits are exact multiples of 1000 up to ±1e4
  // in both types, so the comparison measures the algorithm, not the rounding of the logits.
  const abc::Matrix<T> w = ref::integers<T>(n, dx, 701, 3.49, 1000), x = ref::integers<T>(n_tok, dx, 702, 1.49);
  abc::Matrix<T> logits = x * w.transpose();
  REQUIRE(logits.cwiseAbs().maxCoeff() >= T(5000));
  REQUIRE(logits.cwiseAbs().maxCoeff() <= T(14000));
  auto q = ref::random<T>(n_tok, d, 703), k = ref::random<T>(n_tok, d, 704), v = ref::random<T>(n_tok, dv, 705);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  for (auto norm : {Normalization::prefix, Normalization::per_token}) {
    abc::BoundedAttention attn{abc::control::Mlp<T>(w, Activation::exp, norm)};
    const MlpRef r{ref::from(w), ref::from(x), Activation::exp, norm};
    ref::require_close(attn.forward(q, k, v, x), r.run(rq, rk, rv, 0.5, false));
    ref::require_close(attn.forward_causal(q, k, v, x), r.run(rq, rk, rv, 0.5, true));
    ref::require_close(step_loop(attn, q, k, v, x), r.run(rq, rk, rv, 0.5, true));
  }
  // The naive cumsum form, α = exp(s) summed as is, overflows on the same input (inf / inf = NaN).
  bool naive_finite = true;
  for (Index l = 0; l < n; ++l) {
    T num = 0, den = 0;
    for (Index i = 0; i < n_tok; ++i) {
      const T a = std::exp(logits(i, l));
      num += a * v(i, 0);
      den += a;
      naive_finite = naive_finite && std::isfinite(num / den);
    }
  }
  REQUIRE_FALSE(naive_finite);
}

// The chunked causal kernel takes each chunk's weights against one reference per slot
// (kernel::chunk_normalise) only where the chunk's log-weights stay within chunk_spread() of its
// first token's running max; a chunk past that takes the token-by-token normaliser. Logits that
// mostly stay small but jump by 20–60 (and a few times past the exponent range) put both kinds of chunk in one call (checked
// first, so the test cannot pass on one kind alone); either way the float64 reference, the step
// loop and every chunk size give the same outputs.
TEMPLATE_TEST_CASE("Mlp: chunks whose logits jump past one reference give the same outputs",
                   "[control][mlp][numerics]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 5, dx = 4, n = 9, n_tok = 200, chunk = 16;
  // Integer weights and inputs: the logits are exact integers, so the chunks' spreads are as
  // computed here in both types.
  const abc::Matrix<T> w = ref::integers<T>(n, dx, 811, 2.49);
  abc::Matrix<T> x = ref::integers<T>(n_tok, dx, 812, 1.49);
  for (Index t = 5; t < n_tok; t += 23) x.row(t) *= T(8);  // a jump now and then
  // and a few past the type's exponent range (exp(−λ) of them underflows), where one reference per
  // chunk would flush the earlier tokens' weights to 0 while they still carry their prefix
  const T huge = std::is_same<T, float>::value ? T(40) : T(300);
  for (Index t = 40; t < n_tok; t += 61) x.row(t) *= huge;
  const abc::Matrix<T> logits = x * w.transpose();
  Index wide = 0, narrow = 0;
  for (Index t0 = 0; t0 < n_tok; t0 += chunk)
    for (Index l = 0; l < n; ++l) {
      const T before = t0 == 0 ? -std::numeric_limits<T>::infinity() : logits.col(l).head(t0).maxCoeff();
      const T first = std::max(before, logits(t0, l));
      const T top = std::max(first, logits.col(l).segment(t0, std::min(chunk, n_tok - t0)).maxCoeff());
      (top - first > abc::kernel::chunk_spread<T>() ? wide : narrow) += 1;
    }
  INFO(wide << " slot-chunks past one reference, " << narrow << " within it");
  REQUIRE(wide >= 3);
  REQUIRE(narrow >= 3 * wide);
  auto q = ref::random<T>(n_tok, d, 813), k = ref::random<T>(n_tok, d, 814), v = ref::random<T>(n_tok, dv, 815);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  for (auto norm : {Normalization::prefix, Normalization::per_token}) {
    const MlpRef r{ref::from(w), ref::from(x), Activation::exp, norm};
    const ref::Mat want = r.run(rq, rk, rv, 0.5, true);
    abc::Matrix<T> first;
    for (Index c : {chunk, Index(7), Index(64)}) {
      abc::Options opts;
      opts.chunk = c;
      opts.scale = 0.5;
      abc::BoundedAttention attn{abc::control::Mlp<T>(w, Activation::exp, norm), opts};
      INFO("normalization " << int(norm) << ", chunk " << c);
      const abc::Matrix<T> got = attn.forward_causal(q, k, v, x);
      ref::require_close(got, want);
      ref::require_same(step_loop(attn, q, k, v, x), got);
      if (first.size() == 0) first = got;
      ref::require_same(got, first);
    }
  }
}

TEMPLATE_TEST_CASE("Mlp configuration errors", "[control][mlp][errors]", float, double) {
  using T = TestType;
  REQUIRE_THROWS_AS(abc::control::Mlp<T>(abc::Matrix<T>(0, 3)), abc::config_error);
  REQUIRE_THROWS_WITH(abc::control::Mlp<T>(abc::Matrix<T>(0, 3)), ABC_CONTAINS("W_phi.rows() (slots) is 0, expected at least 1"));
  abc::Matrix<T> w = abc::Matrix<T>::Ones(2, 2);
  w(1, 1) = std::numeric_limits<T>::quiet_NaN();
  REQUIRE_THROWS_WITH(abc::control::Mlp<T>(w), ABC_CONTAINS("W_phi holds a non-finite value at row 1, column 1"));
  REQUIRE_THROWS_AS(abc::control::Mlp<T>(abc::Slots{4}, 0, abc::Seed{1}), abc::config_error);
  REQUIRE_THROWS_WITH(abc::control::Mlp<T>(abc::Slots{4}, 0, abc::Seed{1}),
                      ABC_CONTAINS("abc::control::Mlp: d_x is 0, expected at least 1 (at least one input column)"));
}

TEMPLATE_TEST_CASE("Mlp: finite inputs whose logits overflow never put NaN into the state (fuzz regression)",
                   "[control][mlp][numerics]", float, double) {
  using T = TestType;
  // W_φ x overflows: each term is ±big·1, and the sum over mixed signs gives +∞, −∞ or +∞ − ∞ =
  // NaN. Found by fuzz_api: relu/exp logits of +∞ made exp(+∞ − +∞) = NaN in the normaliser.
  const T big = std::numeric_limits<T>::max() / T(2);
  const Index d = 4, dv = 2, n = 3, n_tok = 6;
  abc::Matrix<T> w(n, d);
  w << 1, 1, 1, 1,   // +∞
      1, -1, 1, -1,  // +∞ − ∞ = NaN
      -1, -1, 0, 0;  // −∞
  abc::Matrix<T> x = abc::Matrix<T>::Constant(n_tok, d, big);
  x.row(2).setConstant(T(0.5));  // an ordinary token between the overflowing ones
  const auto q = ref::random<T>(n_tok, d, 1), k = ref::random<T>(n_tok, d, 2), v = ref::random<T>(n_tok, dv, 3);
  for (auto act : kActivations) {
    abc::BoundedAttention attn{abc::control::Mlp<T>(w, act)};
    auto state = attn.make_state(d, dv);
    for (Index t = 0; t < n_tok; ++t) {
      const abc::Vector<T> o = attn.step(state, q.row(t), k.row(t), v.row(t), x.row(t));
      INFO("activation " << int(act) << ", token " << t);
      REQUIRE(o.allFinite());
      REQUIRE(state.keys().allFinite());
      REQUIRE(state.values().allFinite());
      REQUIRE_FALSE(state.slot_state().array().isNaN().any());
    }
    REQUIRE(attn.forward_causal(q, k, v, x).allFinite());
    REQUIRE(attn.forward(q, k, v, x).allFinite());
  }
  // Scores q·K̃ that overflow to NaN take no mass in the read: the output stays finite.
  abc::BoundedAttention window{abc::control::SlidingWindow<T>{4}};
  abc::Matrix<T> qh = abc::Matrix<T>::Constant(2, 2, big), kh(2, 2), vh(2, 1);
  kh << big, -big, big, big;  // q·k_0 = big² − big², q·k_1 = +∞
  vh << T(3), T(5);
  const abc::Matrix<T> out = window.forward_causal(qh, kh, vh);
  REQUIRE(out.allFinite());
  // What q·k_0 overflows to depends on how the build's kernel adds its two terms: as ∞ − ∞ = NaN
  // (unfused, or fused into two accumulators added at the end), or as +∞ (one fused multiply-add
  // adds the exact −big² to +∞: -march with FMA, where the slots fit in a batch's tail). A NaN
  // score takes nothing and the infinite one everything (5); two infinite scores share the mass
  // equally (4). Each is exact: anything else would mix a non-finite score into the weights.
  const T got = out(1, 0);
  INFO("out(1, 0) = " << got);
  REQUIRE((got == T(5) || got == T(4)));
}

TEMPLATE_TEST_CASE("Mlp relu: subnormal logits keep their weights in every kernel (fuzz regression)",
                   "[control][mlp][numerics]", float, double) {
  using T = TestType;
  // Logits that are subnormal but exact: integer weights times inputs that are small integers
  // times 2^(min_exponent − digits/2), so every product and sum is a multiple of that power of two,
  // below the smallest normal and far above the subnormal spacing. relu's α = s must still weigh the tokens by s: Eigen 3.4's
  // vectorised log (SSE2, AVX2) reads every subnormal as the smallest normal, which made all
  // weights equal in the lanes it computed and exact in its scalar tail, so the step loop (rows of
  // n) and the chunked kernel (blocks of c × n) disagreed. Found by fuzz_api.
  const int e = std::numeric_limits<T>::min_exponent - std::numeric_limits<T>::digits / 2;
  const T tiny = std::ldexp(T(1), e);
  REQUIRE(tiny < std::numeric_limits<T>::min());
  REQUIRE(tiny > T(0));
  const Index d = 5, dv = 4, dx = 3, n = 7, n_tok = 41;
  abc::Matrix<T> w(n, dx), x(n_tok, dx);
  const auto wr = ref::random<double>(n, dx, 811, 4.49), xr = ref::random<double>(n_tok, dx, 812, 3.49);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < dx; ++j) w(i, j) = T(std::round(wr(i, j)));
  for (Index i = 0; i < n_tok; ++i)
    for (Index j = 0; j < dx; ++j) x(i, j) = T(std::round(xr(i, j))) * tiny;
  const abc::Matrix<T> logits = x * w.transpose();
  REQUIRE((logits.array() > T(0)).count() >= n_tok * n / 4);  // many tokens carry (subnormal) mass
  REQUIRE(logits.cwiseAbs().maxCoeff() < std::numeric_limits<T>::min());
  auto q = ref::random<T>(n_tok, d, 813), k = ref::random<T>(n_tok, d, 814), v = ref::random<T>(n_tok, dv, 815);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  for (auto norm : {Normalization::prefix, Normalization::per_token}) {
    const MlpRef r{ref::from(w), ref::from(x), Activation::relu, norm};
    const ref::Mat want = r.run(rq, rk, rv, 0.5, true);
    INFO("normalization " << int(norm));
    for (auto kernel : {abc::CausalKernel::chunked, abc::CausalKernel::recurrent})
      for (Index chunk : {Index(1), Index(2), Index(16)}) {
        abc::Options opts;
        opts.scale = 0.5;
        opts.causal_kernel = kernel;
        opts.chunk = chunk;
        abc::BoundedAttention attn{abc::control::Mlp<T>(w, Activation::relu, norm), opts};
        INFO("kernel " << int(kernel) << ", chunk " << chunk);
        ref::require_close(attn.forward_causal(q, k, v, x), want);
        ref::require_close(step_loop(attn, q, k, v, x), want);
        ref::require_close(attn.forward(q, k, v, x), r.run(rq, rk, rv, 0.5, false));
      }
  }
}

}  // namespace mlp_test
