// SPDX-License-Identifier: MIT
// abc tests: control::GlobalTokens (ABC paper §A.1): token positions[i] writes slot i, others write nothing;
// the memory is the stacked global tokens and the output is attention over them only (oracle 9).
#include <abc/bounded_attention.hpp>
#include <abc/control/global_tokens.hpp>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace global_tokens_test {

namespace {

using abc::Index;
const Index kSizes[] = {1, 7, 63, 65, 100};

// Unsorted, with positions past the end of short sequences.
std::vector<Index> positions_for(Index n_tok) {
  std::vector<Index> p = {n_tok / 2, n_tok + 5};
  if (n_tok / 2 != 0) p.push_back(0);
  for (Index t = 3; t < n_tok; t += 11)
    if (t != n_tok / 2) p.push_back(t);
  return p;
}

}  // namespace

TEMPLATE_TEST_CASE("GlobalTokens matches the float64 reference in every form", "[control][global_tokens]", float, double) {
  using T = TestType;
  const Index d = 8, dv = 5;
  for (Index n_tok : kSizes) {
    const auto pos = positions_for(n_tok);
    const size_t n = pos.size();
    auto q = ref::random<T>(n_tok, d, 61), k = ref::random<T>(n_tok, d, 62), v = ref::random<T>(n_tok, dv, 63);
    abc::control::GlobalTokens<T> control(pos);
    const ref::ScheduleFn sched = [&](size_t t) {
      long slot = -1;
      for (size_t i = 0; i < n; ++i)
        if (pos[i] == Index(t)) slot = long(i);
      return ref::one_hot(n, slot, 1.0);
    };
    const double scale = 1 / std::sqrt(double(d));
    const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
    INFO("N = " << n_tok);
    abc::BoundedAttention attn{control};
    ref::require_close(attn.forward(q, k, v), ref::recurrence_noncausal(sched, n, rq, rk, rv, scale));
    ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, n, rq, rk, rv, scale));
  }
}

TEMPLATE_TEST_CASE("GlobalTokens is softmax attention over the global tokens only (oracle 9)",
                   "[control][global_tokens][identity]", float, double) {
  using T = TestType;
  const Index d = 6, dv = 4, n_tok = 50;
  const std::vector<Index> pos = {40, 3, 17, 4, 49};
  auto q = ref::random<T>(n_tok, d, 71), k = ref::random<T>(n_tok, d, 72), v = ref::random<T>(n_tok, dv, 73);
  abc::BoundedAttention attn{abc::control::GlobalTokens<T>(pos)};
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  ref::Mat gk, gv;
  for (Index p : pos) {
    gk.push_back(rk[size_t(p)]);
    gv.push_back(rv[size_t(p)]);
  }
  const double scale = 1 / std::sqrt(6.0);
  ref::require_close(attn.forward(q, k, v), ref::attention(rq, gk, gv, scale, false));
  // Causal: query t reads the global tokens at positions ≤ t; none yet → zero.
  ref::Mat want;
  for (Index t = 0; t < n_tok; ++t) {
    std::vector<bool> seen;
    for (Index p : pos) seen.push_back(p <= t);
    want.push_back(ref::read(rq[size_t(t)], gk, gv, seen, scale));
  }
  ref::require_close(attn.forward_causal(q, k, v), want);
  auto state = attn.make_state(d, dv);
  attn.forward_causal(state, q, k, v);
  ref::require_close(state.keys(), gk);  // the memory is the stacked global keys, in slot order
  ref::require_close(state.values(), gv);
}

TEST_CASE("GlobalTokens refuses empty, negative and repeated positions", "[control][global_tokens][errors]") {
  using G = abc::control::GlobalTokens<float>;
  REQUIRE_THROWS_AS(G(std::vector<Index>{}), abc::config_error);
  REQUIRE_THROWS_WITH(G(std::vector<Index>{}), ABC_CONTAINS("abc::control::GlobalTokens: positions.size() is 0, expected at least 1"));
  REQUIRE_THROWS_AS(G({3, -1}), abc::config_error);
  REQUIRE_THROWS_WITH(G({3, -1}), ABC_CONTAINS("positions[1] is -1, expected at least 0"));
  REQUIRE_THROWS_AS(G({5, 2, 9, 2}), abc::config_error);
  REQUIRE_THROWS_WITH(G({5, 2, 9, 2}), ABC_CONTAINS("positions[3] is 2, expected a position not listed before (positions[1] is also 2"));
  const G g({7, 1, 4});
  REQUIRE(g.num_slots() == 3);
  REQUIRE(g.slot(7) == 0);
  REQUIRE(g.slot(1) == 1);
  REQUIRE(g.slot(4) == 2);
  REQUIRE(g.slot(0) == -1);
  REQUIRE(g.slot(5) == -1);
  REQUIRE(g.slot(100) == -1);
}

}  // namespace global_tokens_test
