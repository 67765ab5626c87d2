// SPDX-License-Identifier: MIT
// abc tests: control::RandomSlot (ABC_RD, ABC paper §A.2): slot i_t = hash(seed, t) mod n, decay 1, write 1,
// against the float64 recurrence; reproducible from the seed; mass conservation (oracle 10).
#include <abc/bounded_attention.hpp>
#include <abc/control/random_slot.hpp>
#include <abc/detail/random.hpp>

#include <set>

#include "support/approx.hpp"
#include "support/catch.hpp"
#include "support/reference.hpp"
#include "support/schedule_reference.hpp"

namespace random_slot_test {

namespace {

using abc::Index;
const Index kSizes[] = {1, 7, 63, 65, 100};

// The slot from the definition: the counter-based hash of (seed, t), modulo n.
long slot_of(std::uint64_t seed, size_t t, size_t n) { return long(abc::detail::hash(seed, t) % n); }

}  // namespace

TEMPLATE_TEST_CASE("RandomSlot matches the float64 reference in every form", "[control][random_slot]", float, double) {
  using T = TestType;
  const Index d = 8, dv = 5;
  for (Index n : {Index(1), Index(6)})
    for (Index n_tok : kSizes) {
      const std::uint64_t seed = 77 + std::uint64_t(n_tok);
      auto q = ref::random<T>(n_tok, d, seed + 1), k = ref::random<T>(n_tok, d, seed + 2);
      auto v = ref::random<T>(n_tok, dv, seed + 3);
      abc::control::RandomSlot<T> control(abc::Slots{n}, abc::Seed{seed});
      const ref::ScheduleFn sched = [&](size_t t) { return ref::one_hot(size_t(n), slot_of(seed, t, size_t(n)), 1.0); };
      const double scale = 1 / std::sqrt(double(d));
      const auto rq = ref::from(q), rk = ref::from(k), rv = ref::from(v);
      INFO("n = " << n << ", N = " << n_tok);
      abc::BoundedAttention attn{control};
      ref::require_close(attn.forward(q, k, v), ref::recurrence_noncausal(sched, size_t(n), rq, rk, rv, scale));
      ref::require_causal_forms(control, q, k, v, ref::recurrence_causal(sched, size_t(n), rq, rk, rv, scale));
    }
}

TEST_CASE("RandomSlot is reproducible from its seed and differs across seeds", "[control][random_slot]") {
  abc::control::RandomSlot<double> a(abc::Slots{16}, abc::Seed{5}), b(abc::Slots{16}, abc::Seed{5}),
      c(abc::Slots{16}, abc::Seed{6});
  std::vector<Index> sa, sb, sc;
  std::set<Index> used;
  for (Index t = 0; t < 200; ++t) {
    sa.push_back(a.slot(t));
    sb.push_back(b.slot(t));
    sc.push_back(c.slot(t));
    used.insert(a.slot(t));
    REQUIRE(a.slot(t) >= 0);
    REQUIRE(a.slot(t) < 16);
  }
  REQUIRE(sa == sb);
  REQUIRE(sa != sc);
  REQUIRE(used.size() == 16);  // 200 draws over 16 slots reach every slot
  // A fixed value pins the generator: a change of hash would silently change every model.
  REQUIRE(sa[0] == Index(abc::detail::hash(5, 0) % 16));
  // Same seed → identical memory; another seed → another memory.
  auto k = ref::random<double>(50, 4, 1), v = ref::random<double>(50, 3, 2);
  abc::BoundedAttention ka{a}, kc{c};
  auto s1 = ka.make_state(4, 3), s2 = ka.make_state(4, 3), s3 = kc.make_state(4, 3);
  ka.forward_causal(s1, k, k, v);
  ka.forward_causal(s2, k, k, v);
  kc.forward_causal(s3, k, k, v);
  REQUIRE(s1 == s2);
  REQUIRE(s1.keys() != s3.keys());
}

TEMPLATE_TEST_CASE("RandomSlot conserves mass: the memory rows sum to the keys (oracle 10)", "[control][random_slot][identity]",
                   float, double) {
  using T = TestType;
  auto k = ref::random<T>(90, 6, 31), v = ref::random<T>(90, 2, 32);
  abc::BoundedAttention attn{abc::control::RandomSlot<T>{abc::Slots{7}, abc::Seed{9}}};
  auto state = attn.make_state(6, 2);
  attn.forward_causal(state, k, k, v);
  ref::Mat total(1, std::vector<double>(6, 0.0));
  for (Index i = 0; i < 90; ++i)
    for (Index c = 0; c < 6; ++c) total[0][size_t(c)] += double(k(i, c));
  ref::require_close(abc::Matrix<T>(state.keys().colwise().sum()), total);
  REQUIRE_THROWS_WITH(abc::control::RandomSlot<T>(abc::Slots{0}, abc::Seed{1}), ABC_CONTAINS("abc::control::RandomSlot: n is 0, expected at least 1"));
}

}  // namespace random_slot_test
