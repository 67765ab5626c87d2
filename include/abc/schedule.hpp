// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::SparseWrite, the per-token schedule of a one-hot control.
#pragma once

#include <array>

#include "types.hpp"

ABC_NAMESPACE_BEGIN

/// One slot touched by a sparse write: K̃[slot] ← decay · K̃[slot] + weight · k.
template <class T>
struct SlotWrite {
  /// The slot, in [0, n).
  Index slot = 0;
  /// The factor the slot's row is multiplied by before the write.
  T decay = T(1);
  /// The weight of the key (and value) added to the slot.
  T weight = T(0);
};

/**
 * \brief The (decay, write) schedule of one token for a control that touches few slots.
 *
 * Meaning: every slot is first multiplied by `decay_all` (1 unless gated), then each listed slot is
 * multiplied by its own `decay` and receives `weight` times the key (and value). A control that
 * writes nothing for a token (a non-global token) leaves `count` at 0. Applying it costs
 * O(count · d), plus O(n · d) only when `decay_all != 1`.
 *
 * \tparam T scalar type.
 * \tparam MaxWrites how many slots one token can touch (1 for one-hot controls).
 */
template <class T, int MaxWrites>
struct SparseWrite {
  static_assert(MaxWrites >= 1, "abc::SparseWrite: MaxWrites must be at least 1");
  /// The factor every slot is multiplied by first; 1 unless the control is gated.
  T decay_all = T(1);
  /// The number of writes listed, at most MaxWrites.
  int count = 0;
  /// The writes; only the first `count` are applied.
  std::array<SlotWrite<T>, MaxWrites> writes{};

  /// Lists the write (slot, decay, weight). Unchecked: count must be < MaxWrites.
  void add(Index slot, T decay, T weight) noexcept { writes[static_cast<std::size_t>(count++)] = {slot, decay, weight}; }
};

/**
 * \brief Per-slot integers a control may keep in the State (token positions), [n].
 *
 * `State::slot_position(l)`; −1 in a fresh state. A control that keeps positions takes this as the
 * argument after `slot_state` in its schedule (see abc/concepts.hpp); integers, so positions stay exact
 * at any stream length whatever the scalar type.
 */
using PositionsRow = Eigen::Matrix<Index, 1, Eigen::Dynamic>;
using PositionsOut = Eigen::Ref<PositionsRow>;
using PositionsRef = Eigen::Ref<const PositionsRow>;

ABC_NAMESPACE_END
