// SPDX-License-Identifier: MIT
// abc tests: feature::ArcCosine estimates the order-1 arc-cosine kernel (oracle 23), of x and y
// as given (raw) or of their directions (the default), and matches a float64 reference at every
// input magnitude.
#include <abc/feature/arc_cosine.hpp>
#include <abc/feature/input_norm.hpp>
#include <abc/feature/projection.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace arc_cosine_test {

using abc::Index;

TEST_CASE("the arc-cos map's mean kernel is ‖x‖‖y‖(sin θ + (π − θ) cos θ)/(2π); of the directions by default",
          "[feature][arc_cosine][statistical]") {
  const Index d = 6, D = 64, draws = 3000;
  auto xy = ref::random<double>(2, d, 51);
  const abc::Matrix<double> x = xy.topRows(1), y = xy.bottomRows(1);
  const double nx = x.norm(), ny = y.norm(), theta = std::acos(x.row(0).dot(y.row(0)) / (nx * ny));
  const double angular = (std::sin(theta) + (M_PI - theta) * std::cos(theta)) / (2 * M_PI);
  REQUIRE(std::abs(nx * ny - 1) > 0.2);  // the two forms estimate different values
  const abc::feature::Projection<double> pool(D, d, abc::Seed{99});
  for (auto norm : {abc::feature::InputNorm::raw, abc::feature::InputNorm::unit}) {
    const bool unit = norm == abc::feature::InputNorm::unit;
    // Raw: the kernel of x and y as given; unit: of x/‖x‖ and y/‖y‖, a function of θ alone.
    const double want = unit ? angular : nx * ny * angular;
    std::vector<double> est;
    abc::Matrix<double> fx(1, D), fy(1, D);
    for (Index r = 0; r < draws; ++r) {
      const abc::feature::ArcCosine<double> phi =
          unit ? abc::feature::ArcCosine<double>(pool.draw(std::uint64_t(r)))
               : abc::feature::ArcCosine<double>(pool.draw(std::uint64_t(r)), abc::feature::InputNorm::raw);
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
    INFO("unit " << unit << ": mean " << mean << ", closed form " << want << ", s.e. " << se);
    REQUIRE(std::abs(mean - want) < 4 * se);
  }
}

TEMPLATE_TEST_CASE("the arc-cos map reads x/‖x‖ by default and x with InputNorm::raw, each as its float64 reference",
                   "[feature][arc_cosine][input_norm]", float, double) {
  using T = TestType;
  using abc::feature::InputNorm;
  using lim = std::numeric_limits<T>;
  const Index D = 16, d = 3;
  const abc::Matrix<T> w = abc::feature::Projection<T>(D, d, abc::Seed{91}).draw();
  REQUIRE(abc::feature::ArcCosine<T>(w).input_norm() == InputNorm::unit);
  REQUIRE(abc::feature::ArcCosine<T>(w, InputNorm::raw).input_norm() == InputNorm::raw);
  // Rows of every magnitude: ordinary, zero, subnormal, tiny normal, huge, at the largest finite
  // value, and mixed; then ordinary rows of norm ≠ 1.
  const T dm = lim::denorm_min(), mx = lim::max();
  abc::Matrix<T> x(12, d);
  x << T(0.3), T(-0.7), T(0.2), T(0), T(0), T(0), dm, -2 * dm, 3 * dm, T(1e-30), T(-2e-30), T(0), T(1e30), T(-1e30),
      T(5e29), mx, mx, -mx, mx, dm, T(-1), lim::min(), T(0), -lim::min(), T(2), T(-1.5), T(0.25),
      ref::random<T>(3, d, 92, 4.0);
  abc::Matrix<T> fu(x.rows(), D), fr(x.rows(), D);
  abc::feature::ArcCosine<T>(w).map(x, fu);
  abc::feature::ArcCosine<T>(w, InputNorm::raw).map(x, fr);
  REQUIRE(fu.allFinite());
  const double eps = double(lim::epsilon());
  for (Index i = 0; i < x.rows(); ++i) {
    // x̂ in float64 with plain loops: divided by max|x_j| first, so subnormal and huge entries have a norm.
    std::vector<double> xh(static_cast<size_t>(d));
    double m = 0;
    for (Index j = 0; j < d; ++j) m = std::max(m, std::abs(double(x(i, j))));
    double n2 = 0;
    for (Index j = 0; j < d; ++j) {
      xh[size_t(j)] = m > 0 ? double(x(i, j)) / m : 0.0;
      n2 += xh[size_t(j)] * xh[size_t(j)];
    }
    for (auto& e : xh) e = n2 > 0 ? e / std::sqrt(n2) : 0.0;
    for (Index r = 0; r < D; ++r) {
      double p = 0, bound = 0, praw = 0, braw = 0;
      for (Index j = 0; j < d; ++j) {
        p += double(w(r, j)) * xh[size_t(j)];
        bound += std::abs(double(w(r, j)) * xh[size_t(j)]);
        praw += double(w(r, j)) * double(x(i, j));
        braw += std::abs(double(w(r, j)) * double(x(i, j)));
      }
      INFO("row " << i << ", feature " << r);
      const double scale = 1 / std::sqrt(double(D));
      REQUIRE(std::abs(double(fu(i, r)) - std::max(p, 0.0) * scale) <= 4 * double(d + 2) * eps * bound * scale);
      // Raw: the projection of x as given, where it is finite; relative to its own magnitude, plus
      // the absolute rounding of subnormal products and sums (up to half a denorm_min per operation,
      // in the library and in this float64 reference alike).
      if (braw < double(lim::max()) / 4)
        REQUIRE(std::abs(double(fr(i, r)) - std::max(praw, 0.0) * scale) <=
                4 * double(d + 2) * eps * braw * scale + 4 * double(d + 1) * double(lim::denorm_min()));
    }
  }
  // The zero vector maps to zero under both forms; rows of norm ≠ 1 differ.
  REQUIRE(fu.row(1).isZero());
  REQUIRE(fr.row(1).isZero());
  REQUIRE((fu.bottomRows(4) - fr.bottomRows(4)).cwiseAbs().maxCoeff() > T(0.1));
}

}  // namespace arc_cosine_test
