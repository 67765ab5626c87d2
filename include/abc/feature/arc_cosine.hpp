// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. feature::ArcCosine, the order-1 arc-cosine map of RFA.
#pragma once

#include <cmath>
#include <string>
#include <utility>

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
class ArcCosine : public detail::RandomProjection<T> {
 public:
  /// float or double.
  using scalar_type = T;
  /// The map's name in state blobs.
  static std::string tag() { return "abc::feature::ArcCosine"; }

  /// From W [D × d], reading x/‖x‖ (`unit`, the default) or x (`raw`).
  /// \throws config_error if W is empty or not finite.
  explicit ArcCosine(Matrix<T> w, InputNorm norm = InputNorm::unit)
      : detail::RandomProjection<T>("abc::feature::ArcCosine", std::move(w), norm) {}

  Index size() const noexcept { return this->projection().rows(); }  ///< D

  /// φ of each row of x [rows × d] into phi [rows × D].
  void map(MatrixRef<T> x, MatrixOut<T> phi) const {
    if (x.rows() == 0) return;  // no rows: nothing to map
    this->project(x, phi);
    phi = (T(1) / std::sqrt(T(this->projection().rows()))) * phi.array().max(T(0));
  }

  /// The chain rule through φ for rows x [rows × d], given d_phi = ∂L/∂φ(x) [rows × D]: with
  /// y = W x̂, ∂L/∂y = sqrt(1/D) d_phi ⊙ [y > 0] (relu's derivative, taken as 0 at y = 0); then
  /// ∂L/∂x is added into dx [rows × d] and ∂L/∂W into d_w [D × d] (RandomProjection::project_backward).
  void map_backward(MatrixRef<T> x, MatrixRef<T> d_phi, MatrixOut<T> dx, Matrix<T>& d_w) const {
    if (x.rows() == 0) return;
    const Index D = this->projection().rows();
    Matrix<T> y(x.rows(), D);
    this->project(x, y);
    const T scale = T(1) / std::sqrt(T(D));
    const Matrix<T> dy = scale * (y.array() > T(0)).select(d_phi.array(), T(0)).matrix();
    this->project_backward(x, dy, dx, d_w);
  }
};

}  // namespace feature
ABC_NAMESPACE_END
