// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::Mlp, ABC-MLP: learned, input-dependent control.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "../detail/check.hpp"
#include "../error.hpp"
#include "../detail/control_check.hpp"
#include "../detail/random.hpp"
#include "../detail/project.hpp"
#include "../kernel/finite.hpp"
#include "../kernel/online_normalise.hpp"
#include "../schedule_tape.hpp"
#include "../seed.hpp"
#include "../slots.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/// The activation α = act(s) that turns slot logits into write mass.
enum class Activation {
  exp,      ///< the paper's default (Table 8, best)
  sigmoid,  ///< α = σ(s)
  relu,     ///< α = max(s, 0); a slot with zero prefix mass is empty and masked
};

/// How the write mass is normalised causally (non-causally both are Eq. 7).
enum class Normalization {
  prefix,     ///< default: slot ℓ is a convex combination of the prefix, K̃_t = Σ_i α_i k_i / Σ_i α_i
  per_token,  ///< the footnote read literally: φ_t = α_t / Σ_{j≤t} α_j, weights never revised
};

/**
 * \brief The activation named `name`: "exp", "sigmoid" or "relu", as weights files
 * (docs/weights.md) and the Python module spell it.
 * \throws config_error "<who>: activation is '<name>', expected 'exp', 'sigmoid' or 'relu'".
 */
inline Activation activation_from_name(const std::string& name,
                                       const char* who = "abc::control::activation_from_name") {
  if (name == "exp") return Activation::exp;
  if (name == "sigmoid") return Activation::sigmoid;
  if (name == "relu") return Activation::relu;
  ABC_THROW(config_error(std::string(who) + ": activation is '" + name + "', expected 'exp', 'sigmoid' or 'relu'"));
}

/**
 * \brief The normalisation named `name`: "prefix" or "per_token".
 * \throws config_error "<who>: normalization is '<name>', expected 'prefix' or 'per_token'".
 */
inline Normalization normalization_from_name(const std::string& name,
                                             const char* who = "abc::control::normalization_from_name") {
  if (name == "prefix") return Normalization::prefix;
  if (name == "per_token") return Normalization::per_token;
  ABC_THROW(config_error(std::string(who) + ": normalization is '" + name + "', expected 'prefix' or 'per_token'"));
}

/**
 * \brief ABC-MLP (ABC paper §4, Eq. 7): slot logits s_t = W_φ x_t, normalised over tokens.
 *
 * Default (prefix normalisation, exp): slot ℓ of the memory is the softmax attention of the
 * pseudo-query W_φ[ℓ] over the keys seen so far. As a schedule of the shared recurrence, with
 * z_t = log Σ_{i≤t} α_i per slot (carried in the State's slot_state() as max and relative sum):
 *     decay a_t = exp(z_{t-1} − z_t),  write w_t = exp(log α_t − z_t).
 * Both exponents are ≤ 0, so any logits (±1e4 included) are safe, and the carried z makes decoding
 * and split-and-continue exact. sigmoid and relu use log α instead of s in the same formulas.
 *
 * The control input x is the key unless the caller passes its own X [N × d_x] (the paper uses the
 * layer input); d_x is the number of columns of W_φ.
 *
 * \tparam Scalar float or double.
 */
template <class Scalar = float>
class Mlp {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::Mlp"; }

  /// From given weights W_φ [n × d_x]. \throws config_error if W_φ is empty or not finite.
  explicit Mlp(Matrix<Scalar> w_phi, Activation activation = Activation::exp,
               Normalization normalization = Normalization::prefix)
      : w_(std::move(w_phi)), w_t_(w_.transpose()), activation_(activation), normalization_(normalization) {
    detail::require_at_least("abc::control::Mlp", "W_phi.rows() (slots)", w_.rows(), 1,
                             "at least one slot");
    detail::require_at_least("abc::control::Mlp", "W_phi.cols() (input width)", w_.cols(), 1,
                             "the control input needs at least one column");
    if (auto p = detail::finite_problem("W_phi", w_)) detail::raise("abc::control::Mlp", p);
  }

