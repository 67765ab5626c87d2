// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. feature::RandomFourier, the Gaussian sin/cos map of RFA.
#pragma once

#include <cmath>
#include <string>
#include <utility>

#include "../kernel/sin_cos.hpp"
#include "../types.hpp"
#include "input_norm.hpp"

ABC_NAMESPACE_BEGIN
namespace feature {

/**
 * \brief φ(x) = sqrt(1/D) [sin(W x̂), cos(W x̂)] ∈ R^{2D} (RFA, dissertation Eq. 4.2): all sines, then all cosines.
 *
 * By default (InputNorm::unit) the map reads the direction x̂ = x/‖x‖ of its input, as RFA does
 * (dissertation §4.3.3): φ(x) = sqrt(1/D) [sin(W x̂), cos(W x̂)]. With W = s·W̃, W̃ ~ N(0, I),
 * E[φ(x)·φ(y)] = exp(−s²‖x̂ − ŷ‖²/2) = e^{−s²} exp(s² x̂·ŷ), so the linear readout tends to softmax
 * attention over x̂·ŷ with inverse temperature s² as D grows. InputNorm::raw maps x as given and
 * estimates the Gaussian kernel exp(−s²‖x − y‖²/2) instead. The zero vector is mapped as it is
 * (φ(0) = sqrt(1/D) [0, …, 0, 1, …, 1]); finite inputs of any magnitude, subnormal or near overflow,
 * have finite features under `unit` (under `raw`, W x itself must not overflow). ‖φ(x)‖ = 1 for
 * every x, since Σ (sin² + cos²)/D = 1.
 *
 * \tparam T float or double.
 */
template <class T = float>
class RandomFourier : public detail::RandomProjection<T> {
 public:
  /// float or double.
  using scalar_type = T;
  /// The map's name in state blobs.
  static std::string tag() { return "abc::feature::RandomFourier"; }

  /// From W [D × d], reading x/‖x‖ (`unit`, the default) or x (`raw`).
  /// \throws config_error if W is empty or not finite.
  explicit RandomFourier(Matrix<T> w, InputNorm norm = InputNorm::unit)
      : detail::RandomProjection<T>("abc::feature::RandomFourier", std::move(w), norm) {}

  Index size() const noexcept { return 2 * this->projection().rows(); }  ///< 2D

  /// φ of each row of x [rows × d] into phi [rows × 2D].
  void map(MatrixRef<T> x, MatrixOut<T> phi) const {
    if (x.rows() == 0) return;  // no rows: the column blocks of an empty buffer are not formed
    const Index D = this->projection().rows();
    auto proj = phi.leftCols(D);
    this->project(x, proj);
    const T scale = T(1) / std::sqrt(T(D));
    for (Index i = 0; i < x.rows(); ++i) {  // row by row, so that each row's bits are its own
      T* row = phi.row(i).data();
      kernel::sin_cos(row, D, scale, row, row + D);
    }
  }

  /// The chain rule through φ for rows x [rows × d], given d_phi = ∂L/∂φ(x) [rows × 2D]: with
  /// y = W x̂, ∂L/∂y = sqrt(1/D) (d_sin ⊙ cos y − d_cos ⊙ sin y); then ∂L/∂x is added into dx
  /// [rows × d] and ∂L/∂W into d_w [D × d] (RandomProjection::project_backward: through x̂ under
  /// `unit`; the zero vector's gradient is 0).
  void map_backward(MatrixRef<T> x, MatrixRef<T> d_phi, MatrixOut<T> dx, Matrix<T>& d_w) const {
    if (x.rows() == 0) return;
    const Index D = this->projection().rows();
    Matrix<T> y(x.rows(), D);
    this->project(x, y);
    const T scale = T(1) / std::sqrt(T(D));
    const Matrix<T> dy = scale * (d_phi.leftCols(D).array() * y.array().cos() -
                                  d_phi.rightCols(D).array() * y.array().sin()).matrix();
    this->project_backward(x, dy, dx, d_w);
  }
};

}  // namespace feature
ABC_NAMESPACE_END
