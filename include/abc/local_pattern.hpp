// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::LocalPattern, which main tokens a main token attends to (GMAT).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "detail/check.hpp"
#include "detail/control_check.hpp"
#include "error.hpp"
#include "types.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief The main → main sparsity of GlobalMemoryAttention (GMAT's mask B): each main token i
 * reads one contiguous range of main tokens, [first, second) = range(i, L), bidirectionally.
 *
 * - full(): every main token (vanilla attention);
 * - chunked(C): its own chunk, [C⌊i/C⌋, min(L, C⌊i/C⌋ + C)) (GMAT's "C × k"; the last chunk may
 *   be short);
 * - window(left, right): the band [i − left, i + right] clipped to [0, L) (Longformer-like; an
 *   extension, not in the GMAT paper); window(w) is window(w, w).
 */
class LocalPattern {
 public:
  /// Which pattern: full(), chunked(C) or window(left, right).
  enum class Kind { full, chunked, window };

  /// Every main token reads every main token (vanilla attention).
  static LocalPattern full() noexcept { return LocalPattern(Kind::full, 0, 0); }
  /// \throws config_error if size < 1.
  static LocalPattern chunked(Index size) {
    detail::require_at_least("abc::LocalPattern::chunked", "size", size, 1, "a chunk holds a token");
    return LocalPattern(Kind::chunked, size, 0);
  }
  /// \throws config_error if left or right < 0.
  static LocalPattern window(Index left, Index right) {
    detail::require_at_least("abc::LocalPattern::window", "left", left, 0, "tokens before the query");
    detail::require_at_least("abc::LocalPattern::window", "right", right, 0, "tokens after the query");
    return LocalPattern(Kind::window, left, right);
  }
  /// window(w, w): w tokens on each side. \throws config_error if w < 0.
  static LocalPattern window(Index w) { return window(w, w); }

  /// Which pattern this is.
  Kind kind() const noexcept { return kind_; }
  /// C for chunked(C); 0 for the other kinds.
  Index chunk_size() const noexcept { return kind_ == Kind::chunked ? a_ : 0; }
  /// The tokens a window reads before the query; 0 for the other kinds.
  Index left() const noexcept { return kind_ == Kind::window ? a_ : 0; }
  /// The tokens a window reads after the query; 0 for the other kinds.
  Index right() const noexcept { return kind_ == Kind::window ? b_ : 0; }

  /// The main tokens [first, second) that main token i of L reads; never empty (it holds i).
  std::pair<Index, Index> range(Index i, Index L) const noexcept {
    switch (kind_) {
      case Kind::full: break;
      // Clipped before adding: a chunk or a window wider than any sequence is valid, and its end
      // is never formed past Index.
      case Kind::chunked: {
        const Index c0 = (i / a_) * a_;
        return {c0, c0 + std::min(a_, L - c0)};
      }
      case Kind::window: return {i - std::min(a_, i), i + 1 + std::min(b_, L - i - 1)};
    }
    return {0, L};
  }

  /// Σ_i |range(i, L)|: the main → main scores of one head and layer.
  std::uint64_t main_scores(Index L) const noexcept {
    std::uint64_t s = 0;
    if (kind_ == Kind::full) return std::uint64_t(L) * std::uint64_t(L);
    for (Index i = 0; i < L; ++i) {
      const auto r = range(i, L);
      s += std::uint64_t(r.second - r.first);
    }
    return s;
  }

 private:
  // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): private: the named factories give a and b their meaning
  LocalPattern(Kind k, Index a, Index b) noexcept : kind_(k), a_(a), b_(b) {}
  Kind kind_;
  Index a_, b_;
};

ABC_NAMESPACE_END
