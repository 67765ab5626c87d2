// SPDX-License-Identifier: MIT
// abc tests: feature::ArcCosine estimates the order-1 arc-cosine kernel (oracle 23).
#include <abc/feature/arc_cosine.hpp>
#include <abc/feature/projection.hpp>

#include <cmath>
#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

using abc::Index;

TEST_CASE("the arc-cos map's mean kernel is ‖x‖‖y‖(sin θ + (π − θ) cos θ)/(2π)", "[feature][arc_cosine][statistical]") {
  const Index d = 6, D = 64, draws = 3000;
  auto xy = ref::random<double>(2, d, 51);
  const abc::Matrix<double> x = xy.topRows(1), y = xy.bottomRows(1);
  const double nx = x.norm(), ny = y.norm(), theta = std::acos(x.row(0).dot(y.row(0)) / (nx * ny));
  const double want = nx * ny * (std::sin(theta) + (M_PI - theta) * std::cos(theta)) / (2 * M_PI);
  const abc::feature::Projection<double> pool(D, d, 99);
  std::vector<double> est;
  abc::Matrix<double> fx(1, D), fy(1, D);
  for (Index r = 0; r < draws; ++r) {
    const abc::feature::ArcCosine<double> phi(pool.draw(std::uint64_t(r)));
    phi.map(x, fx);
    phi.map(y, fy);
    REQUIRE(fx.minCoeff() >= 0);  // features are never negative
    est.push_back(fx.row(0).dot(fy.row(0)));
  }
  double mean = 0, var = 0;
  for (double e : est) mean += e;
  mean /= double(draws);
  for (double e : est) var += (e - mean) * (e - mean);
  var /= double(draws - 1);
  const double se = std::sqrt(var / double(draws));
  INFO("mean " << mean << ", closed form " << want << ", s.e. " << se);
  REQUIRE(std::abs(mean - want) < 4 * se);
}
