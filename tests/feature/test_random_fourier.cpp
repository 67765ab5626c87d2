// SPDX-License-Identifier: MIT
// abc tests: feature::RandomFourier and feature::Projection: the unit norm of φ, the map against a
// float64 reference with unit-norm (default) and raw inputs at every magnitude, the kernel it
// estimates (with the corrected σ convention) and the estimate's variance.
#include <abc/feature/arc_cosine.hpp>
#include <abc/feature/input_norm.hpp>
#include <abc/feature/projection.hpp>
#include <abc/feature/random_fourier.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "support/catch.hpp"
#include "support/reference.hpp"

namespace random_fourier_test {

using abc::Index;

TEMPLATE_TEST_CASE("the sin/cos map has unit norm for any input (oracle 16)", "[feature][random_fourier]", float, double) {
  using T = TestType;
  for (auto norm : {abc::feature::InputNorm::unit, abc::feature::InputNorm::raw})
    for (Index D : {Index(1), Index(7), Index(64)})
      for (double mag : {1e-3, 1.0, 1e3}) {
        const abc::Matrix<T> w = abc::feature::Projection<T>(D, 5, abc::Seed(std::uint64_t(D)), T(2)).draw();
        const auto x = ref::random<T>(40, 5, 9, mag);
        abc::Matrix<T> f(40, 2 * D);
        abc::feature::RandomFourier<T>(w, norm).map(x, f);
        for (Index i = 0; i < 40; ++i) REQUIRE(std::abs(double(f.row(i).norm()) - 1.0) <= 20 * double(std::numeric_limits<T>::epsilon()));
      }
}

namespace {

// x̂ in float64 with plain loops: x/‖x‖ (divided by max|x_j| first, so that subnormal and huge
// entries have a norm; the zero vector stays zero) or x itself.
std::vector<double> direction(std::vector<double> x, bool unit) {
  if (!unit) return x;
  double m = 0;
  for (double e : x) m = std::max(m, std::abs(e));
  if (m == 0) return x;
  for (auto& e : x) e /= m;
  const double n = std::sqrt(ref::dot(x, x));
  for (auto& e : x) e /= n;
  return x;
}

// Rows of every magnitude: ordinary, zero, subnormal, tiny normal, huge, at the largest finite
// value, and mixed.
template <class T>
abc::Matrix<T> edge_rows() {
  using lim = std::numeric_limits<T>;
  const T dm = lim::denorm_min(), mx = lim::max();
  abc::Matrix<T> x(9, 3);
  x << T(0.3), T(-0.7), T(0.2),  //
      T(0), T(0), T(0),          //
      dm, -2 * dm, 3 * dm,       //
      T(1e-30), T(-2e-30), T(0),  //
      T(1e30), T(-1e30), T(5e29), //
      mx, mx, -mx,               //
      mx, dm, T(-1),             //
      lim::min(), T(0), -lim::min(), //
      T(2), T(-1.5), T(0.25);
  return x;
}

}  // namespace

TEMPLATE_TEST_CASE("the sin/cos map reads x/‖x‖ by default and x with InputNorm::raw, each as its float64 reference",
                   "[feature][random_fourier][input_norm]", float, double) {
  using T = TestType;
  using abc::feature::InputNorm;
  const Index D = 16, d = 3;
  const abc::Matrix<T> w = abc::feature::Projection<T>(D, d, abc::Seed{81}, T(1.5)).draw();
  REQUIRE(abc::feature::RandomFourier<T>(w).input_norm() == InputNorm::unit);
  REQUIRE(abc::feature::RandomFourier<T>(w, InputNorm::raw).input_norm() == InputNorm::raw);
  abc::Matrix<T> x(12, d);
  x << edge_rows<T>(), ref::random<T>(3, d, 82, 4.0);
  const double eps = double(std::numeric_limits<T>::epsilon());
  abc::Matrix<T> fu(x.rows(), 2 * D), fr(x.rows(), 2 * D);
  abc::feature::RandomFourier<T>(w).map(x, fu);
  abc::feature::RandomFourier<T>(w, InputNorm::raw).map(x, fr);
  REQUIRE(fu.allFinite());
  double apart = 0;
  for (Index i = 0; i < x.rows(); ++i)
    for (bool unit : {true, false}) {
      // Raw rows whose W x is not small are left out: sin and cos of a large argument are
      // ill-conditioned, and beyond overflow undefined.
      std::vector<double> xi(static_cast<size_t>(d));
      for (Index j = 0; j < d; ++j) xi[size_t(j)] = double(x(i, j));
      const auto xh = direction(xi, unit);
      double big = 0;
      for (double e : xh) big = std::max(big, std::abs(e));
      if (!unit && big > 4) continue;
      for (Index r = 0; r < D; ++r) {
        double p = 0, bound = 0;
        for (Index j = 0; j < d; ++j) {
          p += double(w(r, j)) * xh[size_t(j)];
          bound += std::abs(double(w(r, j)) * xh[size_t(j)]);
        }
        // Rounding of the projection (and of x̂) moves the argument by about (d + 2)·ε·Σ|w_j x̂_j|.
        const double tol = 4 * double(d + 2) * eps * (1 + bound) / std::sqrt(double(D));
        const abc::Matrix<T>& f = unit ? fu : fr;
        INFO("row " << i << ", unit " << unit << ", feature " << r);
        REQUIRE(std::abs(double(f(i, r)) - std::sin(p) / std::sqrt(double(D))) <= tol);
        REQUIRE(std::abs(double(f(i, D + r)) - std::cos(p) / std::sqrt(double(D))) <= tol);
      }
      if (!unit) apart = std::max(apart, double((fu.row(i) - fr.row(i)).cwiseAbs().maxCoeff()));
    }
  // The zero vector has no direction: both forms map it as it is, sin 0 = 0 and cos 0 = 1.
  REQUIRE(fu.row(1) == fr.row(1));
  REQUIRE(fu.row(1).leftCols(D).isZero());
  REQUIRE((fu.row(1).rightCols(D).array() == T(1) / std::sqrt(T(D))).all());
  // Inputs of norm ≠ 1 have other features under the two forms.
  REQUIRE(apart > 0.1);
}

TEST_CASE("projection draws: reproducible, distinct across the pool, σ scales the rows", "[feature][projection]") {
  const abc::feature::Projection<double> pool(16, 4, abc::Seed{123}, 0.5);
  REQUIRE(pool.draw(2) == pool.draw(2));
  REQUIRE(pool.draw(2) != pool.draw(3));
  REQUIRE(abc::feature::Projection<double>(16, 4, abc::Seed{124}, 0.5).draw(2) != pool.draw(2));
  const abc::Matrix<double> unit = abc::feature::Projection<double>(16, 4, abc::Seed{123}, 1.0).draw(2);
  REQUIRE((pool.draw(2) - 0.5 * unit).cwiseAbs().maxCoeff() < 1e-15);
  // Orthogonal draws: each block of d rows is orthogonal.
  const abc::Matrix<double> o = abc::feature::Projection<double>(8, 4, abc::Seed{5}, 1.0, abc::feature::Draw::orthogonal).draw();
  for (Index b = 0; b < 8; b += 4) {
    const abc::Matrix<double> g = o.middleRows(b, 4) * o.middleRows(b, 4).transpose();
    for (Index i = 0; i < 4; ++i)
      for (Index j = 0; j < 4; ++j)
        if (i != j) REQUIRE(std::abs(g(i, j)) < 1e-12);
  }
  REQUIRE_THROWS_AS(abc::feature::Projection<double>(0, 4, abc::Seed{1}), abc::config_error);
  REQUIRE_THROWS_WITH(abc::feature::Projection<double>(0, 4, abc::Seed{1}),
                      ABC_CONTAINS("abc::feature::Projection: D is 0, expected at least 1 (at least one random feature)"));
  REQUIRE_THROWS_WITH(abc::feature::Projection<double>(4, 3, abc::Seed{1}, abc::Vector<double>::Ones(2)),
                      ABC_CONTAINS("abc::feature::Projection: sigma.size() is 2, expected 3 (one σ per input dimension)"));
}

TEST_CASE("the kernel estimate: mean exp(−s²‖x−y‖²/2), variance (1/2D)(1−e^{−z²})² (oracles 17, 18)",
          "[feature][random_fourier][statistical]") {
  const Index d = 8, D = 64, draws = 4000;
  const double s = 0.9;
  auto xy = ref::random<double>(2, d, 41, 0.4);
  const abc::Matrix<double> x = xy.topRows(1), y = xy.bottomRows(1);
  const double dist2 = (x - y).squaredNorm(), z2 = s * s * dist2;
  const double mean_want = std::exp(-z2 / 2), var_want = (1 - std::exp(-z2)) * (1 - std::exp(-z2)) / (2.0 * D);
  const abc::feature::Projection<double> pool(D, d, abc::Seed{2024}, s);
  std::vector<double> est;
  abc::Matrix<double> fx(1, 2 * D), fy(1, 2 * D);
  for (Index r = 0; r < draws; ++r) {
    // Raw inputs: this is the Gaussian kernel of x and y as given (|x|, |y| ≠ 1).
    const abc::feature::RandomFourier<double> phi(pool.draw(std::uint64_t(r)), abc::feature::InputNorm::raw);
    phi.map(x, fx);
    phi.map(y, fy);
    est.push_back(fx.row(0).dot(fy.row(0)));
  }
  double mean = 0, var = 0;
  for (double e : est) mean += e;
  mean /= double(draws);
  for (double e : est) var += (e - mean) * (e - mean);
  var /= double(draws - 1);
  const double se = std::sqrt(var_want / double(draws));
  INFO("mean " << mean << " (want " << mean_want << ", s.e. " << se << "), variance " << var << " (want " << var_want << ")");
  REQUIRE(std::abs(mean - mean_want) < 4 * se);
  REQUIRE(std::abs(var / var_want - 1) < 0.10);
  // The dissertation's Eq. 4.3 read literally (σ as a bandwidth) predicts a different kernel.
  REQUIRE(std::abs(mean - std::exp(-dist2 / (2 * s * s))) > 10 * se);
}

TEMPLATE_TEST_CASE("both random-feature maps give a row alone the features it has in a block, bit for bit",
                   "[feature][random_fourier][arc_cosine][input_norm]", float, double) {
  // A decode step maps one query and one key; the chunked kernels map a chunk's rows together.
  // The same bits either way keep a step loop equal to the chunked call.
  using T = TestType;
  using abc::feature::InputNorm;
  for (Index d : {Index(3), Index(37), Index(64)})
    for (Index D : {Index(5), Index(40)}) {
      const abc::Matrix<T> w = abc::feature::Projection<T>(D, d, abc::Seed(std::uint64_t(d * 100 + D)), T(1.5)).draw();
      abc::Matrix<T> x = ref::random<T>(20, d, 83, 2.0);
      const abc::Matrix<T> edges = edge_rows<T>();
      x.topLeftCorner(edges.rows(), std::min(d, edges.cols())) = edges.leftCols(std::min(d, edges.cols()));
      x.row(1).setZero();
      for (InputNorm norm : {InputNorm::unit, InputNorm::raw}) {
        const abc::feature::RandomFourier<T> sincos(w, norm);
        const abc::feature::ArcCosine<T> arccos(w, norm);
        abc::Matrix<T> fs(x.rows(), 2 * D), fa(x.rows(), D), one_s(1, 2 * D), one_a(1, D);
        sincos.map(x, fs);
        arccos.map(x, fa);
        for (Index i = 0; i < x.rows(); ++i) {
          INFO("d = " << d << ", D = " << D << ", unit " << (norm == InputNorm::unit) << ", row " << i);
          sincos.map(x.row(i), one_s);
          arccos.map(x.row(i), one_a);
          // Equal values with equal signs (of zeros too) are equal bits; a raw row whose W x
          // overflows has NaN features either way.
          const auto same = [](T a, T b) {
            return (a == b && std::signbit(a) == std::signbit(b)) || (std::isnan(a) && std::isnan(b));
          };
          for (Index r = 0; r < 2 * D; ++r) REQUIRE(same(one_s(0, r), fs(i, r)));
          for (Index r = 0; r < D; ++r) REQUIRE(same(one_a(0, r), fa(i, r)));
        }
      }
    }
}

}  // namespace random_fourier_test
