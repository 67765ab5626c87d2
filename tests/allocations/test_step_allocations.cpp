// SPDX-License-Identifier: MIT
// abc tests: a decode step allocates nothing. Its own executable (abc_alloc_tests), because it
// changes how allocation behaves for the whole program: the global operator new counts calls
// while a test has armed it (std containers), and Eigen is built with EIGEN_RUNTIME_NO_MALLOC so
// that any Eigen heap allocation while forbidden fails its assertion, turned into an exception.
#include <stdexcept>

#define EIGEN_RUNTIME_NO_MALLOC
#define eigen_assert(x) \
  do {                  \
    if (!(x)) throw std::logic_error("Eigen assertion failed: " #x); \
  } while (false)

#include <abc/abc.hpp>

#include <atomic>
#include <cstdlib>
#include <new>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace {
std::atomic<bool> armed{false};
std::atomic<long> allocations{0};
}  // namespace

// AddressSanitizer brings its own operator new and delete, which a replacement cannot mix with
// (memory from its new, e.g. inside the precompiled Catch2 library, would reach our delete): under
// ASan only Eigen's guard runs, and the operator-new count is checked in the other builds.
#if defined(__SANITIZE_ADDRESS__)
#  define ABC_TEST_COUNT_NEW 0
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define ABC_TEST_COUNT_NEW 0
#  endif
#endif
#ifndef ABC_TEST_COUNT_NEW
#  define ABC_TEST_COUNT_NEW 1
#endif

#if ABC_TEST_COUNT_NEW
// The replacements pair malloc with free, which is correct; GCC's -Wmismatched-new-delete only
// sees "operator new" released by free() and cannot know new is malloc here.
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#  endif

void* operator new(std::size_t size) {
  if (armed.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace {

// Steps `attn` over the tokens with the allocation counter armed after the first `warm` (outside
// the count: TRAMS sizes its read buffers as its pool fills); returns the count.
template <class Attn, class T>
long allocations_in_steps(const Attn& attn, const abc::Matrix<T>& q, const abc::Matrix<T>& k, const abc::Matrix<T>& v,
                          abc::Index warm = 1) {
  auto state = attn.make_state(k.cols(), v.cols());
  abc::Vector<T> out(v.cols());
  for (abc::Index t = 0; t < warm; ++t) attn.step_into(state, q.row(t), k.row(t), v.row(t), out);
  allocations = 0;
  armed = true;
  Eigen::internal::set_is_malloc_allowed(false);
  try {
    for (abc::Index t = warm; t < q.rows(); ++t) attn.step_into(state, q.row(t), k.row(t), v.row(t), out);
  } catch (const std::logic_error&) {  // an Eigen heap allocation
    allocations += 1000;
  }
  Eigen::internal::set_is_malloc_allowed(true);
  armed = false;
  return allocations.load();
}

}  // namespace

TEMPLATE_TEST_CASE("step_into allocates nothing", "[allocations][step]", float, double) {
  using T = TestType;
  using namespace abc::control;
  const abc::Index d = 16, dv = 8, N = 20;
  auto q = ref::random<T>(N, d, 1), k = ref::random<T>(N, d, 2), v = ref::random<T>(N, dv, 3);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{SlidingWindow<T>{8}}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{Mlp<T>(abc::Slots{40}, d, abc::Seed{1})}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{SlotGates<T>(ref::random<T>(40, d, 9), ref::random<T>(40, 1, 10), T(8))}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{Linformer<T>(abc::Slots{8}, N, abc::Seed{1})}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{Cluster<T>(ref::random<T>(5, d, 4))}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{RandomFeature<T>{abc::feature::RandomFourier<T>(abc::feature::Projection<T>(8, d, abc::Seed{1}).draw())}}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{Dilated<T>{abc::Slots{4}, 2}}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{RandomSlot<T>(abc::Slots{8}, abc::Seed{5})}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{Compressive<T>(abc::Slots{8}, 4)}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{GlobalTokens<T>(std::vector<abc::Index>{0, 3, 9})}, q, k, v) == 0);
  const abc::Vector<T> w_g = ref::random<T>(d, 1, 6);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{Gated<Mlp<T>>(Mlp<T>(abc::Slots{8}, d, abc::Seed{7}), w_g, T(1))}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(
              abc::BoundedAttention{Concat<GlobalTokens<T>, SlidingWindow<T>>(GlobalTokens<T>(std::vector<abc::Index>{0}), SlidingWindow<T>{4})},
              q, k, v) == 0);
  const abc::select::KeyScore<T> score(ref::random<T>(d, 12, 8));
  REQUIRE(allocations_in_steps(abc::BoundedAttention{TopKEviction<T>(abc::Slots{8}, 4, score)}, q, k, v) == 0);
}

