// SPDX-License-Identifier: MIT
// abc tests: control::Gated<Inner>: a_t ← g_t a_t, w_t ← (1 − g_t) w_t around sparse and dense
// controls, against the float64 recurrence; gate limits and the unrolled weights (oracle 22).
#include <abc/bounded_attention.hpp>
#include <abc/control/dilated.hpp>
#include <abc/control/gated.hpp>
#include <abc/control/linformer.hpp>
#include <abc/control/mlp.hpp>
#include <abc/control/random_slot.hpp>
#include <abc/control/sliding_window.hpp>
#include <abc/multi_head_attention.hpp>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace gated_test {

namespace {

using abc::Index;
const Index kSizes[] = {1, 7, 63, 65, 100};

// g_t = σ(w_g · x_t + b_g) in double.
std::vector<double> sigmoid_gates(const ref::Mat& x, const std::vector<double>& wg, double bg) {
  std::vector<double> g;
  for (const auto& xi : x) g.push_back(1.0 / (1.0 + std::exp(-(ref::dot(wg, xi) + bg))));
  return g;
}

ref::ScheduleFn gated(ref::ScheduleFn inner, std::vector<double> g) {
  return [inner, g](size_t t) {
    ref::Step s = inner(t);
    for (auto& a : s.a) a *= g[t];
    for (auto& w : s.w) w *= 1 - g[t];
    return s;
  };
}

}  // namespace

TEMPLATE_TEST_CASE("Gated sparse (window) and dense (Linformer) match the float64 reference in every form",
                   "[control][gated]", float, double) {
  using T = TestType;
  const Index d = 8, dv = 5, dx = 3, n = 4;
  static_assert(abc::is_sparse_control_v<abc::control::Gated<abc::control::SlidingWindow<T>>>, "sparse inner: sparse");
  static_assert(!abc::is_sparse_control_v<abc::control::Gated<abc::control::Linformer<T>>>, "dense inner: dense");
  for (Index n_tok : kSizes) {
    const std::uint64_t seed = 200 + std::uint64_t(n_tok);
    auto q = ref::random<T>(n_tok, d, seed + 1), k = ref::random<T>(n_tok, d, seed + 2);
    auto v = ref::random<T>(n_tok, dv, seed + 3), x = ref::random<T>(n_tok, dx, seed + 4, 2.0);
    const abc::Vector<T> wg = ref::random<T>(dx, 1, seed + 5, 2.0);
    const T bg = T(0.5);
    const auto rx = ref::from(x);
    const auto g = sigmoid_gates(rx, ref::from(abc::Matrix<T>(wg.transpose()))[0], double(bg));
    const double scale = 1 / std::sqrt(double(d));
    const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
    INFO("N = " << n_tok);
    {
      abc::control::Gated<abc::control::SlidingWindow<T>> control(abc::control::SlidingWindow<T>(n), wg, bg);
      const auto sched = gated([&](size_t t) { return ref::one_hot(size_t(n), long(t % size_t(n)), 1.0, 0.0); }, g);
      abc::BoundedAttention attn{control};
      ref::require_close(attn.forward(q, k, v, x), ref::recurrence_noncausal(sched, size_t(n), rq, rk, rv, scale));
      ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(n), rq, rk, rv, scale), &x);
    }
    {
      abc::control::Linformer<T> lin(abc::Slots{n}, n_tok, abc::Seed{3});
      const auto w = ref::from(lin.weights());
      abc::control::Gated<abc::control::Linformer<T>> control(lin, wg, bg);
      REQUIRE(control.max_tokens() == n_tok);
      const auto sched = gated(
          [&](size_t t) {
            ref::Step s{std::vector<double>(size_t(n), 1.0), std::vector<double>(size_t(n))};
            for (size_t l = 0; l < size_t(n); ++l) s.w[l] = w[l][t];
            return s;
          },
          g);
      abc::BoundedAttention attn{control};
      ref::require_close(attn.forward(q, k, v, x), ref::recurrence_noncausal(sched, size_t(n), rq, rk, rv, scale));
      ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(n), rq, rk, rv, scale), &x);
    }
  }
}

