// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::TopKEviction, a token-level KV cache that keeps the
// newest tokens and the best-scoring older ones (TRAMS without expiry).
#pragma once

#include <limits>
#include <utility>

#include "../detail/control_check.hpp"
#include "../schedule.hpp"
#include "../select/key_score.hpp"
#include "../types.hpp"

namespace abc {
namespace control {

/**
 * \brief Each slot holds one token: the `recent` newest tokens always, and the `topk` older tokens
 * with the highest query-independent score (select::KeyScore) of all that have left the recent
 * window; a read is exact softmax attention over those recent + topk tokens.
 *
 * This is TRAMS with no pool expiry (spec-trams-gmat.md §A.2.5, an extension, not the paper's
 * method): with static scores, the top-k of a growing set is kept exactly by "insert, then evict
 * the minimum", so the state is the n = recent + topk slots themselves. Token t overwrites (decay
 * 0, weight 1) an empty slot while there is one, else the slot of the lowest-ranked token that is
 * not among the `recent` newest (ties: the lower score goes, then the older token). With recent = 0
 * the new token competes too and is not written when it ranks lowest.
 *
 * Per-slot bookkeeping lives in the State's normaliser [2 × n]: row 0 the score of the token in
 * the slot, row 1 its position + 1 (0: empty; a fresh state is (−∞, 0)). The schedule reads that
 * state, so it runs token by token in every form and parallel, recurrent and split runs agree.
 * Positions are held as Scalar, exact up to 2^24 for float: max_tokens() says so (2^53 for double).
 * The control input is the key by default (input_dim() is the score's key width, or any width for
 * the plain norm).
 */
template <class Scalar = float>
class TopKEviction {
 public:
  using scalar_type = Scalar;
  static constexpr int max_writes = 1;
  static constexpr bool has_decay_all = false;  // only the overwritten slot is reset

  /// \throws config_error if recent or topk < 0, or recent + topk < 1.
  TopKEviction(Index recent, Index topk, select::KeyScore<Scalar> score)
      : recent_(recent), topk_(topk), score_(std::move(score)) {
    constexpr const char* who = "abc::control::TopKEviction";
    detail::require_at_least(who, "recent", recent, 0, "a token count");
    detail::require_at_least(who, "topk", topk, 0, "a token count");
    detail::require_at_least(who, "recent + topk", recent + topk, 1, "the cache holds at least one token");
  }

  Index num_slots() const noexcept { return recent_ + topk_; }
  Index recent() const noexcept { return recent_; }
  Index topk() const noexcept { return topk_; }
  const select::KeyScore<Scalar>& score() const noexcept { return score_; }
  Index input_dim() const noexcept { return score_.key_dim(); }
  /// Positions are carried as Scalar in the normaliser: exact integers up to 2^digits.
  Index max_tokens() const noexcept { return Index(1) << std::numeric_limits<Scalar>::digits; }

  void schedule(Index t, VectorRef<Scalar> x, MatrixOut<Scalar> norm, SparseWrite<Scalar, 1>& w) const noexcept {
    const Index n = num_slots();
    const Scalar s = score_(x.data(), x.size());
    // Tokens at positions ≥ t − recent + 1 are among the newest `recent` once t is in: stored
    // position + 1 > t − recent + 1.
    const Scalar recent_floor = Scalar(t - recent_ + 1);
    Index victim = -1;
    for (Index l = 0; l < n; ++l) {
      const Scalar pos1 = norm(1, l);
      if (pos1 == Scalar(0)) {  // an empty slot: fill it
        victim = l;
        break;
      }
      if (pos1 > recent_floor) continue;
      if (victim < 0 || norm(0, l) < norm(0, victim) ||
          (norm(0, l) == norm(0, victim) && pos1 < norm(1, victim)))
        victim = l;
    }
    if (victim < 0) return;  // cannot happen: recent + topk ≥ 1 leaves a candidate
    if (recent_ == 0 && norm(1, victim) != Scalar(0) && s < norm(0, victim)) return;  // t ranks lowest
    norm(0, victim) = s;
    norm(1, victim) = Scalar(t + 1);
    w.add(victim, Scalar(0), Scalar(1));
  }

 private:
  Index recent_, topk_;
  select::KeyScore<Scalar> score_;
};

}  // namespace control
}  // namespace abc