// TRAMS reads a gathered copy of its kept tokens: once the pool is full, a step reuses the
// state's buffers (a scaled query folded into the product would be an Eigen temporary).
TEMPLATE_TEST_CASE("TRAMS step_into allocates nothing once its pool is full", "[allocations][step][trams]", float, double) {
  using T = TestType;
  const abc::Index d = 16, dv = 8, N = 40, pool = 12;
  auto q = ref::random<T>(N, d, 11), k = ref::random<T>(N, d, 12), v = ref::random<T>(N, dv, 13);
  const abc::select::KeyScore<T> score(ref::random<T>(d, 12, 14));
  REQUIRE(allocations_in_steps(abc::select::TramsAttention<T>({pool, 4, 3}, score), q, k, v, pool + 1) == 0);
  abc::select::TramsConfig original{pool, 4, 3};
  original.positions = abc::select::PositionMode::original;
  REQUIRE(allocations_in_steps(abc::select::TramsAttention<T>(original, score), q, k, v, pool + 1) == 0);
}

// A KV cache is sized for a step by make_state: no step allocates, while it fills or once it
// evicts, whatever the policy.
TEMPLATE_TEST_CASE("KV cache step_into allocates nothing", "[allocations][step][h2o][sinks][snapkv]", float, double) {
  using T = TestType;
  using namespace abc::select;
  const abc::Index d = 16, dv = 8, N = 40;
  auto q = ref::random<T>(N, d, 21), k = ref::random<T>(N, d, 22), v = ref::random<T>(N, dv, 23);
  REQUIRE(allocations_in_steps(HeavyHitterAttention<T>(HeavyHitterConfig{6, 5}), q, k, v) == 0);
  REQUIRE(allocations_in_steps(HeavyHitterAttention<T>(HeavyHitterConfig{0, 3}), q, k, v) == 0);
  REQUIRE(allocations_in_steps(HeavyHitterAttention<T>(HeavyHitterConfig{4, 0}), q, k, v) == 0);
  REQUIRE(allocations_in_steps(SinkAttention<T>(SinkConfig{4, 6}), q, k, v) == 0);
  REQUIRE(allocations_in_steps(SnapKvAttention<T>(SnapKvConfig{8, 4, 3, Pooling::average, 4}), q, k, v) == 0);
}

TEMPLATE_TEST_CASE("the allocation guards see what they guard", "[allocations][step]", float, double) {
  using T = TestType;
  using namespace abc::control;
  const abc::Index d = 16, dv = 8;
  auto q = ref::random<T>(1, d, 1), k = ref::random<T>(1, d, 2), v = ref::random<T>(1, dv, 3);
  // The guard works: the by-value step allocates its result, and that is caught.
  auto state = abc::BoundedAttention{SlidingWindow<T>{8}}.make_state(d, dv);
  Eigen::internal::set_is_malloc_allowed(false);
  REQUIRE_THROWS_AS(abc::BoundedAttention{SlidingWindow<T>{8}}.step(state, q.row(0), k.row(0), v.row(0)), std::logic_error);
  Eigen::internal::set_is_malloc_allowed(true);
  armed = true;
  allocations = 0;
  std::vector<int> counted(3);
  armed = false;
  if (ABC_TEST_COUNT_NEW) REQUIRE(allocations.load() == 1);
  REQUIRE(counted.size() == 3);
}
