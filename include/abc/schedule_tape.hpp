// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::ScheduleTape, what a backward pass hands a control's schedule_backward.
#pragma once

#include "schedule.hpp"
#include "types.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief The record of one call's schedule and the gradients that reach it, for a control's
 * `schedule_backward` (see abc/concepts.hpp).
 *
 * The backward passes of BoundedAttention compute, for every token t of the call and slot ℓ, the
 * gradients of the loss with respect to the write w_t and to the log of the decay a_t of the
 * recurrence K̃_t = diag(a_t) K̃_{t−1} + w_t ⊗ k_t. A control turns them into gradients with
 * respect to its control input and its parameters by the chain rule through its own schedule.
 *
 * `d_log_decay` is a_t ⊙ ∂L/∂a_t, formed without ∂L/∂a_t (from the reads and the writes, so no
 * state before the token is kept): it is the gradient with respect to log a_t wherever a_t > 0, and
 * where a_t = 0 (a ring-buffer overwrite) it is what the contents older than the token receive,
 * zero up to rounding. A control whose decay is a function of learned quantities through its
 * logarithm (a gate, a normaliser) reads it there without dividing by a_t.
 *
 * \tparam T float or double.
 */
template <class T>
struct ScheduleTape {
  /// The absolute position of the call's first token.
  Index t0;
  /// The control input of the call (the keys unless the caller gave one), [N × d_x].
  MatrixRef<T> x;
  /// The control's per-slot state before the first token, [2 × n].
  MatrixRef<T> slot_state;
  /// The per-slot positions before the first token, [n].
  PositionsRef positions;
  /// The decays a_t the forward pass used, [N × n].
  MatrixRef<T> decay;
  /// The writes w_t the forward pass used, [N × n].
  MatrixRef<T> write;
  /// a_t ⊙ ∂L/∂a_t: the gradient with respect to log a_t, [N × n].
  MatrixRef<T> d_log_decay;
  /// ∂L/∂w_t, [N × n].
  MatrixRef<T> d_write;
};

ABC_NAMESPACE_END
