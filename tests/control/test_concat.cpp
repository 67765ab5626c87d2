// SPDX-License-Identifier: MIT
// abc tests: control::Concat<A, B>: A's slots then B's under one softmax, sparse and dense, against
// the float64 recurrence; parts that store tokens read their union, each token once (local +
// global, attention sinks), against float64 attention over that set; two global parts covering
// every token are softmax attention.
#include <abc/bounded_attention.hpp>
#include <abc/control/cluster.hpp>
#include <abc/control/concat.hpp>
#include <abc/control/gated.hpp>
#include <abc/control/global_tokens.hpp>
#include <abc/control/linformer.hpp>
#include <abc/control/mlp.hpp>
#include <abc/control/random_slot.hpp>
#include <abc/control/sliding_window.hpp>

#include <functional>
#include <numeric>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace concat_test {

namespace {

using abc::Index;
const Index kSizes[] = {1, 7, 63, 65, 100};

// The concatenated schedule: A's decays and writes, then B's.
ref::ScheduleFn concat(ref::ScheduleFn a, ref::ScheduleFn b) {
  return [a, b](size_t t) {
    ref::Step s = a(t), sb = b(t);
    s.a.insert(s.a.end(), sb.a.begin(), sb.a.end());
    s.w.insert(s.w.end(), sb.w.begin(), sb.w.end());
    return s;
  };
}

// Attention over a set of tokens, as Longformer and BigBird define local + global: query t reads
// every token of held(t) (a set: each token once), with plain float64 loops.
ref::Mat union_attention(const ref::Mat& q, const ref::Mat& k, const ref::Mat& v, double scale,
                         const std::function<std::vector<bool>(size_t t)>& held) {
  ref::Mat out;
  for (size_t t = 0; t < q.size(); ++t) out.push_back(ref::read(q[t], k, v, held(t), scale));
  return out;
}

// The tokens of 0 .. last a window of w and the global positions hold after token `last`.
std::vector<bool> window_and_globals(size_t n_tok, size_t last, size_t w, const std::vector<Index>& globals) {
  std::vector<bool> held(n_tok, false);
  for (size_t i = last + 1 >= w ? last + 1 - w : 0; i <= last; ++i) held[i] = true;
  for (Index p : globals)
    if (p >= 0 && size_t(p) <= last) held[size_t(p)] = true;
  return held;
}

}  // namespace

TEMPLATE_TEST_CASE("Concat<GlobalTokens, SlidingWindow> reads the union of its tokens, each once, in every form",
                   "[control][concat]", float, double) {
  using T = TestType;
  using G = abc::control::GlobalTokens<T>;
  using W = abc::control::SlidingWindow<T>;
  using C = abc::control::Concat<G, W>;
  static_assert(abc::is_sparse_control_v<C> && C::max_writes == 2, "two sparse parts without global decay: sparse");
  static_assert(C::stores_tokens, "a union of token stores stores tokens");
  const Index d = 8, dv = 5, w = 5;
  const std::vector<Index> pos = {0, 4, 30, 64, 90};
  for (Index n_tok : kSizes) {
    // Keys of large norm make a token counted twice visibly heavier than one counted once.
    auto q = ref::random<T>(n_tok, d, 301), k = (ref::random<T>(n_tok, d, 302) * T(2)).eval(),
         v = ref::random<T>(n_tok, dv, 303);
    C control{G(pos), W(w)};
    REQUIRE(control.num_slots() == 10);
    const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
    const double scale = 1 / std::sqrt(double(d));
    const size_t n = size_t(n_tok), sw = size_t(w);
    INFO("N = " << n_tok);
    const auto causal = union_attention(rq, rk, rv, scale, [&](size_t t) { return window_and_globals(n, t, sw, pos); });
    const auto whole = union_attention(rq, rk, rv, scale, [&](size_t) { return window_and_globals(n, n - 1, sw, pos); });
    ref::require_close(abc::BoundedAttention{control}.forward(q, k, v), whole);
    ref::require_causal_forms(control, q, k, v, causal);
    // The window first: the part that never evicts (the globals) keeps a token both would store.
    abc::control::Concat<W, G> swapped{W(w), G(pos)};
    ref::require_close(abc::BoundedAttention{swapped}.forward(q, k, v), whole);
    ref::require_causal_forms(swapped, q, k, v, causal);
  }
}

