// SPDX-License-Identifier: MIT
// abc tests: control::Compressive (ABC paper Eq. 8): write e_{⌊t/c⌋}/c, decay 1; rows are block means
// (oracle 8); c = 1 is softmax attention (oracle 2); capacity n·c.
#include <abc/bounded_attention.hpp>
#include <abc/control/compressive.hpp>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace compressive_test {

namespace {

using abc::Index;
const Index kSizes[] = {1, 7, 63, 65, 100};

}  // namespace

TEMPLATE_TEST_CASE("Compressive matches the float64 reference in every form", "[control][compressive]", float, double) {
  using T = TestType;
  const Index d = 8, dv = 5;
  for (Index c : {Index(1), Index(3), Index(16)})
    for (Index n_tok : kSizes) {
      const Index n = (n_tok + c - 1) / c + 1;  // one block to spare
      const std::uint64_t seed = std::uint64_t(n_tok * 10 + c);
      auto q = ref::random<T>(n_tok, d, seed + 1), k = ref::random<T>(n_tok, d, seed + 2);
      auto v = ref::random<T>(n_tok, dv, seed + 3);
      abc::control::Compressive<T> control(abc::Slots{n}, c);
      const ref::ScheduleFn sched = [&](size_t t) { return ref::one_hot(size_t(n), long(t / size_t(c)), 1.0 / double(c)); };
      const double scale = 1 / std::sqrt(double(d));
      const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
      INFO("c = " << c << ", N = " << n_tok);
      abc::BoundedAttention attn{control};
      ref::require_close(attn.forward(q, k, v), ref::recurrence_noncausal(sched, size_t(n), rq, rk, rv, scale));
      ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(n), rq, rk, rv, scale));
    }
}

TEMPLATE_TEST_CASE("Compressive rows are block means; a partial block holds partial sum / c (oracle 8)",
                   "[control][compressive][identity]", float, double) {
  using T = TestType;
  const Index d = 5, dv = 3, c = 4, n = 6;
  for (Index n_tok : {Index(8), Index(10), Index(24)}) {
    auto q = ref::random<T>(n_tok, d, 41), k = ref::random<T>(n_tok, d, 42), v = ref::random<T>(n_tok, dv, 43);
    abc::BoundedAttention attn{abc::control::Compressive<T>(abc::Slots{n}, c)};
    auto state = attn.make_state(d, dv);
    attn.forward_causal(state, q, k, v);
    ref::Mat want = ref::zeros(n, d);
    for (Index j = 0; j < n; ++j)
      for (Index i = j * c; i < std::min(n_tok, (j + 1) * c); ++i)
        for (Index col = 0; col < d; ++col) want[size_t(j)][size_t(col)] += double(k(i, col)) / double(c);
    INFO("N = " << n_tok);
    ref::require_close(state.keys(), want);
    REQUIRE(state.num_written() == (n_tok + c - 1) / c);
  }
}

TEMPLATE_TEST_CASE("Compressive with c = 1 is softmax attention (oracles 2, 3)", "[control][compressive][identity]", float,
                   double) {
  using T = TestType;
  for (Index n_tok : kSizes) {
    const Index d = 6, dv = 4;
    auto q = ref::random<T>(n_tok, d, 51), k = ref::random<T>(n_tok, d, 52), v = ref::random<T>(n_tok, dv, 53);
    abc::BoundedAttention attn{abc::control::Compressive<T>(abc::Slots{n_tok}, 1)};
    const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
    ref::require_close(attn.forward(q, k, v), ref::attention(rq, rk, rv, 1 / std::sqrt(6.0), false));
    ref::require_close(attn.forward_causal(q, k, v), ref::attention(rq, rk, rv, 1 / std::sqrt(6.0), true));
  }
}

TEMPLATE_TEST_CASE("Compressive refuses more than n·c tokens", "[control][compressive][errors]", float, double) {
  using T = TestType;
  abc::BoundedAttention attn{abc::control::Compressive<T>(abc::Slots{3}, 2)};
  REQUIRE(attn.control().max_tokens() == 6);
  auto q = ref::random<T>(7, 4, 1), k = ref::random<T>(7, 4, 2), v = ref::random<T>(7, 2, 3);
  REQUIRE_THROWS_AS(attn.forward_causal(q, k, v), abc::config_error);
  REQUIRE_THROWS_WITH(attn.forward_causal(q, k, v),
                      ABC_CONTAINS("abc::BoundedAttention::forward_causal: the token count (state position + new tokens) "
                                   "is 7, expected at most 6"));
  REQUIRE_THROWS_WITH(attn.forward(q, k, v), ABC_CONTAINS("is 7, expected at most 6 (the control's capacity, max_tokens())"));
  REQUIRE_NOTHROW(attn.forward(q.topRows(6), k.topRows(6), v.topRows(6)));
  REQUIRE_THROWS_WITH(abc::control::Compressive<T>(abc::Slots{3}, 0), ABC_CONTAINS("abc::control::Compressive: ratio is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(abc::control::Compressive<T>(abc::Slots{0}, 2), ABC_CONTAINS("slots is 0, expected at least 1"));
}

}  // namespace compressive_test