  /// Seeded random W_φ [n × d_x], entries N(0, 1/d_x): logits of unit scale for unit-scale inputs.
  /// \throws config_error if d_x or n is < 1, or n · d_x overflows Index.
  Mlp(Slots n, Index d_x, Seed seed, Activation activation = Activation::exp,
      Normalization normalization = Normalization::prefix)
      : Mlp(random_weights(n.value, d_x, seed.value), activation, normalization) {}

  /// n, the rows of W_φ.
  Index num_slots() const noexcept { return w_.rows(); }
  /// d_x, the columns of W_φ: the width of the control input.
  Index input_dim() const noexcept { return w_.cols(); }
  /// W_φ [n × d_x].
  const Matrix<Scalar>& weights() const noexcept { return w_; }
  /// The activation that turns logits into write mass.
  Activation activation() const noexcept { return activation_; }
  /// The causal normalisation of the write mass.
  Normalization normalization() const noexcept { return normalization_; }

  /// Non-causally both normalisations are Eq. 7, whose memory is the prefix-normalised one.
  Mlp noncausal_form(MatrixRef<Scalar> /*x*/) const {
    Mlp m = *this;
    m.normalization_ = Normalization::prefix;
    return m;
  }

  /// W_φ, through which the schedule reads the control input (its logits are X W_φᵀ).
  const Matrix<Scalar>& input_projection() const noexcept { return w_; }

  /// Logits X W_φᵀ, then one step of the per-slot online log-sum-exp per token, in place in the
  /// state's normaliser (kernel::online_normalise).
  void schedule(Index /*t0*/, MatrixRef<Scalar> x, MatrixOut<Scalar> slot_state, MatrixOut<Scalar> decay,
                MatrixOut<Scalar> write) const {
    // The logits, replaced row by row with the write weights.
    detail::project(x, w_, w_t_, write, detail::RowSum::interleaved);
    weights_from_logits(slot_state, decay, write);
  }

  /// The non-causal build's weights for a block of tokens at once (kernel::block_normalise): the
  /// logits of x (x itself when `projected`) → log α, then the prefix normaliser over the block, so
  /// `eff` [rows × n] holds each token's weight in the memory at the block's end and `dcum` [n] what
  /// the block leaves of the memory before it. Equal to schedule() folded by the build's suffix
  /// product in exact arithmetic, with one exponential per weight and no decay per token. Prefix
  /// normalisation only (the non-causal form's).
  void block_weights(Index /*t0*/, MatrixRef<Scalar> x, bool projected, MatrixOut<Scalar> slot_state,
                     MatrixOut<Scalar> eff, Scalar* dcum) const {
    ABC_ASSERT(normalization_ == Normalization::prefix, "Mlp::block_weights: the non-causal form's normalisation");
    ABC_ASSERT(eff.outerStride() == eff.cols(), "Mlp::block_weights: contiguous rows");
    if (projected)
      eff = x;
    else
      detail::project(x, w_, w_t_, eff, detail::RowSum::interleaved);
    to_log_weight(eff);
    kernel::block_normalise(eff.data(), eff.rows(), num_slots(), slot_state.row(0).data(), slot_state.row(1).data(),
                            dcum);
  }

  /// The causal kernel's weights for a chunk of tokens (kernel::chunk_normalise): the logits of x
  /// (x itself when `projected`) → log α, then, with prefix normalisation, one reference per slot for
  /// the chunk, so that token i's weight at time t ≥ i is u_i ⊙ r_t and the memory before the chunk
  /// is carried by carry ⊙ r_t. Returns false where a slot's log-weights spread too far within the
  /// chunk for one reference, with the schedule's decays in `r` and writes in `u` (as schedule()
  /// gives them), the normaliser advanced either way. Per-token normalisation never revises a
  /// weight: its writes, r = 1 and carry = 1.
  bool chunk_weights(Index /*t0*/, MatrixRef<Scalar> x, bool projected, MatrixOut<Scalar> slot_state,
                     MatrixOut<Scalar> u, MatrixOut<Scalar> r, Scalar* carry) const {
    ABC_ASSERT(u.outerStride() == u.cols() && r.outerStride() == r.cols(), "Mlp::chunk_weights: contiguous rows");
    if (projected)
      u = x;
    else
      detail::project(x, w_, w_t_, u, detail::RowSum::interleaved);
    to_log_weight(u);
    const bool prefix = normalization_ == Normalization::prefix;
    if (prefix && kernel::chunk_normalise(u.data(), u.rows(), num_slots(), slot_state.row(0).data(),
                                          slot_state.row(1).data(), r.data(), carry))
      return true;
    for (Index t = 0; t < u.rows(); ++t)
      kernel::online_normalise(u.row(t).data(), slot_state.row(0).data(), slot_state.row(1).data(), r.row(t).data(),
                               u.row(t).data(), num_slots(), prefix);
    if (prefix) return false;
    std::fill(carry, carry + num_slots(), Scalar(1));
    return true;
  }

