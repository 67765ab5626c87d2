// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::KeyScore, the query-independent score of a key (TRAMS).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "../detail/check.hpp"
#include "../error.hpp"
#include "../kernel/scalar.hpp"
#include "../kernel/simd.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace select {

/// Which query-independent score KeyScore computes (the TRAMS paper ranks by its W_Q-projected key score).
enum class ScoreKind {
  trams_code,         ///< √(kᵀGk) · |u·k|: the TRAMS authors' released code (default)
  trams_paper,        ///< (u·k) / √d_model: the paper's cos⟨k′, 1⟩ · ‖k′‖, which reduces to this
  reformulated_norm,  ///< √(kᵀGk) = ‖W_Qᵀ k‖: the norm of the reformulated key (paper's ablation)
  key_norm,           ///< ‖k‖: the plain key norm (needs no W_Q; an extension, not in the paper)
};

/**
 * \brief The score TRAMS ranks memories by, computed once per key when it enters a cache.
 *
 * TRAMS rewrites q·k = h·k′ with the reformulated key k′ = W_Qᵀ k ∈ ℝ^{d_model} and ranks keys by
 * k′ alone, since post-LayerNorm hidden states h all have about the same norm. Materialising k′
 * costs O(d · d_model) per key; instead the summary G = W_Q W_Qᵀ [d × d] and u = W_Q 1 [d] is
 * taken once from W_Q [d × d_model], after which ‖k′‖² = kᵀGk and 1ᵀk′ = u·k cost O(d²) per key.
 * A score depends only on the key and the frozen W_Q, so it never changes while the key is kept.
 * A NaN score (overflowed keys) is reported as −∞: such a key is the first to go.
 */
template <class Scalar = float>
class KeyScore {
 public:
  /// float or double.
  using scalar_type = Scalar;

  /// From the query projection W_Q [d × d_model] (d the key width). \throws config_error if W_Q
  /// is empty or not finite, or if `kind` is key_norm (use KeyScore::norm()).
  explicit KeyScore(MatrixRef<Scalar> w_q, ScoreKind kind = ScoreKind::trams_code) : kind_(kind) {
    constexpr const char* who = "abc::select::KeyScore";
    if (kind == ScoreKind::key_norm)
      ABC_THROW(config_error(std::string(who) +
                             ": kind is key_norm, expected a score of W_Q (KeyScore::norm() needs no W_Q)"));
    if (w_q.rows() < 1 || w_q.cols() < 1)
      ABC_THROW(config_error(std::string(who) + ": w_q is " + detail::shape_string(w_q.rows(), w_q.cols()) +
                             ", expected [d x d_model] with d, d_model >= 1"));
    if (auto p = detail::finite_problem("w_q", w_q)) detail::raise(who, p);
    const Eigen::MatrixXd w = w_q.template cast<double>();
    gram_ = w * w.transpose();
    // Exactly symmetric (the GEMM need not round G(i, j) and G(j, i) alike), so the score can
    // walk G by contiguous columns in place of rows.
    gram_ = Eigen::MatrixXd(gram_.selfadjointView<Eigen::Lower>());
    sums_ = w.rowwise().sum();
    d_model_ = w_q.cols();
  }

  /// The plain key norm ‖k‖, for keys of any width.
  static KeyScore norm() { return KeyScore(); }

  /// Which score this computes.
  ScoreKind kind() const noexcept { return kind_; }
  /// The key width the score needs (W_Q's rows); 0 for the plain norm (any width).
  Index key_dim() const noexcept { return sums_.size(); }
  /// d_model, W_Q's columns; 0 for the plain norm.
  Index model_dim() const noexcept { return d_model_; }
  const Eigen::MatrixXd& gram() const noexcept { return gram_; }  ///< G = W_Q W_Qᵀ [d × d]
  const Eigen::VectorXd& row_sums() const noexcept { return sums_; }  ///< u = W_Q 1 [d]