TEMPLATE_TEST_CASE("Attention sinks: Concat<GlobalTokens{0..s-1}, SlidingWindow{w}> is StreamingLLM's set",
                   "[control][concat]", float, double) {
  using T = TestType;
  using G = abc::control::GlobalTokens<T>;
  using W = abc::control::SlidingWindow<T>;
  const Index d = 6, dv = 4;
  for (Index sinks : {Index(1), Index(4)})
    for (Index w : {Index(1), Index(3), Index(8)})
      for (Index n_tok : kSizes) {
        std::vector<Index> first(static_cast<size_t>(sinks));
        std::iota(first.begin(), first.end(), Index(0));
        auto q = ref::random<T>(n_tok, d, 331), k = (ref::random<T>(n_tok, d, 332) * T(2)).eval(),
             v = ref::random<T>(n_tok, dv, 333);
        const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
        const double scale = 1 / std::sqrt(double(d));
        // Query t reads tokens 0 .. s − 1 and t − w + 1 .. t, each once.
        const auto want = union_attention(rq, rk, rv, scale, [&](size_t t) {
          std::vector<bool> held(size_t(n_tok), false);
          for (size_t i = 0; i <= t; ++i) held[i] = i < size_t(sinks) || i + size_t(w) > t;
          return held;
        });
        INFO("sinks " << sinks << ", window " << w << ", N = " << n_tok);
        ref::require_causal_forms(abc::control::Concat<G, W>{G(first), W(w)}, q, k, v, want);
      }
}

TEMPLATE_TEST_CASE("A slot reset without a write reads as empty: a given gate of exactly 0 forgets",
                   "[control][concat][empty]", float, double) {
  using T = TestType;
  // Gated<SlidingWindow> with gates g: a_t = g_t (0 on the overwritten slot), w_t = 1 − g_t there.
  // A gate of 0 resets every other slot without writing it: those slots hold nothing and take no
  // mass (they are not zero keys read with weight exp(0)); a gate of 1 leaves the overwritten slot
  // empty. The float64 recurrence states the same rule: a slot is written by a non-zero weight and
  // emptied by a zero decay without one.
  const Index d = 4, dv = 3, nw = 3, n_tok = 12;
  abc::Vector<T> gates(n_tok);
  gates << T(0.5), T(0.5), T(0.5), T(0), T(0.5), T(1), T(0.25), T(0), T(1), T(1), T(1), T(0.5);
  auto q = ref::random<T>(n_tok, d, 341), k = ref::random<T>(n_tok, d, 342), v = ref::random<T>(n_tok, dv, 343);
  using GW = abc::control::Gated<abc::control::SlidingWindow<T>>;
  GW control(abc::control::SlidingWindow<T>(nw), gates);
  const ref::ScheduleFn sched = [&](size_t t) {
    ref::Step s = ref::one_hot(size_t(nw), long(t % size_t(nw)), 1.0, 0.0);
    for (auto& a : s.a) a *= double(gates(Index(t)));
    for (auto& x : s.w) x *= 1 - double(gates(Index(t)));
    return s;
  };
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  const double scale = 1 / std::sqrt(double(d));
  const auto want = ref::recurrence_causal(sched, size_t(nw), rq, rk, rv, scale);
  ref::require_causal_forms(control, q, k, v, want);
  // After token 3 (gate 0) only slot 0, holding token 3, is readable: the output is v_3 exactly.
  for (Index c = 0; c < dv; ++c) REQUIRE(want[3][size_t(c)] == Approx(double(v(3, c))).margin(1e-12));
}

TEMPLATE_TEST_CASE("Concat goes dense for a dense part or a globally decaying part, and matches the reference",
                   "[control][concat]", float, double) {
  using T = TestType;
  using abc::control::Concat;
  using abc::control::Gated;
  using abc::control::Linformer;
  using abc::control::RandomSlot;
  using abc::control::SlidingWindow;
  using GW = Gated<SlidingWindow<T>>;
  static_assert(!abc::is_sparse_control_v<Concat<GW, RandomSlot<T>>>, "Gated sets decay_all: dense");
  static_assert(!abc::is_sparse_control_v<Concat<Linformer<T>, RandomSlot<T>>>, "a dense part: dense");
  const Index d = 6, dv = 4, nw = 3, nr = 4, nl = 2;
  for (Index n_tok : kSizes) {
    auto q = ref::random<T>(n_tok, d, 311), k = ref::random<T>(n_tok, d, 312), v = ref::random<T>(n_tok, dv, 313);
    abc::Vector<T> gates = (ref::random<T>(n_tok, 1, 314).array() * T(0.4) + T(0.5)).matrix();
    const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
    const double scale = 1 / std::sqrt(double(d));
    INFO("N = " << n_tok);
    const ref::ScheduleFn random = [&](size_t t) {
      return ref::one_hot(size_t(nr), long(abc::control::RandomSlot<T>(abc::Slots{nr}, abc::Seed{8}).slot(Index(t))), 1.0);
    };
    {
      Concat<GW, RandomSlot<T>> control(GW(SlidingWindow<T>(nw), gates), RandomSlot<T>(abc::Slots{nr}, abc::Seed{8}));
      const auto sched = concat(
          [&](size_t t) {
            ref::Step s = ref::one_hot(size_t(nw), long(t % size_t(nw)), 1.0, 0.0);
            for (auto& a : s.a) a *= double(gates(Index(t)));
            for (auto& w : s.w) w *= 1 - double(gates(Index(t)));
            return s;
          },
          random);
      ref::require_close(abc::BoundedAttention{control}.forward(q, k, v),
                         ref::recurrence_noncausal(sched, size_t(nw + nr), rq, rk, rv, scale));
      ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(nw + nr), rq, rk, rv, scale));
    }
    {
      Linformer<T> lin(abc::Slots{nl}, n_tok, abc::Seed{4});
      const auto wl = ref::from(lin.weights());
      Concat<Linformer<T>, RandomSlot<T>> control(lin, RandomSlot<T>(abc::Slots{nr}, abc::Seed{8}));
      REQUIRE(control.max_tokens() == n_tok);
      const auto sched = concat(
          [&](size_t t) {
            ref::Step s{std::vector<double>(size_t(nl), 1.0), std::vector<double>(size_t(nl))};
            for (size_t l = 0; l < size_t(nl); ++l) s.w[l] = wl[l][t];
            return s;
          },
          random);
      ref::require_close(abc::BoundedAttention{control}.forward(q, k, v),
                         ref::recurrence_noncausal(sched, size_t(nl + nr), rq, rk, rv, scale));
      ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(nl + nr), rq, rk, rv, scale));
    }
  }
}