  /// The gradient with respect to the control's parameters.
  struct Gradient {
    /// ∂L/∂W_φ, [n × d_x].
    Matrix<Scalar> w_phi;
    /// Adds another part of the same call's gradient (a backward pass sums its blocks').
    Gradient& operator+=(const Gradient& other) {
      w_phi += other.w_phi;
      return *this;
    }
  };

  /**
   * \brief The chain rule through the schedule (see abc/concepts.hpp): from ∂L/∂w_t and ∂L/∂log a_t
   * to the logits s_t = W_φ x_t, then to x and W_φ.
   *
   * Per slot, with z_t = log Σ_{i≤t} α_i (z_t = logaddexp(z_{t−1}, λ_t), λ = log α), log w_t = λ_t − z_t
   * and, with prefix normalisation, log a_t = z_{t−1} − z_t. The gradient with respect to z is carried
   * from the last token to the first through ∂z_t/∂z_{t−1} = exp(z_{t−1} − z_t) and
   * ∂z_t/∂λ_t = exp(λ_t − z_t), both ≤ 1 and both replayed by the forward normaliser itself
   * (kernel::online_normalise): nothing grows, whatever the logits. `d_slot_state` holds ∂L/∂z in
   * row 0 (abc/state_gradient.hpp).
   */
  void schedule_backward(const ScheduleTape<Scalar>& tape, MatrixOut<Scalar> d_slot_state, MatrixOut<Scalar> dx,
                         Gradient& grad) const {
    using Row = Eigen::Matrix<Scalar, 1, Eigen::Dynamic>;
    const Index rows = tape.x.rows(), n = num_slots();
    const bool prefix = normalization_ == Normalization::prefix;
    // exp(λ_t − z_t) is the write in both normalisations; exp(z_{t−1} − z_t) is the decay with prefix
    // normalisation, and is replayed from the state before the call without it.
    Matrix<Scalar> s, lam, carry;
    if (activation_ != Activation::exp || !prefix) {
      s.noalias() = tape.x * w_.transpose();
      lam = s;
      MatrixOut<Scalar> lam_out(lam);
      to_log_weight(lam_out);
    }
    if (!prefix) {
      carry.resize(rows, n);
      Matrix<Scalar> norm = tape.slot_state;
      Row unused(n);
      for (Index t = 0; t < rows; ++t)
        kernel::online_normalise(lam.row(t).data(), norm.row(0).data(), norm.row(1).data(), carry.row(t).data(),
                                 unused.data(), n, true);
    }
    Row c = d_slot_state.row(0);  // ∂L/∂z, from the last token back
    Row d_log_w(n);
    Matrix<Scalar> ds(rows, n);
    for (Index t = rows - 1; t >= 0; --t) {
      d_log_w.array() = tape.write.row(t).array() * tape.d_write.row(t).array();
      if (prefix) {
        c.array() -= d_log_w.array() + tape.d_log_decay.row(t).array();
        ds.row(t).array() = d_log_w.array() + tape.write.row(t).array() * c.array();
        c.array() = tape.d_log_decay.row(t).array() + tape.decay.row(t).array() * c.array();
      } else {
        c -= d_log_w;
        ds.row(t).array() = d_log_w.array() + tape.write.row(t).array() * c.array();
        c.array() *= carry.row(t).array();
      }
    }
    if (activation_ != Activation::exp)
      for (Index t = 0; t < rows; ++t)
        for (Index l = 0; l < n; ++l) ds(t, l) = activation_slope(s(t, l), lam(t, l), ds(t, l));
    d_slot_state.row(0) = c;
    d_slot_state.row(1).setZero();
    dx.noalias() += ds * w_;
    grad.w_phi.noalias() = ds.transpose() * tape.x;
  }

