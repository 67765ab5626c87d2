// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::TopKEviction, a token-level KV cache that keeps the
// newest tokens and the best-scoring older ones (TRAMS without expiry).
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "../detail/control_check.hpp"
#include "../schedule.hpp"
#include "../select/key_score.hpp"
#include "../slots.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief Each slot holds one token: the `recent` newest tokens always, and the `topk` older tokens
 * with the highest query-independent score (select::KeyScore) of all that have left the recent
 * window; a read is exact softmax attention over those recent + topk tokens.
 *
 * This is TRAMS with no pool expiry (an extension, not the paper's
 * method): with static scores, the top-k of a growing set is kept exactly by "insert, then evict
 * the minimum", so the state is the n = recent + topk slots themselves. Token t overwrites (decay
 * 0, weight 1) an empty slot while there is one, else the slot of the lowest-ranked token that is
 * not among the `recent` newest (ties: the lower score goes, then the older token). With recent = 0
 * the new token competes too and is not written when it ranks lowest.
 *
 * Per-slot bookkeeping lives in the State: row 0 of its slot_state() holds the score of the token in
 * each slot (−∞ while empty; +∞ is a legitimate score, from keys whose score overflows the scalar
 * type), and the slot's position (State::slot_position) the token's position, an integer, so the
 * ranking is exact at any stream length (−1: empty). The schedule reads that state, so it runs
 * token by token in every form and parallel, recurrent and split runs agree.
 * The control input is the key by default (input_dim() is the score's key width, or any width for
 * the plain norm).
 */
template <class Scalar = float>
class TopKEviction {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::TopKEviction"; }
  /// At most one write per token: the slot it takes, if any.
  static constexpr int max_writes = 1;
  /// No parameters, and piecewise constant in x: no gradient flows through the schedule.
  static constexpr bool constant_schedule = true;
  static constexpr bool has_decay_all = false;  ///< only the overwritten slot is reset

  /// n slots: the `recent` newest tokens, and the topk = n − recent best-scored older ones.
  /// \throws config_error if n < 1, or recent is not in [0, n].
  TopKEviction(Slots n, Index recent, select::KeyScore<Scalar> score)
      : recent_(recent), score_(std::move(score)) {
    constexpr const char* who = "abc::control::TopKEviction";
    detail::require_at_least(who, "n", n.value, 1, "the cache holds at least one token");
    detail::require_at_least(who, "recent", recent, 0, "a token count");
    detail::require_at_most(who, "recent", recent, n.value, "the newest tokens kept are among the n slots");
    topk_ = n.value - recent;
  }

  /// recent + topk.
  Index num_slots() const noexcept { return recent_ + topk_; }
  /// The number of newest tokens always kept.
  Index recent() const noexcept { return recent_; }
  /// The number of older tokens kept by score.
  Index topk() const noexcept { return topk_; }
  /// The score that ranks the older tokens.
  const select::KeyScore<Scalar>& score() const noexcept { return score_; }
  /// The score's key width (0 for KeyScore::norm(): any width).
  Index input_dim() const noexcept { return score_.key_dim(); }
  /// A kept slot holds a token before `position` with a score that is not NaN, an empty one
  /// nothing; no token is held twice.
  const char* slot_state_problem(MatrixRef<Scalar> slot_state, PositionsRef positions, Index position) const noexcept {
    for (Index l = 0; l < positions.size(); ++l) {
      const Index p = positions(l);
      if (std::isnan(slot_state(0, l))) return "a kept token's score is NaN";
      if (slot_state(1, l) != Scalar(0)) return "row 1 of the per-slot state is unused and must be 0";
      if (p < -1 || p >= position) return "a slot holds a token position outside [0, position)";
      if (p == -1 && slot_state(0, l) != -std::numeric_limits<Scalar>::infinity()) return "an empty slot has a score";
      for (Index j = 0; j < l; ++j)
        if (p >= 0 && positions(j) == p) return "two slots hold the same token";
    }
    return nullptr;
  }

  /// Token t, scored on its control input x, takes an empty slot, else the slot of the
  /// lowest-ranked token outside the `recent` newest (decay 0, write 1), and records its score in
  /// row 0 of `slot_state` and t in `positions`. With recent = 0 it is not written when it ranks lowest.
  void schedule(Index t, VectorRef<Scalar> x, MatrixOut<Scalar> slot_state, PositionsOut positions,
                SparseWrite<Scalar, 1>& w) const noexcept {
    const Index n = num_slots();
    const Scalar s = score_(x.data(), x.size());
    // Tokens after t − recent are among the newest `recent` once t is in.
    const Index recent_floor = t - recent_;
    Index victim = -1;
    for (Index l = 0; l < n; ++l) {
      const Index pos = positions(l);
      if (pos < 0) {  // an empty slot: fill it
        victim = l;
        break;
      }
      if (pos > recent_floor) continue;
      if (victim < 0 || slot_state(0, l) < slot_state(0, victim) || (slot_state(0, l) == slot_state(0, victim) && pos < positions(victim)))
        victim = l;
    }
    if (victim < 0) return;  // cannot happen: recent + topk ≥ 1 leaves a candidate
    if (recent_ == 0 && positions(victim) >= 0 && s < slot_state(0, victim)) return;  // t ranks lowest
    slot_state(0, victim) = s;
    positions(victim) = t;
    w.add(victim, Scalar(0), Scalar(1));
  }

 private:
  Index recent_ = 0, topk_ = 0;
  select::KeyScore<Scalar> score_;
};

}  // namespace control
ABC_NAMESPACE_END