// A gated sparse step folds the gate's decay of every slot into its passes over K̃ and Ṽ (a
// multiply per entry, a multiply-add in the written slot's batch). The test above runs at widths
// below one SIMD batch; these widths run the vector passes: full blocks of four batches, single
// batches and the scalar tail, with the written slot moving through all of them.
TEMPLATE_TEST_CASE("Gated sparse steps at SIMD widths match the float64 reference and the memory the build makes",
                   "[control][gated]", float, double) {
  using T = TestType;
  const Index d = 40, dv = 37, n_tok = 160;
  for (Index n : {Index(37), Index(70)}) {
    INFO("n = " << n);
    const std::uint64_t seed = 300 + std::uint64_t(n);
    auto q = ref::random<T>(n_tok, d, seed + 1), k = ref::random<T>(n_tok, d, seed + 2);
    auto v = ref::random<T>(n_tok, dv, seed + 3);
    const abc::Vector<T> wg = ref::random<T>(d, 1, seed + 4, 0.3);  // the gate reads the key
    const T bg = T(1.5);
    const auto rk = ref::from(k);
    const auto g = sigmoid_gates(rk, ref::from(abc::Matrix<T>(wg.transpose()))[0], double(bg));
    const double scale = 1 / std::sqrt(double(d));
    const auto rq = ref::from(q), rv = ref::from(v);
    {  // window: each token overwrites slot t mod n
      abc::control::Gated<abc::control::SlidingWindow<T>> control(abc::control::SlidingWindow<T>(n), wg, bg);
      const auto sched = gated([&](size_t t) { return ref::one_hot(size_t(n), long(t % size_t(n)), 1.0, 0.0); }, g);
      ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(n), rq, rk, rv, scale));
      // The steps build the memory the non-causal build makes, to the bit: a decayed entry is
      // decay · entry and a written one weight · k_j on both paths.
      abc::BoundedAttention attn{control};
      auto state = attn.make_state(d, dv);
      attn.forward_causal(state, q, k, v);
      const auto built = attn.memory(k, v);
      REQUIRE(abc::Matrix<T>(state.keys()) == abc::Matrix<T>(built.keys()));
      REQUIRE(abc::Matrix<T>(state.values()) == abc::Matrix<T>(built.values()));
    }
    {  // random slot: writes accumulate (decay 1 in the written slot)
      const abc::control::RandomSlot<T> inner(abc::Slots{n}, abc::Seed{7});
      abc::control::Gated<abc::control::RandomSlot<T>> control(inner, wg, bg);
      const auto sched = gated([&](size_t t) { return ref::one_hot(size_t(n), long(inner.slot(Index(t))), 1.0, 1.0); }, g);
      ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(n), rq, rk, rv, scale));
    }
    {  // grouped-query heads: two query heads read each updated memory, as memories of their own would
      const Index H = 4, kv = 2;
      abc::control::Gated<abc::control::SlidingWindow<T>> control(abc::control::SlidingWindow<T>(n), wg, bg);
      abc::MultiHeadAttention<abc::control::Gated<abc::control::SlidingWindow<T>>> mha(control, H, kv);
      const auto qd = ref::random<T>(1, n_tok * H * d, seed + 5), kd = ref::random<T>(1, n_tok * kv * d, seed + 6);
      const auto vd = ref::random<T>(1, n_tok * kv * dv, seed + 7);
      std::vector<T> out(std::size_t(n_tok * H * dv));
      const auto qt = abc::HeadTensor<const T>::bhsd(qd.data(), 1, H, n_tok, d);
      const auto kt = abc::HeadTensor<const T>::bhsd(kd.data(), 1, kv, n_tok, d);
      const auto vt = abc::HeadTensor<const T>::bhsd(vd.data(), 1, kv, n_tok, dv);
      mha.forward_causal(qt, kt, vt, abc::HeadTensor<T>::bhsd(out.data(), 1, H, n_tok, dv));
      const auto ot = abc::HeadTensor<const T>::bhsd(out.data(), 1, H, n_tok, dv);
      const abc::BoundedAttention<abc::control::Gated<abc::control::SlidingWindow<T>>> single{control};
      for (Index h = 0; h < H; ++h)
        REQUIRE(abc::Matrix<T>(ot.head(0, h)) == single.forward_causal(qt.head(0, h), kt.head(0, h / 2), vt.head(0, h / 2)));
    }
  }
}

TEMPLATE_TEST_CASE("Gated forwards the inner read range (Dilated) with given gates", "[control][gated]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 3, n = 3, r = 2, n_tok = 65;
  auto q = ref::random<T>(n_tok, d, 211), k = ref::random<T>(n_tok, d, 212), v = ref::random<T>(n_tok, dv, 213);
  abc::Vector<T> gates = (ref::random<T>(n_tok, 1, 214).array() * T(0.5) + T(0.5)).matrix();
  std::vector<double> g;
  for (Index t = 0; t < n_tok; ++t) g.push_back(double(gates(t)));
  abc::control::Gated<abc::control::Dilated<T>> control(abc::control::Dilated<T>(abc::Slots{n}, r), gates);
  REQUIRE(control.max_tokens() == n_tok);
  REQUIRE(control.input_dim() == 0);
  const auto sched = gated([&](size_t t) { return ref::one_hot(size_t(n * r), long((t % 2) * 3 + (t / 2) % 3), 1.0, 0.0); }, g);
  const ref::RangeFn range = [&](size_t t) { return std::make_pair((t % 2) * 3, (t % 2) * 3 + 3); };
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  const double scale = 1 / std::sqrt(double(d));
  ref::require_close(abc::BoundedAttention{control}.forward(q, k, v),
                     ref::recurrence_noncausal(sched, size_t(n * r), rq, rk, rv, scale, range));
  ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(n * r), rq, rk, rv, scale, range));
}

