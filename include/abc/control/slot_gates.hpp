// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::SlotGates, Gated Slot Attention: a learned forget gate per slot.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "../detail/check.hpp"
#include "../detail/control_check.hpp"
#include "../detail/project.hpp"
#include "../detail/random.hpp"
#include "../kernel/forget_gate.hpp"
#include "../schedule_tape.hpp"
#include "../seed.hpp"
#include "../slots.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief Gated Slot Attention (GSA, Zhang et al. 2024): ABC with a learned forget gate per slot.
 *
 *     f_t = σ(W_f x_t + b_f)^(1/τ) ∈ (0, 1)ⁿ,   K̃_t = diag(f_t) K̃_{t−1} + (1 − f_t) ⊗ k_t,
 *
 * and the same for Ṽ with v_t, read by the softmax over slots. As a schedule of the shared
 * recurrence: decay a_t = f_t and write w_t = 1 − f_t, both computed from log f_t = −softplus(−s)/τ
 * (kernel::forget_gate), so a gate of 1e-30 or of 1 − 1e-7 is exact and no logit overflows. τ is
 * the gate normaliser (fla's `gate_logit_normalizer`, 8 by default there and here): it raises the
 * gate to the power 1/τ, pushing the gates towards 1 and the memory towards long retention.
 *
 * The control input x is the key unless the caller passes its own X [N × d_x]; GSA (and fla's
 * `GatedSlotAttention` layer) computes the gates from the layer input, from which q, k and v are
 * projected. The feature map of q and k (fla: swish), the activation of v (fla: swish), the read's
 * scale (fla: 1, i.e. Options::scale = 1) and the output norm and projection are the caller's.
 *
 * Every slot with a gate below 1 is written by every token, so all slots are readable from the
 * first token on; a slot whose gates have all been exactly 1 (logits past the point where 1 − f
 * falls below the smallest normal number) holds nothing and is masked (docs/design.md §1.5). The
 * control keeps no per-slot state: the State's slot_state() and positions stay as make_state left
 * them, and the default rule of docs/design.md §2.4 checks a loaded blob.
 *
 * \tparam Scalar float or double.
 */
template <class Scalar = float>
class SlotGates {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// True: every slot decays by its gate.
  static constexpr bool has_decay = true;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::SlotGates"; }

  /// From given gate weights W_f [n × d_x], no bias, gate normaliser τ.
  /// \throws config_error if W_f is empty or not finite, or τ is not finite and > 0.
  explicit SlotGates(Matrix<Scalar> w_f, Scalar tau = Scalar(8))
      : SlotGates(std::move(w_f), Vector<Scalar>(), tau, false) {}

  /// From given gate weights W_f [n × d_x], bias b_f [n] and gate normaliser τ.
  /// \throws config_error if W_f is empty, b_f has not n entries, either is not finite, or τ is
  /// not finite and > 0.
  SlotGates(Matrix<Scalar> w_f, Vector<Scalar> b_f, Scalar tau = Scalar(8))
      : SlotGates(std::move(w_f), std::move(b_f), tau, true) {}

  /// Seeded random W_f [n × d_x], entries N(0, 1/d_x) (logits of unit scale for unit-scale inputs),
  /// no bias, gate normaliser τ.
  /// \throws config_error if d_x or n is < 1, n · d_x overflows Index, or τ is not finite and > 0.
  SlotGates(Slots n, Index d_x, Seed seed, Scalar tau = Scalar(8))
      : SlotGates(random_weights(n.value, d_x, seed.value), tau) {}

  /// n, the rows of W_f.
  Index num_slots() const noexcept { return w_.rows(); }
  /// d_x, the columns of W_f: the width of the control input.
  Index input_dim() const noexcept { return w_.cols(); }
  /// W_f [n × d_x].
  const Matrix<Scalar>& weights() const noexcept { return w_; }
  /// b_f [n] (zero when none was given).
  const Vector<Scalar>& bias() const noexcept { return b_; }
  /// The gate normaliser τ: f = σ(s)^(1/τ).
  Scalar tau() const noexcept { return tau_; }

  /// Logits X W_fᵀ + b_f, then decay f and write 1 − f per token, computed row by row.
  void schedule(Index /*t0*/, MatrixRef<Scalar> x, MatrixOut<Scalar> /*slot_state*/, MatrixOut<Scalar> decay,
                MatrixOut<Scalar> write) const {
    detail::project(x, w_, w_t_, decay, detail::RowSum::interleaved);  // the logits, then the decays
    gates_from_logits(decay, write);
  }

  /// The gradient with respect to the control's parameters.
  struct Gradient {
    /// ∂L/∂W_f, [n × d_x].
    Matrix<Scalar> w_f;
    /// ∂L/∂b_f, [n] (computed whether or not a bias was given).
    Vector<Scalar> b_f;
    /// Adds another part of the same call's gradient (a backward pass sums its blocks').
    Gradient& operator+=(const Gradient& other) {
      w_f += other.w_f;
      b_f += other.b_f;
      return *this;
    }
  };

  /// The chain rule through the schedule (see abc/concepts.hpp): with log f = −softplus(−s)/τ, both
  /// the decay f and the write 1 − f have the slope σ(−s)/τ in log f, so
  /// ∂L/∂s = σ(−s)/τ · (∂L/∂log a − f ∂L/∂w), a product of bounded factors for any logit.
  void schedule_backward(const ScheduleTape<Scalar>& tape, MatrixOut<Scalar> d_slot_state, MatrixOut<Scalar> dx,
                         Gradient& grad) const {
    Matrix<Scalar> ds = tape.x * w_.transpose();
    ds.rowwise() += b_.transpose();
    const Scalar inv_tau = Scalar(1) / tau_;
    ds = ds.unaryExpr([inv_tau](Scalar s) {  // σ(−s)/τ
      return inv_tau * (s >= 0 ? std::exp(-s) / (Scalar(1) + std::exp(-s)) : Scalar(1) / (Scalar(1) + std::exp(s)));
    });
    ds.array() *= tape.d_log_decay.array() - tape.decay.array() * tape.d_write.array();
    d_slot_state.setZero();
    dx.noalias() += ds * w_;
    grad.w_f.noalias() = ds.transpose() * tape.x;
    grad.b_f = ds.colwise().sum().transpose();
  }

  /// W_f, through which the schedule reads the control input (its logits are X W_fᵀ).
  const Matrix<Scalar>& input_projection() const noexcept { return w_; }

  /// The schedule of given logits X W_fᵀ [rows × n] (computed by the caller, e.g. for every head at
  /// once): the same as schedule() of those inputs.
  void schedule_projected(Index /*t0*/, MatrixRef<Scalar> logits, MatrixOut<Scalar> /*slot_state*/, MatrixOut<Scalar> decay,
                          MatrixOut<Scalar> write) const {
    decay = logits;
    gates_from_logits(decay, write);
  }

 private:
  static constexpr const char* kWho = "abc::control::SlotGates";

  // Logits in `decay` (bias not yet added) → the gates' decays and writes.
  void gates_from_logits(MatrixOut<Scalar>& decay, MatrixOut<Scalar>& write) const {
    decay.rowwise() += b_.transpose();
    // Row by row: the kernel puts slot ℓ in its SIMD lanes or its scalar tail by ℓ and n alone, so
    // step (blocks of one token), chunked and split runs turn the same logit into the same gate.
    for (Index t = 0; t < decay.rows(); ++t)
      kernel::forget_gate(decay.row(t).data(), tau_, decay.row(t).data(), write.row(t).data(), num_slots());
  }

  SlotGates(Matrix<Scalar> w_f, Vector<Scalar> b_f, Scalar tau, bool has_bias)
      : w_(std::move(w_f)), w_t_(w_.transpose()), b_(std::move(b_f)), tau_(tau) {
    detail::require_at_least(kWho, "W_f.rows() (slots)", w_.rows(), 1, "at least one slot");
    detail::require_at_least(kWho, "W_f.cols() (input width)", w_.cols(), 1,
                             "the control input needs at least one column");
    if (auto p = detail::finite_problem("W_f", w_)) detail::raise(kWho, p);
    if (has_bias) {
      if (b_.size() != w_.rows())
        detail::raise(kWho, detail::value_problem(Status::bad_config, "b_f.size()", b_.size(), "", w_.rows(),
                                                  "one bias per slot: the rows of W_f"));
      if (auto p = detail::finite_problem("b_f", b_)) detail::raise(kWho, p);
    } else {
      b_ = Vector<Scalar>::Zero(w_.rows());
    }
    detail::require_real(std::isfinite(tau_) && tau_ > 0, kWho, "tau", double(tau_),
                         "a finite value > 0 (the gate normaliser, f = sigmoid(s)^(1/tau))");
  }

  static Matrix<Scalar> random_weights(Index n, Index d_x, std::uint64_t seed) {
    return detail::random_weights<Scalar>("abc::control::SlotGates", n, "n", "at least one slot", d_x, "d_x",
                                          "at least one input column", "n × d_x (the weights' entries)", seed);
  }

  Matrix<Scalar> w_;
  Matrix<Scalar> w_t_;  // W_fᵀ, for detail::project
  Vector<Scalar> b_;
  Scalar tau_;
};

/// Deduces the scalar type from W_f alone, so that SlotGates{w_f, 8.0} with float weights is a
/// SlotGates<float>.
template <class T, class... Rest>
SlotGates(Matrix<T>, Rest...) -> SlotGates<T>;

}  // namespace control
ABC_NAMESPACE_END
