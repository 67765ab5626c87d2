// SPDX-License-Identifier: MIT
// abc tests: kernel::add_census (the counting pass of TRAMS's top-k selection) against plain loops,
// at lengths around the batch width, at unaligned addresses, with ties, infinities and NaN.
#include <abc/kernel/census.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "support/batch_width.hpp"
#include "support/catch.hpp"

namespace census_test {

namespace {

using abc::Index;

// Scores drawn from a few values, so that a θ taken among them has ties; some entries ±∞ or NaN.
template <class T>
std::vector<T> census_scores(Index n, std::uint64_t seed, bool specials) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> pick(0, 19);
  std::vector<T> x(std::size_t(n) + 1);  // x[0] unused: the kernel reads from x + 1, unaligned
  for (auto& v : x) {
    const int r = pick(gen);
    if (specials && r == 0) v = std::numeric_limits<T>::quiet_NaN();
    else if (specials && r == 1) v = std::numeric_limits<T>::infinity();
    else if (specials && r == 2) v = -std::numeric_limits<T>::infinity();
    else v = T(r % 7) * T(0.25) - T(0.5);
  }
  return x;
}

template <class T>
abc::kernel::Census<T> census_loop(const T* x, Index n, T theta) {
  abc::kernel::Census<T> c;
  for (Index j = 0; j < n; ++j) {
    if (x[j] > theta) {
      ++c.above;
      if (x[j] < c.up) c.up = x[j];
    } else if (x[j] == theta) {
      ++c.at;
    } else if (x[j] < theta) {
      ++c.below;
      if (x[j] > c.down) c.down = x[j];
    }
  }
  return c;
}

template <class T>
void require_same(const abc::kernel::Census<T>& got, const abc::kernel::Census<T>& want) {
  REQUIRE(got.above == want.above);
  REQUIRE(got.at == want.at);
  REQUIRE(got.below == want.below);
  REQUIRE(got.up == want.up);
  REQUIRE(got.down == want.down);
}

}  // namespace

TEMPLATE_TEST_CASE("kernel::add_census counts above, at and below a value and finds its neighbours", "[kernel]",
                   float, double) {
  using T = TestType;
  const Index w = ref::batch_width<T>();
  const T inf = std::numeric_limits<T>::infinity();
  for (bool specials : {false, true})
    for (Index n : {Index(0), Index(1), w - 1, w, w + 1, 2 * w + 3, Index(64), Index(65), Index(1000)}) {
      const auto x = census_scores<T>(n, 40 + std::uint64_t(n) + (specials ? 7 : 0), specials);
      const T* p = x.data() + 1;
      // θ among the values (ties), between them, beyond all of them, and infinite.
      for (T theta : {T(-0.5), T(0), T(0.25), T(0.1), T(1.5), T(-2), T(3), inf, -inf}) {
        INFO("n " << n << ", theta " << theta << (specials ? ", with ±inf and NaN" : ""));
        abc::kernel::Census<T> got;
        abc::kernel::add_census(p, n, theta, got);
        const auto want = census_loop(p, n, theta);
        require_same(got, want);
        if (!specials) REQUIRE(got.above + got.at + got.below == n);  // NaN is the only entry left out
        // Added in two parts (a ring's two runs), the census is that of the whole.
        for (Index cut : {Index(0), n / 3, n}) {
          abc::kernel::Census<T> parts;
          abc::kernel::add_census(p, cut, theta, parts);
          abc::kernel::add_census(p + cut, n - cut, theta, parts);
          require_same(parts, want);
        }
      }
    }
}

}  // namespace census_test
