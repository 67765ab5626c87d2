// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::Rope, rotary position embedding (RoPE), to rotate queries
// and keys at a position and to re-rotate a cached key when eviction moves it.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "../detail/check.hpp"
#include "../error.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace select {

/// Which entries of a head RoPE rotates together.
enum class RopePairs {
  half,         ///< entry j with entry j + dims / 2 (GPT-NeoX, Llama, HF `rotate_half`)
  interleaved,  ///< entry 2j with entry 2j + 1 (GPT-J, the RoFormer paper)
};

/**
 * \brief Rotary position embedding (Su et al., RoFormer): pair j of the first `dims` entries of a
 * head turns by the angle `position · base^(−2j / dims)`.
 *
 * Rotations compose, R(a) R(b) = R(a + b), so a key rotated for one position is moved to another
 * by turning it through the difference: `rotate(key, to − from)`. A KV cache that gives its
 * tokens compacted positions (their index in the cache, as StreamingLLM's sink cache does) calls
 * that when an eviction moves a kept key up; KvCacheAttention takes a Rope for exactly this.
 *
 * The angles of a move by −1 (what a decode step does to every token after the evicted one) are
 * tabulated at construction; other moves compute theirs. A Rope is immutable, so one may be shared
 * by threads.
 *
 * \tparam Scalar float or double (the angles are computed in double).
 */
template <class Scalar>
class Rope {
 public:
  /// Rotates the first `dims` entries (even, ≥ 2) of each head in pairs; `base` > 1 (10,000 in most
  /// models, 500,000 in Llama 3). \throws config_error naming the argument otherwise.
  explicit Rope(Index dims, double base = 10000.0, RopePairs pairs = RopePairs::half) : dims_(dims), pairs_(pairs) {
    constexpr const char* who = "abc::select::Rope";
    if (dims < 2 || dims % 2 != 0)
      detail::raise(who, detail::value_problem(Status::bad_config, "dims", dims, "an even number at least ", 2,
                                               "entries turn in pairs"));
    detail::require_real(std::isfinite(base) && base > 1.0, who, "base", base, "a finite number > 1");
    const Index half = dims / 2;
    frequency_.resize(std::size_t(half));
    back_cos_.resize(std::size_t(half));
    back_sin_.resize(std::size_t(half));
    for (Index j = 0; j < half; ++j) {
      frequency_[std::size_t(j)] = std::pow(base, -2.0 * double(j) / double(dims));
      back_cos_[std::size_t(j)] = static_cast<Scalar>(std::cos(frequency_[std::size_t(j)]));
      back_sin_[std::size_t(j)] = static_cast<Scalar>(-std::sin(frequency_[std::size_t(j)]));
    }
  }

  /// The entries rotated per head.
  Index dims() const noexcept { return dims_; }
  /// Which entries turn together.
  RopePairs pairs() const noexcept { return pairs_; }
  /// The angle pair j turns by per position: base^(−2j / dims); unchecked: 0 ≤ j < dims / 2.
  double frequency(Index j) const noexcept { return frequency_[std::size_t(j)]; }

  /// Turns the first dims() entries of `row` (at least dims() of them) through `delta` positions:
  /// a vector at position p moves to p + delta.
  void rotate(Scalar* row, std::int64_t delta) const noexcept {
    const Index half = dims_ / 2;
    if (delta == 0) return;
    if (delta == -1) {
      for (Index j = 0; j < half; ++j) turn(row, j, back_cos_[std::size_t(j)], back_sin_[std::size_t(j)]);
      return;
    }
    for (Index j = 0; j < half; ++j) {
      const double angle = double(delta) * frequency_[std::size_t(j)];
      turn(row, j, static_cast<Scalar>(std::cos(angle)), static_cast<Scalar>(std::sin(angle)));
    }
  }

  /// Each row i of `rows` (a query or key block, at least dims() columns) turned to position
  /// `first + i`, from position 0 (as a model rotates its projections).
  void apply(MatrixOut<Scalar> rows, std::int64_t first) const noexcept {
    for (Index i = 0; i < rows.rows(); ++i) rotate(&rows(i, 0), first + i);
  }

 private:
  // Pair j of `row` turned by the angle whose cosine and sine are c and s.
  void turn(Scalar* row, Index j, Scalar c, Scalar s) const noexcept {
    const Index a = pairs_ == RopePairs::half ? j : 2 * j, b = pairs_ == RopePairs::half ? j + dims_ / 2 : 2 * j + 1;
    const Scalar x = row[a], y = row[b];
    row[a] = x * c - y * s;
    row[b] = x * s + y * c;
  }

  Index dims_;
  RopePairs pairs_;
  std::vector<double> frequency_;
  std::vector<Scalar> back_cos_, back_sin_;  // the turn of a move by −1 position
};

}  // namespace select
ABC_NAMESPACE_END
