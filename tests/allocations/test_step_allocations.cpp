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

// Steps `attn` over a few tokens with the allocation counter armed; returns the count.
template <class Attn, class T>
long allocations_in_steps(const Attn& attn, const abc::Matrix<T>& q, const abc::Matrix<T>& k, const abc::Matrix<T>& v) {
  auto state = attn.make_state(k.cols(), v.cols());
  abc::Vector<T> out(v.cols());
  attn.step_into(state, q.row(0), k.row(0), v.row(0), out);  // warm-up outside the count
  allocations = 0;
  armed = true;
  Eigen::internal::set_is_malloc_allowed(false);
  try {
    for (abc::Index t = 1; t < q.rows(); ++t) attn.step_into(state, q.row(t), k.row(t), v.row(t), out);
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
  REQUIRE(allocations_in_steps(abc::BoundedAttention{Mlp<T>(d, 40, 1)}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{Linformer<T>(8, N, 1)}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{Cluster<T>(ref::random<T>(5, d, 4))}, q, k, v) == 0);
  REQUIRE(allocations_in_steps(abc::BoundedAttention{RandomFeature<T>{abc::feature::RandomFourier<T>(abc::feature::Projection<T>(8, d, 1).draw())}}, q, k, v) == 0);
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
