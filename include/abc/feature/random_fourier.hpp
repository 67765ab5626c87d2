// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. feature::RandomFourier, the Gaussian sin/cos map of RFA.
#pragma once

#include <cmath>
#include <string>

#include "../detail/check.hpp"
#include "../detail/control_check.hpp"
#include "../types.hpp"

namespace abc {
namespace feature {

/**
 * \brief φ(x) = sqrt(1/D) [sin(W x), cos(W x)] ∈ R^{2D} (RFA, dissertation Eq. 4.2): all sines, then all cosines.
 *
 * ‖φ(x)‖ = 1 for every x, since Σ (sin² + cos²)/D = 1. With W = s·W̃, W̃ ~ N(0, I),
 * E[φ(x)·φ(y)] = exp(−s²‖x − y‖²/2); for unit-norm inputs the linear readout tends to softmax
 * attention with inverse temperature s² as D grows. `normalize` maps inputs to x/‖x‖ first
 * (a zero input stays zero).
 *
 * \tparam T float or double.
 */
template <class T = float>
class RandomFourier {
 public:
  /// float or double.
  using scalar_type = T;
  /// The map's name in state blobs.
  static std::string tag() { return "abc::feature::RandomFourier"; }

  /// From W [D × d]. \throws config_error if W is empty or not finite.
  explicit RandomFourier(Matrix<T> w, bool normalize = false) : w_(std::move(w)), normalize_(normalize) {
    detail::require_at_least("abc::feature::RandomFourier", "W.rows() (D)", w_.rows(), 1, "at least one feature");
    detail::require_at_least("abc::feature::RandomFourier", "W.cols() (d)", w_.cols(), 1, "inputs need a column");
    if (auto p = detail::finite_problem("W", w_)) detail::raise("abc::feature::RandomFourier", p);
  }

  /// d, the input width (W's columns).
  Index input_dim() const noexcept { return w_.cols(); }
  Index size() const noexcept { return 2 * w_.rows(); }  ///< 2D
  /// W [D × d].
  const Matrix<T>& projection() const noexcept { return w_; }
  /// Whether inputs are mapped to x/‖x‖ before the projection.
  bool normalize() const noexcept { return normalize_; }

  /// φ of each row of x [rows × d] into phi [rows × 2D].
  void map(MatrixRef<T> x, MatrixOut<T> phi) const {
    if (x.rows() == 0) return;  // no rows: the column blocks of an empty buffer are not formed
    const Index D = w_.rows();
    auto proj = phi.leftCols(D);
    proj.noalias() = x * w_.transpose();
    if (normalize_)
      for (Index i = 0; i < x.rows(); ++i) {
        const T norm = x.row(i).norm();
        if (norm > T(0)) proj.row(i) /= norm;  // W (x/‖x‖) = (W x)/‖x‖
      }
    const T scale = T(1) / std::sqrt(T(D));
    phi.rightCols(D) = scale * proj.array().cos();
    proj = scale * proj.array().sin();
  }

 private:
  Matrix<T> w_;
  bool normalize_;
};

}  // namespace feature
}  // namespace abc
