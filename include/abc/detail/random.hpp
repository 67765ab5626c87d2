// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Counter-based random numbers: the same on every platform.
#pragma once

#include <cmath>
#include <cstdint>

#include "../types.hpp"
#include "check.hpp"
#include "control_check.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// SplitMix64 finaliser: a bijective mix, so hash(seed, i) is a counter-based generator. Parallel,
// recurrent and split runs draw the same numbers because nothing depends on call order, and unlike
// <random>'s distributions the results do not vary between standard libraries.
inline std::uint64_t mix64(std::uint64_t z) noexcept {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline std::uint64_t hash(std::uint64_t seed, std::uint64_t counter) noexcept {
  return mix64(mix64(seed) ^ counter);
}

// Uniform in (0, 1): 53 random bits, never exactly 0 (so log() below is finite).
inline double uniform(std::uint64_t seed, std::uint64_t counter) noexcept {
  return (static_cast<double>(hash(seed, counter) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal by Box–Muller from two counters.
inline double normal(std::uint64_t seed, std::uint64_t counter) noexcept {
  const double u1 = uniform(seed, 2 * counter), u2 = uniform(seed, 2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Seeded weights: a [rows × cols] matrix of N(0, sd²) entries, entry i (row-major) from counter i.
template <class T>
// NOLINTNEXTLINE(bugprone-easily-swappable-parameters): (rows, cols) as everywhere in Eigen and abc
Matrix<T> gaussian_matrix(Index rows, Index cols, double sd, std::uint64_t seed) {
  Matrix<T> w(rows, cols);
  for (Index i = 0; i < w.size(); ++i) w.data()[i] = static_cast<T>(sd * normal(seed, static_cast<std::uint64_t>(i)));
  return w;
}

// A control's random weights W [rows × cols] ~ N(0, 1/cols), so a unit-variance input of width
// cols gives unit-variance logits. The input width is checked first, then the rows, then that
// their product fits; `who` and the names say whose and which in the error.
template <class T>
Matrix<T> random_weights(const char* who, Index rows, const char* rows_arg, const char* rows_rule, Index cols,
                         // NOLINTNEXTLINE(bugprone-easily-swappable-parameters): internal: names for the message
                         const char* cols_arg, const char* cols_rule, const char* entries, std::uint64_t seed) {
  require_at_least(who, cols_arg, cols, 1, cols_rule);
  require_at_least(who, rows_arg, rows, 1, rows_rule);
  require_product(who, entries, rows, cols);
  return gaussian_matrix<T>(rows, cols, 1.0 / std::sqrt(static_cast<double>(cols)), seed);
}

}  // namespace detail
ABC_NAMESPACE_END
