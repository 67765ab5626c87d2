// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. feature::ArcCosine, the order-1 arc-cosine map of RFA.
#pragma once

#include <cmath>
#include <string>

#include "../detail/check.hpp"
#include "../detail/control_check.hpp"
#include "../types.hpp"

namespace abc {
namespace feature {

/**
 * \brief φ(x) = sqrt(1/D) relu(W x) ∈ R^D (RFA §4.3.3): half the size of the sin/cos map.
 *
 * With W̃ ~ N(0, I): E[φ(x)·φ(y)] = ‖x‖‖y‖ (sin θ + (π − θ) cos θ) / (2π), the order-1 arc-cosine
 * kernel (a dot-product kernel, not shift-invariant, and not softmax). Features are ≥ 0, but the
 * readout's denominator is exactly 0 when every feature of the query is inactive: the readout then
 * returns 0 unless a floor is set.
 */
template <class T = float>
class ArcCosine {
 public:
  /// float or double.
  using scalar_type = T;
  /// The map's name in state blobs.
  static std::string tag() { return "abc::feature::ArcCosine"; }

  /// From W [D × d]; `normalize` maps inputs to x/‖x‖ first (a zero input stays zero).
  /// \throws config_error if W is empty or not finite.
  explicit ArcCosine(Matrix<T> w, bool normalize = false) : w_(std::move(w)), normalize_(normalize) {
    detail::require_at_least("abc::feature::ArcCosine", "W.rows() (D)", w_.rows(), 1, "at least one feature");
    detail::require_at_least("abc::feature::ArcCosine", "W.cols() (d)", w_.cols(), 1, "inputs need a column");
    if (auto p = detail::finite_problem("W", w_)) detail::raise("abc::feature::ArcCosine", p);
  }

  /// d, the input width (W's columns).
  Index input_dim() const noexcept { return w_.cols(); }
  Index size() const noexcept { return w_.rows(); }  ///< D
  /// W [D × d].
  const Matrix<T>& projection() const noexcept { return w_; }
  /// Whether inputs are mapped to x/‖x‖ before the projection.
  bool normalize() const noexcept { return normalize_; }

  /// φ of each row of x [rows × d] into phi [rows × D].
  void map(MatrixRef<T> x, MatrixOut<T> phi) const {
    if (x.rows() == 0) return;  // no rows: nothing to map
    phi.noalias() = x * w_.transpose();
    if (normalize_)
      for (Index i = 0; i < x.rows(); ++i) {
        const T norm = x.row(i).norm();
        if (norm > T(0)) phi.row(i) /= norm;
      }
    phi = (T(1) / std::sqrt(T(w_.rows()))) * phi.array().max(T(0));
  }

 private:
  Matrix<T> w_;
  bool normalize_;
};

}  // namespace feature
}  // namespace abc