TEMPLATE_TEST_CASE("Concat of global tokens 0..m-1 and m..N-1 is softmax attention over the whole",
                   "[control][concat][identity]", float, double) {
  using T = TestType;
  for (Index n_tok : {Index(2), Index(7), Index(65), Index(100)}) {
    const Index m = n_tok / 3 + 1, d = 6, dv = 4;
    std::vector<Index> first(static_cast<size_t>(m)), rest(static_cast<size_t>(n_tok - m));
    std::iota(first.begin(), first.end(), Index(0));
    std::iota(rest.begin(), rest.end(), m);
    std::reverse(rest.begin(), rest.end());  // slot order does not matter to a softmax
    auto q = ref::random<T>(n_tok, d, 321), k = ref::random<T>(n_tok, d, 322), v = ref::random<T>(n_tok, dv, 323);
    abc::BoundedAttention attn{abc::control::Concat{abc::control::GlobalTokens<T>(first), abc::control::GlobalTokens<T>(rest)}};
    const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
    INFO("N = " << n_tok);
    ref::require_close(attn.forward(q, k, v), ref::attention(rq, rk, rv, 1 / std::sqrt(6.0), false));
    ref::require_causal_forms(attn.control(), q, k, v, ref::attention(rq, rk, rv, 1 / std::sqrt(6.0), true));
  }
}

TEMPLATE_TEST_CASE("Concat passes input widths, non-causal forms and causal requirements through", "[control][concat][errors]",
                   float, double) {
  using T = TestType;
  using abc::control::Cluster;
  using abc::control::Concat;
  using abc::control::Mlp;
  using abc::control::SlidingWindow;
  REQUIRE_THROWS_AS((Concat<Mlp<T>, Mlp<T>>(Mlp<T>(abc::Slots{2}, 4, abc::Seed{1}), Mlp<T>(abc::Slots{2}, 5, abc::Seed{1}))), abc::config_error);
  REQUIRE_THROWS_WITH((Concat<Mlp<T>, Mlp<T>>(Mlp<T>(abc::Slots{2}, 4, abc::Seed{1}), Mlp<T>(abc::Slots{2}, 5, abc::Seed{1}))), ABC_CONTAINS("b.input_dim() is 5, expected 4"));
  Concat<Mlp<T>, SlidingWindow<T>> ok(Mlp<T>(abc::Slots{2}, 4, abc::Seed{1}), SlidingWindow<T>(3));
  REQUIRE(ok.input_dim() == 4);
  // A k-means part: fitted on the whole input non-causally, refused causally.
  Concat<Cluster<T>, SlidingWindow<T>> cw(Cluster<T>(abc::Slots{3}, 4, abc::Seed{1}, 50), SlidingWindow<T>(2));
  abc::BoundedAttention attn{cw};
  auto q = ref::random<T>(20, 4, 1), k = ref::random<T>(20, 4, 2), v = ref::random<T>(20, 3, 3);
  const abc::Matrix<T> out = attn.forward(q, k, v);
  abc::BoundedAttention fitted{Concat<Cluster<T>, SlidingWindow<T>>(Cluster<T>(Cluster<T>::kmeans(k, abc::Slots{3}, abc::Seed{1}, 50).centroids),
                                                                  SlidingWindow<T>(2))};
  ref::require_same(out, fitted.forward(q, k, v));
  REQUIRE_THROWS_WITH(attn.forward_causal(q, k, v), ABC_CONTAINS("centroids.rows() is 0, expected at least 3"));
}

}  // namespace concat_test