  /// The schedule of given logits X W_φᵀ [rows × n] (computed by the caller, e.g. for every head at
  /// once): the same as schedule() of those inputs.
  void schedule_projected(Index /*t0*/, MatrixRef<Scalar> logits, MatrixOut<Scalar> slot_state, MatrixOut<Scalar> decay,
                          MatrixOut<Scalar> write) const {
    write = logits;
    weights_from_logits(slot_state, decay, write);
  }

 private:
  // The logits in `write` → log α, then the online normaliser's decays and writes, token by token.
  void weights_from_logits(MatrixOut<Scalar>& slot_state, MatrixOut<Scalar>& decay, MatrixOut<Scalar>& write) const {
    to_log_weight(write);
    const bool prefix = normalization_ == Normalization::prefix;
    for (Index t = 0; t < write.rows(); ++t)
      kernel::online_normalise(write.row(t).data(), slot_state.row(0).data(), slot_state.row(1).data(),
                               decay.row(t).data(), write.row(t).data(), num_slots(), prefix);
  }

  // Logits → log α in place, for the activation; −∞ where α = 0. Finite inputs can still overflow
  // W_φ x (keys near the type's limit): logits saturate to the finite range, and a logit that is
  // not a number (+∞ − ∞ inside the product) carries no mass, so the state never holds a NaN
  // (kernel::saturate).
  //
  // Row by row: Eigen's vectorised log and exp differ from its scalar tail in the last bit, and a
  // row of n logits puts slot ℓ in the same path every time, so step, chunked and split runs give
  // the same weights bit for bit (a c × n block would put slot ℓ of token t in either path).
  void to_log_weight(MatrixOut<Scalar>& logits) const {
    constexpr Scalar tiny = std::numeric_limits<Scalar>::min();  // the smallest normal
    constexpr int digits = std::numeric_limits<Scalar>::digits;
    // Eigen 3.4's vectorised log (SSE2 and AVX2 paths) treats a subnormal input as the smallest
    // normal, so relu of a subnormal logit would lose its weight; lifting by 2^digits makes every
    // subnormal normal, and the exponent comes back out as digits · log 2.
    const Scalar lift = std::ldexp(Scalar(1), digits);
    const Scalar log_lift = Scalar(digits * 0.69314718055994530942);
    for (Index t = 0; t < logits.rows(); ++t) {
      kernel::saturate(logits.row(t).data(), logits.cols());
      auto s = logits.row(t).array();
      switch (activation_) {
        case Activation::sigmoid:  // log σ(s) = −softplus(−s), computed without overflow
          s = -((-s).max(Scalar(0)) + (-s.abs()).exp().log1p());
          break;
        case Activation::relu: {
          const auto r = s.max(Scalar(0));
          s = (r < tiny).select(r * lift, r).log() - log_lift * (r < tiny).template cast<Scalar>();
          break;
        }
        case Activation::exp: break;
      }
    }
  }

  // ∂L/∂s from ∂L/∂λ for the activation: λ = s (exp), log σ(s) (slope σ(−s)), log s (slope 1/s).
  Scalar activation_slope(Scalar s, Scalar lam, Scalar d_lam) const noexcept {
    switch (activation_) {
      case Activation::sigmoid:  // σ(−s) without overflow
        return d_lam * (s >= 0 ? std::exp(-s) / (Scalar(1) + std::exp(-s)) : Scalar(1) / (Scalar(1) + std::exp(s)));
      case Activation::relu: return lam == -std::numeric_limits<Scalar>::infinity() ? Scalar(0) : d_lam / s;
      case Activation::exp: break;
    }
    return d_lam;
  }

  static Matrix<Scalar> random_weights(Index n, Index d_x, std::uint64_t seed) {
    return detail::random_weights<Scalar>("abc::control::Mlp", n, "n", "at least one slot", d_x, "d_x",
                                          "at least one input column", "n × d_x (the weights' entries)", seed);
  }

  Matrix<Scalar> w_;
  Matrix<Scalar> w_t_;  // W_φᵀ, for detail::project
  Activation activation_;
  Normalization normalization_;
};

}  // namespace control
ABC_NAMESPACE_END
