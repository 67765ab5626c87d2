// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. feature::InputNorm, whether a random-feature map reads the
// direction x/‖x‖ of its input or the input as given, and the projection W x̂ both maps share.
#pragma once

#include <cmath>

#include <utility>
#include <vector>

#include "../detail/check.hpp"
#include "../detail/control_check.hpp"
#include "../detail/project.hpp"
#include "../kernel/finite.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace feature {

/**
 * \brief What a random-feature map does with the norm of its input, x ↦ W x̂ before sin/cos or relu.
 *
 * The feature map is the one place this is decided: control::RandomFeature maps keys (in its key
 * schedule) and queries (in its readout) with the same map object, so both are always treated
 * alike.
 *
 * The zero vector has no direction: it is mapped as it is (x̂ = 0) in either form, so `unit` and
 * `raw` give it the same features (sin/cos: sqrt(1/D) [0, …, 0, 1, …, 1]; arc-cosine: all zero).
 */
enum class InputNorm {
  unit,  ///< x̂ = x/‖x‖ (the default; RFA's practice, dissertation §4.3.3): with sin/cos features the
         ///< estimated kernel exp(−s²‖x̂ − ŷ‖²/2) = e^{−s²} exp(s² x̂·ŷ) is the softmax kernel up to a
         ///< constant, which cancels in the readout's ratio
  raw,   ///< x̂ = x: the Gaussian kernel exp(−s²‖x − y‖²/2) of the inputs as given (sin/cos), or the
         ///< arc-cosine kernel including the factor ‖x‖‖y‖
};

}  // namespace feature

namespace detail {

// proj = X Wᵀ with every row x of X read as x̂ (InputNorm). `unit` rows whose largest magnitude
// m = max|x_j| lies in [2^−32, 2^32] take the GEMM and a division by ‖x‖: Σ x_j² neither
// overflows nor underflows there, and (W x)/‖x‖ equals W (x/‖x‖) to rounding. Other rows
// (subnormal entries, huge entries), and rows whose W x overflowed, are recomputed from x·2^−e
// with 2^(e−1) ≤ m < 2^e, scaled entry by entry with ldexp (exact; the factor 2^−e itself
// overflows float for subnormal m), so that ‖x·2^−e‖ ∈ [1/2, sqrt(d)) and W x̂ is as finite as W
// allows. A zero row stays zero; a row holding NaN or ±inf keeps the GEMM's non-finite result.
// The product is detail::project's (w_t = Wᵀ): one token's row and a chunk's rows sum each entry in
// the same order, so a decode step's features equal the chunked kernel's bit for bit.
template <class T>
void project_direction(MatrixRef<T> x, const Matrix<T>& w, const Matrix<T>& w_t, feature::InputNorm norm,
                       MatrixOut<T> proj) {
  project<T>(x, w, w_t, proj, RowSum::as_block);
  if (norm == feature::InputNorm::raw) return;
  const T lo = std::ldexp(T(1), -32), hi = std::ldexp(T(1), 32);
  const Index d = x.cols(), D = w.rows();
  for (Index i = 0; i < x.rows(); ++i) {
    const T m = kernel::max_magnitude(x.row(i).data(), d);  // NaN when an entry is not finite
    if (m == T(0)) {
      proj.row(i).setZero();
      continue;
    }
    if (!std::isfinite(m)) continue;  // not finite input: leave the non-finite GEMM result
    if (m >= lo && m <= hi) {
      proj.row(i) /= x.row(i).norm();
      if (proj.row(i).allFinite()) continue;
    }
    int e = 0;
    (void)std::frexp(m, &e);  // m = f · 2^e, f ∈ [1/2, 1)
    T ss = T(0);
    for (Index j = 0; j < d; ++j) {
      const T s = std::ldexp(x(i, j), -e);
      ss += s * s;
    }
    const T n = std::sqrt(ss);
    for (Index r = 0; r < D; ++r) {
      T acc = T(0);
      for (Index j = 0; j < d; ++j) acc += w(r, j) * std::ldexp(x(i, j), -e);
      proj(i, r) = acc / n;
    }
  }
}

// What a random-projection feature map holds: W [D × d] and what it does with the input's norm,
// checked once for both maps (`who` names the map in the error).
template <class T>
class RandomProjection {
 public:
  /// d, the input width (W's columns).
  Index input_dim() const noexcept { return w_.cols(); }
  /// W [D × d].
  const Matrix<T>& projection() const noexcept { return w_; }
  /// Whether inputs are mapped to x/‖x‖ (`unit`) or as given (`raw`) before the projection.
  feature::InputNorm input_norm() const noexcept { return norm_; }

