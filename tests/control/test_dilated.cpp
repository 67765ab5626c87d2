// SPDX-License-Identifier: MIT
// abc tests: control::Dilated (ABC paper §A.4, Eq. 9): r ring buffers of n slots, token t overwrites slot
// (t mod r)·n + (t / r) mod n, query t reads buffer t mod r; queue contents (oracle 7).
#include <abc/bounded_attention.hpp>
#include <abc/control/dilated.hpp>
#include <abc/control/sliding_window.hpp>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace dilated_test {

namespace {

using abc::Index;
const Index kSizes[] = {1, 7, 63, 65, 100};

}  // namespace

TEMPLATE_TEST_CASE("Dilated matches the float64 reference in every form", "[control][dilated]", float, double) {
  using T = TestType;
  const Index d = 8, dv = 5;
  for (Index n : {Index(1), Index(4)})
    for (Index r : {Index(1), Index(2), Index(3)})
      for (Index n_tok : kSizes) {
        const size_t slots = size_t(n * r);
        auto q = ref::random<T>(n_tok, d, 81), k = ref::random<T>(n_tok, d, 82), v = ref::random<T>(n_tok, dv, 83);
        auto qx = ref::random<T>(n_tok + 2, d, 84);
        abc::control::Dilated<T> control(abc::Slots{n}, r);
        const ref::ScheduleFn sched = [&](size_t t) {
          return ref::one_hot(slots, long((t % size_t(r)) * size_t(n) + (t / size_t(r)) % size_t(n)), 1.0, 0.0);
        };
        const ref::RangeFn range = [&](size_t t) {
          const size_t b = t % size_t(r);
          return std::make_pair(b * size_t(n), (b + 1) * size_t(n));
        };
        const double scale = 1 / std::sqrt(double(d));
        const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
        INFO("n = " << n << ", r = " << r << ", N = " << n_tok);
        abc::BoundedAttention attn{control};
        // Non-causal: query i reads buffer i mod r of the final memory (cross: more queries than keys).
        ref::require_close(attn.forward(q, k, v), ref::recurrence_noncausal(sched, slots, rq, rk, rv, scale, range));
        ref::require_close(attn.forward(qx, k, v), ref::recurrence_noncausal(sched, slots, ref::from(qx), rk, rv, scale, range));
        ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, slots, rq, rk, rv, scale, range));
      }
}

TEMPLATE_TEST_CASE("Dilated queues hold k_t, k_{t-r}, …, k_{t-(n-1)r}; query t reads them only (oracle 7)",
                   "[control][dilated][identity]", float, double) {
  using T = TestType;
  const Index d = 4, dv = 3, n = 3, r = 2, n_tok = 20;
  auto q = ref::random<T>(n_tok, d, 91), k = ref::random<T>(n_tok, d, 92), v = ref::random<T>(n_tok, dv, 93);
  abc::BoundedAttention attn{abc::control::Dilated<T>(abc::Slots{n}, r)};
  auto state = attn.make_state(d, dv);
  const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
  for (Index t = 0; t < n_tok; ++t) {
    const abc::Vector<T> out = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose());
    // Eq. 9 with r = 2: the queue of t's parity holds [k_{t−2n+2}, …, k_{t−2}, k_t] (those ≥ 0),
    // the other parity's queue is untouched by token t.
    ref::Mat queue_k, queue_v;
    for (Index j = t; j >= 0 && j > t - n * r; j -= r) {
      const Index slot = (j % r) * n + (j / r) % n;
      INFO("t = " << t << ", j = " << j);
      ref::require_close(abc::Matrix<T>(state.keys().row(slot)), ref::Mat{rk[size_t(j)]});
      queue_k.push_back(rk[size_t(j)]);
      queue_v.push_back(rv[size_t(j)]);
    }
    INFO("t = " << t);
    ref::require_close(abc::Matrix<T>(out.transpose()),
                       ref::Mat{ref::read(rq[size_t(t)], queue_k, queue_v, std::vector<bool>(queue_k.size(), true),
                                          1 / std::sqrt(double(d)))});
  }
}

TEMPLATE_TEST_CASE("Dilated with r = 1 is the sliding window", "[control][dilated][identity]", float, double) {
  using T = TestType;
  auto q = ref::random<T>(70, 6, 95), k = ref::random<T>(70, 6, 96), v = ref::random<T>(70, 4, 97);
  abc::BoundedAttention dil{abc::control::Dilated<T>(abc::Slots{8}, 1)};
  ref::require_close(dil.forward_causal(q, k, v), ref::window_attention(ref::from(q), ref::from(k), ref::from(v), 1 / std::sqrt(6.0), 8));
  REQUIRE(dil.num_slots() == 8);
  REQUIRE_THROWS_WITH(abc::control::Dilated<T>(abc::Slots{4}, 0), ABC_CONTAINS("abc::control::Dilated: r is 0, expected at least 1"));
  REQUIRE_THROWS_WITH(abc::control::Dilated<T>(abc::Slots{0}, 2), ABC_CONTAINS("n is 0, expected at least 1"));
}

}  // namespace dilated_test
