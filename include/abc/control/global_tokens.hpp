// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::GlobalTokens, only preselected positions are kept.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "../detail/control_check.hpp"
#include "../error.hpp"
#include "../schedule.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief Sparse local-to-global memory (ABC paper §A.1): slot i holds the i-th global token.
 *
 * Schedule: decay 1; token t writes e_i if t = positions[i], and nothing otherwise. The memory is
 * the stacked global keys and values, so every query attends to the global tokens only (slots not
 * reached yet are empty and masked). Combine with a window through Concat for the
 * Longformer / BigBird pattern. Lookup is a binary search over the sorted positions, O(log n).
 */
template <class Scalar = float>
class GlobalTokens {
 public:
  /// float or double.
  using scalar_type = Scalar;
  /// The control's name in state blobs.
  static std::string tag() { return "abc::control::GlobalTokens"; }
  /// At most one write per token: a global token writes its slot, any other token nothing.
  static constexpr int max_writes = 1;
  /// No parameters, and piecewise constant in x: no gradient flows through the schedule.
  static constexpr bool constant_schedule = true;
  /// Each slot holds one token as it is (Concat counts such a token once).
  static constexpr bool stores_tokens = true;
  /// False: a_t ≡ 1, nothing written decays.
  static constexpr bool has_decay = false;

  /// Slot i holds the token at `positions[i]`. \throws config_error if `positions` is empty, or
  /// holds a negative or a repeated position.
  explicit GlobalTokens(std::vector<Index> positions) : positions_(std::move(positions)) {
    constexpr const char* who = "abc::control::GlobalTokens";
    detail::require_at_least(who, "positions.size()", Index(positions_.size()), 1,
                             "at least one global token");
    sorted_.reserve(positions_.size());
    for (std::size_t i = 0; i < positions_.size(); ++i) {
      if (positions_[i] < 0)
        ABC_THROW(config_error(std::string(who) + ": positions[" + std::to_string(i) + "] is " +
                               std::to_string(positions_[i]) + ", expected at least 0 (a token position)"));
      sorted_.emplace_back(positions_[i], Index(i));
    }
    std::sort(sorted_.begin(), sorted_.end());
    for (std::size_t j = 1; j < sorted_.size(); ++j)
      if (sorted_[j].first == sorted_[j - 1].first)
        ABC_THROW(config_error(std::string(who) + ": positions[" + std::to_string(sorted_[j].second) +
                               "] is " + std::to_string(sorted_[j].first) +
                               ", expected a position not listed before (positions[" +
                               std::to_string(sorted_[j - 1].second) + "] is also " +
                               std::to_string(sorted_[j].first) + "; one slot per global token)"));
  }

  /// n, the number of global tokens.
  Index num_slots() const noexcept { return Index(positions_.size()); }
  /// The global token positions as given: slot i holds the token at positions()[i].
  const std::vector<Index>& positions() const noexcept { return positions_; }

  /// The slot of token t, or −1 when t is not a global token.
  Index slot(Index t) const noexcept {
    auto it = std::lower_bound(sorted_.begin(), sorted_.end(), std::make_pair(t, Index(0)));
    return it != sorted_.end() && it->first == t ? it->second : Index(-1);
  }

  /// Token t writes slot(t) (weight 1, decay 1), or nothing when it is not a global token.
  void schedule(Index t, VectorRef<Scalar> /*x*/, MatrixOut<Scalar> /*slot_state*/,
                SparseWrite<Scalar, 1>& w) const noexcept {
    const Index s = slot(t);
    if (s >= 0) w.add(s, Scalar(1), Scalar(1));
  }

 private:
  std::vector<Index> positions_;                // as given: slot i ↔ positions_[i]
  std::vector<std::pair<Index, Index>> sorted_;  // (position, slot), by position
};

}  // namespace control
ABC_NAMESPACE_END
