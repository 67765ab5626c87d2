// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::StateGradient, the gradient of a loss with respect to a State.
#pragma once

#include "types.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief The gradient of a loss with respect to a decode State: what a backward pass over a call
 * that continued a state hands to the backward pass of the call that made it.
 *
 * A sequence run in pieces (`forward_causal(state, ...)` piece after piece) is differentiated
 * piece by piece, last first: each backward_causal takes the gradient with respect to the state its
 * call left (empty for the last piece: the loss does not read it) and gives the gradient with
 * respect to the state it started from. The gradients of the pieces then add up to those of the
 * sequence run in one call.
 *
 * `slot_state` is in the control's own terms: a control that keeps a running softmax normaliser
 * (ABC-MLP: the running max m and the relative sum Z) states it for z = m + log Z, the only
 * function of (m, Z) any later token reads, in row 0, and leaves row 1 at zero. A linear readout
 * (RFA) keeps its normaliser z in row 1 and has ∂L/∂z there (row 0 zero); its state has no K̃, so
 * `keys` is [n × 0]. Controls that keep no differentiable per-slot state leave it zero.
 *
 * \tparam T float or double.
 */
template <class T>
struct StateGradient {
  /// ∂L/∂K̃, [n × d]; empty (0 × 0) for "no gradient", as for the last piece of a sequence.
  Matrix<T> keys;
  /// ∂L/∂Ṽ, [n × dv]; empty with `keys`.
  Matrix<T> values;
  /// The gradient with respect to the control's per-slot state, [2 × n]; empty with `keys`.
  Matrix<T> slot_state;

  /// True when no gradient is held (all three are empty).
  bool empty() const noexcept { return keys.size() == 0 && values.size() == 0 && slot_state.size() == 0; }
};

ABC_NAMESPACE_END
