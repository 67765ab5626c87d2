// SPDX-License-Identifier: MIT
// abc tests: comparisons against the float64 reference with the tolerances of docs/design.md §3.
#pragma once

#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>

#include <abc/types.hpp>

#include "catch.hpp"
#include "reference.hpp"

namespace ref {

struct Errors {
  double max_abs = 0, rel_max = 0, rel_rms = 0;
  bool finite = true;
};

template <class T>
Errors errors(const abc::Matrix<T>& got, const Mat& want) {
  Errors e;
  double num = 0, den = 0, ref_max = 0;
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t j = 0; j < want[i].size(); ++j) {
      const double g = static_cast<double>(got(Index(i), Index(j)));
      if (!std::isfinite(g)) e.finite = false;
      const double diff = std::abs(g - want[i][j]);
      e.max_abs = std::max(e.max_abs, diff);
      ref_max = std::max(ref_max, std::abs(want[i][j]));
      num += diff * diff;
      den += want[i][j] * want[i][j];
    }
  e.rel_max = ref_max > 0 ? e.max_abs / ref_max : e.max_abs;
  e.rel_rms = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

// double: ≤ 1e-12 relative (max error over max magnitude); float: ≤ 2e-5 relative RMS and ≤ 1e-4
// max absolute (unit-scale data).
template <class T>
void require_close(const abc::Matrix<T>& got, const Mat& want) {
  REQUIRE(got.rows() == rows(want));
  if (!want.empty()) REQUIRE(got.cols() == Index(want[0].size()));
  const Errors e = errors(got, want);
  INFO("max_abs " << e.max_abs << ", rel_max " << e.rel_max << ", rel_rms " << e.rel_rms);
  REQUIRE(e.finite);
  if (std::is_same<T, double>::value) {
    REQUIRE(e.rel_max <= 1e-12);
  } else {
    REQUIRE(e.rel_rms <= 2e-5);
    REQUIRE(e.max_abs <= 1e-4);
  }
}

// A State's K̃ (column-major): compared entry by entry as the row-major result it equals.
template <class T>
void require_close(const abc::ColMatrix<T>& got, const Mat& want) {
  require_close(abc::Matrix<T>(got), want);
}

// Two library results that must agree to rounding (different kernels, splits).
template <class T>
void require_same(const abc::Matrix<T>& a, const abc::Matrix<T>& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  const double tol = std::is_same<T, double>::value ? 1e-12 : 2e-5;
  if (a.size() == 0) return;  // nothing to compare (maxCoeff of an empty matrix is undefined)
  const double scale = std::max<double>(1.0, static_cast<double>(b.cwiseAbs().maxCoeff()));
  const double diff = static_cast<double>((a - b).cwiseAbs().maxCoeff());
  INFO("max difference " << diff);
  REQUIRE(diff <= tol * scale);
}

}  // namespace ref
