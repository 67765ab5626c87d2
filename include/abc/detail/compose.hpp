// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Traits and calls shared by the operators and the controls built from other controls.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "../concepts.hpp"
#include "../schedule.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// C::max_writes for a sparse control, 0 for a dense one (so sums over parts stay well-formed).
template <class C, class = void>
struct max_writes_of : std::integral_constant<int, 0> {};
template <class C>
struct max_writes_of<C, std::enable_if_t<has_sparse_schedule<C>::value>>
    : std::integral_constant<int, C::max_writes> {};

// The optional members as values: input_dim() (0 when absent), max_tokens() (unbounded when absent).
template <class C>
Index input_dim_of(const C& c) noexcept {
  if constexpr (has_input_dim<C>::value)
    return c.input_dim();
  else
    return 0;
}
template <class C>
Index max_tokens_of(const C& c) noexcept {
  if constexpr (has_max_tokens<C>::value)
    return c.max_tokens();
  else
    return std::numeric_limits<Index>::max();
}

// A control's schedule, handed the State's per-slot positions when it takes them (composed
// controls forward them to their parts the same way).
template <class C, class T = typename C::scalar_type>
void sparse_schedule(const C& c, Index t, VectorRef<typename C::scalar_type> x,
                     MatrixOut<typename C::scalar_type> slot_state, PositionsOut positions,
                     SparseWrite<T, C::max_writes>& w) {
  if constexpr (has_positioned_sparse_schedule<C>::value) {
    c.schedule(t, x, slot_state, positions, w);
  } else {
    (void)positions;
    c.schedule(t, x, slot_state, w);
  }
}
template <class C>
void dense_schedule(const C& c, Index t0, MatrixRef<typename C::scalar_type> x,
                    MatrixOut<typename C::scalar_type> slot_state, PositionsOut positions,
                    MatrixOut<typename C::scalar_type> decay, MatrixOut<typename C::scalar_type> write) {
  if constexpr (has_positioned_dense_schedule<C>::value) {
    c.schedule(t0, x, slot_state, positions, decay, write);
  } else {
    (void)positions;
    c.schedule(t0, x, slot_state, decay, write);
  }
}

// A sparse schedule as one dense row of decays and writes (for the chunked kernels).
template <class T, int W, class RowA, class RowW>
void expand_sparse(const SparseWrite<T, W>& s, RowA&& a, RowW&& w) {
  a.setConstant(s.decay_all);
  w.setZero();
  for (int j = 0; j < s.count; ++j) {
    const SlotWrite<T>& sw = s.writes[static_cast<std::size_t>(j)];
    a(sw.slot) *= sw.decay;
    w(sw.slot) = sw.weight;
  }
}

// Any control's schedule for tokens [t0, t0 + x.rows()) as dense rows of decays and writes: a
// sparse schedule token by token, its writes expanded; a dense one as it is.
template <class C>
void schedule_rows(const C& c, Index t0, MatrixRef<typename C::scalar_type> x, MatrixOut<typename C::scalar_type> slot_state,
                   PositionsOut positions, MatrixOut<typename C::scalar_type> decay,
                   MatrixOut<typename C::scalar_type> write) {
  if constexpr (has_sparse_schedule<C>::value) {
    for (Index t = 0; t < x.rows(); ++t) {
      SparseWrite<typename C::scalar_type, C::max_writes> sw;
      sparse_schedule(c, t0 + t, x.row(t).transpose(), slot_state, positions, sw);
      expand_sparse(sw, decay.row(t), write.row(t));
    }
  } else {
    dense_schedule(c, t0, x, slot_state, positions, decay, write);
  }
}

// The rule for the per-slot state of a control that states none of its own: a normaliser whose
// running max is finite or −∞ and whose sum is finite (a running-mean count, or RFA's z, which
// sin/cos features can make negative), and no positions (such a control never sets them).
template <class T>
const char* default_slot_state_problem(MatrixRef<T> slot_state, PositionsRef positions) noexcept {
  for (Index l = 0; l < slot_state.cols(); ++l) {
    if (std::isnan(slot_state(0, l)) || slot_state(0, l) == std::numeric_limits<T>::infinity())
      return "a running maximum of the normaliser is NaN or +inf";
    if (!std::isfinite(slot_state(1, l))) return "a sum of the normaliser is not finite";
  }
  for (Index l = 0; l < positions.size(); ++l)
    if (positions(l) != -1) return "a slot position is set, but the control keeps none";
  return nullptr;
}

// Why (slot_state, positions) after `position` tokens cannot be c's state; nullptr if it can.
template <class C>
const char* slot_state_problem_of(const C& c, MatrixRef<typename C::scalar_type> slot_state, PositionsRef positions,
                                  Index position) noexcept {
  if constexpr (has_slot_state_problem<C>::value) {
    return c.slot_state_problem(slot_state, positions, position);
  } else {
    (void)c;
    (void)position;
    return default_slot_state_problem<typename C::scalar_type>(slot_state, positions);
  }
}

}  // namespace detail
ABC_NAMESPACE_END