  /// The score of key k [size]. O(d²), allocation-free; accumulated in double so equal keys always
  /// score equal and the ranking of near-equal keys does not depend on the build's summation order.
  /// Unchecked: size must be key_dim() unless the kind is key_norm (the operators that apply the
  /// score check their keys' width first; the Vector overload checks it).
  Scalar operator()(const Scalar* k, Index size) const noexcept {
    double quad = 0, lin = 0, sq = 0;
    const bool norm_only = kind_ == ScoreKind::key_norm;
    for (Index i = 0; i < size; ++i) {
      const double ki = double(k[i]);
      sq += ki * ki;
      if (!norm_only) lin += sums_[i] * ki;
    }
    if (!norm_only) {
      // kᵀGk = Σ_i k_i g_i with g = G k, each g_i summed over j in ascending order. g is built a
      // block of i at a time from G's columns (G = Gᵀ): an axpy per j, where a dot per i is a chain
      // of d dependent adds. Blocks of whole batches keep their sums in registers across the j
      // (in memory, each j would store the block again: the store, not the multiply-add, would set
      // the pace); the rest of the entries take the scalar loop, each in the same order.
      Index i0 = 0;
#ifndef ABC_NO_SIMD
      constexpr Index width = Index(kernel::batch<double>::size);
      for (; i0 + 4 * width <= size; i0 += 4 * width) quad = add_quad<4>(k, size, i0, quad);
      const Index r = (size - i0) / width;  // the whole batches left, as one block (impl::for_blocks)
      kernel::impl::with_count<3>(r, [&](auto c) { quad = add_quad<decltype(c)::value>(k, size, i0, quad); });
      i0 += r * width;
#endif
      constexpr Index block = 64;
      double g[block];
      const Index ld = gram_.rows();
      for (; i0 < size; i0 += block) {
        const Index m = std::min(block, size - i0);
        std::fill(g, g + m, 0.0);
        for (Index j = 0; j < size; ++j) {
          const double kj = double(k[j]);
          const double* col = gram_.data() + j * ld + i0;  // G(i0 .. i0 + m, j)
          for (Index i = 0; i < m; ++i) g[i] = kernel::scalar::mul_add(col[i], kj, g[i]);
        }
        for (Index i = 0; i < m; ++i) quad = kernel::scalar::mul_add(double(k[i0 + i]), g[i], quad);
      }
    }
    quad = std::max(0.0, quad);  // kᵀGk ≥ 0, up to rounding
    double s = 0;
    switch (kind_) {
      case ScoreKind::trams_code: s = std::sqrt(quad) * std::abs(lin); break;
      case ScoreKind::trams_paper: s = lin / std::sqrt(double(d_model_)); break;
      case ScoreKind::reformulated_norm: s = std::sqrt(quad); break;
      case ScoreKind::key_norm: s = std::sqrt(sq); break;
    }
    const Scalar r = static_cast<Scalar>(s);
    return std::isnan(r) ? -std::numeric_limits<Scalar>::infinity() : r;
  }
  /// The score of key k. \throws shape_error if k.size() is not key_dim() (> 0): G and u have
  /// one row per entry of the keys W_Q was made for.
  Scalar operator()(VectorRef<Scalar> k) const {
    if (key_dim() > 0 && k.size() != key_dim())
      detail::raise("abc::select::KeyScore",
                    detail::value_problem(Status::shape_mismatch, "k.size()", k.size(), "", key_dim(),
                                          "the key width W_Q was made for: its rows"));
    return (*this)(k.data(), k.size());
  }

 private:
  KeyScore() : kind_(ScoreKind::key_norm) {}

#ifndef ABC_NO_SIMD
  // quad + Σ_i k_i g_i over the K batches of entries from i0, g = G k summed in registers.
  template <int K>
  // The key's width and the block's first entry are both indices, by design.
  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters)
  double add_quad(const Scalar* k, Index size, Index i0, double quad) const noexcept {
    using B = kernel::batch<double>;
    constexpr Index width = Index(B::size);
    const Index ld = gram_.rows();
    B acc[K];
    for (int c = 0; c < K; ++c) acc[c] = B(0.0);
    for (Index j = 0; j < size; ++j) {
      const B kj(static_cast<double>(k[j]));
      const double* col = gram_.data() + j * ld + i0;
      for (int c = 0; c < K; ++c) acc[c] = kernel::impl::fma(B::load_unaligned(col + c * width), kj, acc[c]);
    }
    double g[K * width];
    for (int c = 0; c < K; ++c) acc[c].store_unaligned(g + c * width);
    for (Index i = 0; i < K * width; ++i) quad = kernel::scalar::mul_add(double(k[i0 + i]), g[i], quad);
    return quad;
  }
#endif

  ScoreKind kind_;
  Eigen::MatrixXd gram_;  // kept in double: scores are computed in double
  Eigen::VectorXd sums_;
  Index d_model_ = 0;
};

}  // namespace select
ABC_NAMESPACE_END
