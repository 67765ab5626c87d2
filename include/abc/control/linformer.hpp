// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::Linformer, one learned control vector per position.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "../detail/check.hpp"
#include "../detail/control_check.hpp"
#include "../detail/random.hpp"
#include "../schedule_tape.hpp"
#include "../seed.hpp"
#include "../slots.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief Linformer as a control (ABC paper §3.1): K̃ = W_LF K, Ṽ = W_LF V.
 *
 * Schedule: decay 1, write w_t = W_LF[:, t], the t-th column of W_LF [n × N_max]. Entries may be
 * negative. Written as a recurrence it runs causally and decodes too (the paper's point), with the
 * same memory as the non-causal projection once all tokens are in. Positions t ≥ N_max have no
 * column: max_tokens() = N_max, and BoundedAttention refuses longer sequences with config_error.
 *
 * \code
 * abc::BoundedAttention attn{abc::control::Linformer{64, 4096, 7}};  // n = 64, N_max = 4096, seed 7
 * \endcode
 */
template <class Scalar = float>
class Linformer {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::Linformer"; }
  /// False: a_t ≡ 1, nothing written decays.
  static constexpr bool has_decay = false;

  /// From given weights W_LF [n × N_max]. \throws config_error if empty or not finite.
  explicit Linformer(Matrix<Scalar> w_lf) : w_(std::move(w_lf)) {
    detail::require_at_least("abc::control::Linformer", "W_LF.rows() (slots)", w_.rows(), 1,
                             "at least one slot");
    detail::require_at_least("abc::control::Linformer", "W_LF.cols() (N_max)", w_.cols(), 1,
                             "at least one position");
    if (auto p = detail::finite_problem("W_LF", w_)) detail::raise("abc::control::Linformer", p);
  }

  /// Seeded random W_LF [n × N_max], entries N(0, 1/N_max): a memory row sums N_max unit-scale keys
  /// with weights whose squares sum to about 1, so it stays unit-scale.
  /// \throws config_error if n or n_max is < 1, or n · n_max overflows Index.
  Linformer(Slots n, Index n_max, Seed seed) : Linformer(random_weights(n.value, n_max, seed.value)) {}

  /// n, the rows of W_LF.
  Index num_slots() const noexcept { return w_.rows(); }
  /// N_max, the columns of W_LF: the longest sequence, a state's earlier tokens included.
  Index max_tokens() const noexcept { return w_.cols(); }
  /// W_LF [n × N_max].
  const Matrix<Scalar>& weights() const noexcept { return w_; }

  /// The gradient with respect to the control's parameters.
  struct Gradient {
    /// ∂L/∂W_LF, [n × N_max]: column t is ∂L/∂w_t for the call's positions, 0 elsewhere.
    Matrix<Scalar> w_lf;
    /// Adds another part of the same call's gradient (a backward pass sums its blocks').
    Gradient& operator+=(const Gradient& other) {
      w_lf += other.w_lf;
      return *this;
    }
  };

  /// The chain rule through the schedule (see abc/concepts.hpp): w_t is column t of W_LF, so
  /// ∂L/∂W_LF[:, t] = ∂L/∂w_t. The control reads no input and keeps no per-slot state.
  void schedule_backward(const ScheduleTape<Scalar>& tape, MatrixOut<Scalar> d_slot_state, MatrixOut<Scalar> /*dx*/,
                         Gradient& grad) const {
    grad.w_lf.setZero(w_.rows(), w_.cols());
    grad.w_lf.middleCols(tape.t0, tape.d_write.rows()) = tape.d_write.transpose();
    d_slot_state.setZero();
  }

  /// Tokens t0 .. t0 + rows − 1 (rows = x.rows()): decay 1, and write row t is column t0 + t of
  /// W_LF; `decay` and `write` are [rows × n]. Needs t0 + rows ≤ N_max, which BoundedAttention
  /// checks through max_tokens() first.
  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): the control contract's schedule signature
  void schedule(Index t0, MatrixRef<Scalar> x, MatrixOut<Scalar> /*slot_state*/, MatrixOut<Scalar> decay,
                MatrixOut<Scalar> write) const {
    decay.setOnes();
    write.noalias() = w_.middleCols(t0, x.rows()).transpose();
  }

 private:
  static Matrix<Scalar> random_weights(Index n, Index n_max, std::uint64_t seed) {
    return detail::random_weights<Scalar>("abc::control::Linformer", n, "n", "at least one slot", n_max, "n_max",
                                          "at least one position", "n × n_max (the weights' entries)", seed);
  }

  Matrix<Scalar> w_;
};

}  // namespace control
ABC_NAMESPACE_END
