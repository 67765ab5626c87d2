// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. feature::ArcCosine, the order-1 arc-cosine map of RFA.
#pragma once

#include <cmath>
#include <string>

#include "../detail/check.hpp"
#include "../detail/control_check.hpp"
#include "../types.hpp"
#include "input_norm.hpp"

ABC_NAMESPACE_BEGIN
namespace feature {

/**
 * \brief φ(x) = sqrt(1/D) relu(W x̂) ∈ R^D (RFA §4.3.3): half the size of the sin/cos map.
 *
 * x̂ = x/‖x‖ by default (InputNorm::unit, the same default as the sin/cos map, so that one setting
 * means the same for both maps), x as given with InputNorm::raw. With W̃ ~ N(0, I) and θ the angle between x
 * and y, E[φ(x)·φ(y)] = ‖x̂‖‖ŷ‖ (sin θ + (π − θ) cos θ) / (2π), the order-1 arc-cosine kernel (a
 * dot-product kernel, not shift-invariant, and not softmax): under `unit` a function of θ alone,
 * rising from 0 at θ = π to 1/2 at θ = 0. The zero vector is mapped as it is: φ(0) = 0, so a zero
 * key adds nothing and a zero query reads a zero denominator. Features are ≥ 0, but the readout's
 * denominator is exactly 0 when every feature of the query is inactive: the readout then returns 0
 * unless a floor is set. Finite inputs of any magnitude have finite features under `unit`.
 */
template <class T = float>
class ArcCosine {
 public:
  /// float or double.
  using scalar_type = T;
  /// The map's name in state blobs.
  static std::string tag() { return "abc::feature::ArcCosine"; }

  /// From W [D × d], reading x/‖x‖ (`unit`, the default) or x (`raw`).
  /// \throws config_error if W is empty or not finite.
  explicit ArcCosine(Matrix<T> w, InputNorm norm = InputNorm::unit) : w_(std::move(w)), norm_(norm) {
    detail::require_at_least("abc::feature::ArcCosine", "W.rows() (D)", w_.rows(), 1, "at least one feature");
    detail::require_at_least("abc::feature::ArcCosine", "W.cols() (d)", w_.cols(), 1, "inputs need a column");
    if (auto p = detail::finite_problem("W", w_)) detail::raise("abc::feature::ArcCosine", p);
  }

  /// d, the input width (W's columns).
  Index input_dim() const noexcept { return w_.cols(); }
  Index size() const noexcept { return w_.rows(); }  ///< D
  /// W [D × d].
  const Matrix<T>& projection() const noexcept { return w_; }
  /// Whether inputs are mapped to x/‖x‖ (`unit`) or as given (`raw`) before the projection.
  InputNorm input_norm() const noexcept { return norm_; }

  /// φ of each row of x [rows × d] into phi [rows × D].
  void map(MatrixRef<T> x, MatrixOut<T> phi) const {
    if (x.rows() == 0) return;  // no rows: nothing to map
    detail::project_direction<T>(x, w_, norm_, phi);
    phi = (T(1) / std::sqrt(T(w_.rows()))) * phi.array().max(T(0));
  }

 private:
  Matrix<T> w_;
  InputNorm norm_;
};

}  // namespace feature
ABC_NAMESPACE_END