 protected:
  RandomProjection(const char* who, Matrix<T> w, feature::InputNorm norm) : w_(std::move(w)), norm_(norm) {
    require_at_least(who, "W.rows() (D)", w_.rows(), 1, "at least one feature");
    require_at_least(who, "W.cols() (d)", w_.cols(), 1, "inputs need a column");
    if (auto p = finite_problem("W", w_)) raise(who, p);
    w_t_ = w_.transpose();
  }
  // proj = W x̂ for each row of x (project_direction).
  void project(const MatrixRef<T>& x, MatrixOut<T> proj) const { project_direction<T>(x, w_, w_t_, norm_, proj); }

  // The chain rule through y = W x̂, given dy = ∂L/∂y [rows × D]: ∂L/∂W += dyᵀ X̂ (into d_w, [D × d])
  // and ∂L/∂x += J(x)ᵀ Wᵀ dy (into dx, [rows × d]). Under `raw` J = I; under `unit`
  // J = (I − x̂ x̂ᵀ)/‖x‖, the projection onto the directions that change x̂. The zero vector has no
  // direction (x̂ = 0, with no limit as x → 0): its gradient is defined as 0, and it adds nothing to
  // ∂L/∂W since x̂ = 0. x̂ and 1/‖x‖ are formed from x·2^−e (as project_direction does), so that
  // subnormal or huge rows give x̂ to rounding; the gradient itself scales as 1/‖x‖.
  void project_backward(const MatrixRef<T>& x, const MatrixRef<T>& dy, MatrixOut<T> dx, Matrix<T>& d_w) const {
    const Index rows = x.rows(), d = x.cols();
    if (rows == 0) return;
    Matrix<T> xhat = x;
    std::vector<int> exps(std::size_t(rows), 0);
    Vector<T> norms = Vector<T>::Ones(rows);
    if (norm_ == feature::InputNorm::unit) {
      for (Index i = 0; i < rows; ++i) {
        const T m = kernel::max_magnitude(x.row(i).data(), d);
        if (!(m > T(0)) || !std::isfinite(m)) {
          xhat.row(i).setZero();
          norms(i) = T(0);
          continue;
        }
        int e = 0;
        (void)std::frexp(m, &e);
        for (Index j = 0; j < d; ++j) xhat(i, j) = std::ldexp(x(i, j), -e);
        norms(i) = xhat.row(i).norm();  // ‖x‖ · 2^−e, in [1/2, sqrt(d))
        xhat.row(i) /= norms(i);
        exps[std::size_t(i)] = e;
      }
    }
    d_w.noalias() += dy.transpose() * xhat;
    Matrix<T> dxhat = dy * w_;
    if (norm_ == feature::InputNorm::raw) {
      dx += dxhat;
      return;
    }
    for (Index i = 0; i < rows; ++i) {
      if (norms(i) == T(0)) continue;  // the zero vector: gradient 0 by definition
      const T along = xhat.row(i).dot(dxhat.row(i));
      for (Index j = 0; j < d; ++j)
        dx(i, j) += std::ldexp((dxhat(i, j) - along * xhat(i, j)) / norms(i), -exps[std::size_t(i)]);
    }
  }

 private:
  Matrix<T> w_;
  Matrix<T> w_t_;  // Wᵀ, for detail::project
  feature::InputNorm norm_;
};

}  // namespace detail
ABC_NAMESPACE_END
