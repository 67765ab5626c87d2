// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. feature::Projection, the random matrix W of a random-feature map.
#pragma once

#include <cmath>
#include <cstdint>

#include <Eigen/QR>

#include "../detail/check.hpp"
#include "../detail/control_check.hpp"
#include "../detail/random.hpp"
#include "../seed.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace feature {

/// How the rows w̃ of W are drawn.
enum class Draw {
  gaussian,    ///< w̃ ~ N(0, I) i.i.d. (RFA, dissertation App. A.2)
  orthogonal,  ///< beyond the paper: d-row blocks orthogonalised (QR), each row rescaled to the
               ///< norm of an independent Gaussian vector, so rows keep the N(0, I) length law
};

/**
 * \brief A pool of random projections W [D × d] with rows σ ∘ w̃, addressed by an index.
 *
 * RFA resamples W at every training step from a pool drawn once (App. A.2: about 200 matrices) and
 * fixes one per head at test time. Here draw i is a pure function of (seed, i): the pool costs no
 * memory and any draw is reproducible on any platform. σ is an inverse temperature: with
 * w = s·w̃, E[φ(x)·φ(y)] = exp(−s²‖x − y‖²/2) (the dissertation's Eq. 4.3 has it inverted).
 *
 * \tparam T float or double.
 */
template <class T = float>
class Projection {
 public:
  // (D, d) is the shape of W [D × d], rows then columns as everywhere in Eigen and abc.
  // NOLINTBEGIN(bugprone-easily-swappable-parameters)

  /// Isotropic σ = `sigma`. \throws config_error for D < 1, d < 1 or a non-finite σ.
  Projection(Index D, Index d, Seed seed, T sigma = T(1), Draw draw = Draw::gaussian)
      : Projection(D, d, seed, Vector<T>::Constant(d, sigma), draw) {}

  /// Per-dimension σ ∈ R^d (the learned reparameterisation of Eq. 4.9).
  Projection(Index D, Index d, Seed seed, Vector<T> sigma, Draw draw = Draw::gaussian)
      : rows_(D), cols_(d), seed_(seed.value), sigma_(std::move(sigma)), draw_(draw) {
    detail::require_at_least("abc::feature::Projection", "D", D, 1, "at least one random feature");
    detail::require_at_least("abc::feature::Projection", "d", d, 1, "inputs need a column");
    if (auto p = detail::size_problem("sigma", sigma_.size(), d, "one σ per input dimension"))
      detail::raise("abc::feature::Projection", p);
    if (auto p = detail::finite_problem("sigma", sigma_)) detail::raise("abc::feature::Projection", p);
  }
  // NOLINTEND(bugprone-easily-swappable-parameters)

  Index rows() const noexcept { return rows_; }  ///< D
  Index cols() const noexcept { return cols_; }  ///< d

  /// Draw `index` of the pool: W [D × d].
  Matrix<T> draw(std::uint64_t index = 0) const {
    const std::uint64_t seed = detail::hash(seed_, index);
    Matrix<double> w(rows_, cols_);
    std::uint64_t counter = 0;
    for (Index i = 0; i < rows_; ++i)
      for (Index j = 0; j < cols_; ++j) w(i, j) = detail::normal(seed, counter++);
    if (draw_ == Draw::orthogonal) {
      for (Index b = 0; b < rows_; b += cols_) {
        const Index r = std::min(cols_, rows_ - b);
        // Orthonormal columns of the transposed block give orthonormal rows of the block.
        Eigen::MatrixXd block = w.middleRows(b, r).transpose();
        Eigen::HouseholderQR<Eigen::MatrixXd> qr(block);
        const Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(cols_, r);
        for (Index i = 0; i < r; ++i) {
          double norm = 0;
          for (Index j = 0; j < cols_; ++j) {
            const double g = detail::normal(seed, counter++);
            norm += g * g;
          }
          w.row(b + i) = std::sqrt(norm) * q.col(i).transpose();
        }
      }
    }
    Matrix<T> out = w.template cast<T>();
    out.array().rowwise() *= sigma_.transpose().array();
    return out;
  }

 private:
  Index rows_, cols_;
  std::uint64_t seed_;
  Vector<T> sigma_;
  Draw draw_;
};

}  // namespace feature
ABC_NAMESPACE_END