TEMPLATE_TEST_CASE("Gated with g ≡ 0 keeps only the current token's write (oracle 22)", "[control][gated][identity]", float,
                   double) {
  using T = TestType;
  const Index d = 5, dv = 4, n_tok = 30;
  auto q = ref::random<T>(n_tok, d, 221), k = ref::random<T>(n_tok, d, 222), v = ref::random<T>(n_tok, dv, 223);
  const abc::Vector<T> zeros = abc::Vector<T>::Zero(n_tok);
  // One slot that would otherwise sum every token: with the gate shut it holds v_t only.
  abc::BoundedAttention one{abc::control::Gated{abc::control::RandomSlot<T>(abc::Slots{1}, abc::Seed{5}), zeros}};
  ref::require_close(one.forward_causal(q, k, v), ref::from(v));
  // A window of 4: after token t only slot t mod 4 is non-zero, and it holds k_t, v_t.
  abc::BoundedAttention win{abc::control::Gated{abc::control::SlidingWindow<T>(4), zeros}};
  auto state = win.make_state(d, dv);
  for (Index t = 0; t < n_tok; ++t) {
    win.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose());
    abc::Matrix<T> want_k = abc::Matrix<T>::Zero(4, d);
    want_k.row(t % 4) = k.row(t);
    REQUIRE(state.keys() == want_k);
    REQUIRE(state.values().row(t % 4) == v.row(t));
  }
}

TEMPLATE_TEST_CASE("Gated unrolled weights (1 − g_i) Π_{j>i} g_j equal the recurrence (oracle 22)",
                   "[control][gated][identity]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, n_tok = 40;
  auto q = ref::random<T>(n_tok, d, 231), k = ref::random<T>(n_tok, d, 232), v = ref::random<T>(n_tok, dv, 233);
  abc::Vector<T> gates = (ref::random<T>(n_tok, 1, 234).array() * T(0.45) + T(0.5)).matrix();  // in (0.05, 0.95)
  // One slot: the softmax over it is 1, so output t is Ṽ_t = Σ_{i≤t} (1 − g_i) Π_{i<j≤t} g_j v_i.
  abc::BoundedAttention attn{abc::control::Gated{abc::control::RandomSlot<T>(abc::Slots{1}, abc::Seed{1}), gates}};
  ref::Mat want;
  for (Index t = 0; t < n_tok; ++t) {
    std::vector<double> o(size_t(dv), 0.0);
    for (Index i = 0; i <= t; ++i) {
      double a = 1 - double(gates(i));
      for (Index j = i + 1; j <= t; ++j) a *= double(gates(j));
      for (Index c = 0; c < dv; ++c) o[size_t(c)] += a * double(v(i, c));
    }
    want.push_back(o);
  }
  ref::require_causal_forms(attn.control(), q, k, v, want);
}

TEMPLATE_TEST_CASE("Gated errors: input widths, gate values, capacity", "[control][gated][errors]", float, double) {
  using T = TestType;
  using abc::control::Gated;
  using abc::control::Mlp;
  const abc::Vector<T> w3 = abc::Vector<T>::Ones(3);
  REQUIRE_THROWS_AS(Gated<Mlp<T>>(Mlp<T>(abc::Slots{2}, 4, abc::Seed{1}), w3, T(0)), abc::config_error);
  REQUIRE_THROWS_WITH(Gated<Mlp<T>>(Mlp<T>(abc::Slots{2}, 4, abc::Seed{1}), w3, T(0)), ABC_CONTAINS("w_g.size() is 3, expected 4"));
  REQUIRE_NOTHROW(Gated<Mlp<T>>(Mlp<T>(abc::Slots{2}, 3, abc::Seed{1}), w3, T(0)));
  abc::Vector<T> bad(3);
  bad << T(0.5), T(1.5), T(0);
  REQUIRE_THROWS_WITH(Gated<Mlp<T>>(Mlp<T>(abc::Slots{2}, 3, abc::Seed{1}), bad), ABC_CONTAINS("gates(1) is 1.5"));
  REQUIRE_THROWS_WITH(Gated<Mlp<T>>(Mlp<T>(abc::Slots{2}, 3, abc::Seed{1}), abc::Vector<T>()), ABC_CONTAINS("gates.size() is 0"));
  abc::BoundedAttention attn{Gated<Mlp<T>>(Mlp<T>(abc::Slots{2}, 3, abc::Seed{1}), abc::Vector<T>::Constant(5, T(0.5)))};
  REQUIRE(attn.control().input_dim() == 3);  // the inner Mlp still reads x
  auto q = ref::random<T>(6, 3, 1);
  REQUIRE_THROWS_WITH(attn.forward_causal(q, q, q), ABC_CONTAINS("is 6, expected at most 5"));
  REQUIRE_NOTHROW(attn.forward_causal(q.topRows(5), q.topRows(5), q.topRows(5)));
}

}  // namespace gated_test
