// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::Seed, the seed of a random draw named at the call site.
#pragma once

#include <cstdint>

#include "config.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief The seed of a control's or feature map's random weights.
 *
 * Random draws are counter-based hashes of (seed, index), so one seed gives the same weights on
 * every platform and in every form. A Seed is spelled out where it is given, so that it cannot be
 * swapped silently with a size: `Linformer<float>(abc::Slots{64}, n_max, abc::Seed{7})`.
 */
struct Seed {
  /// Any value; equal seeds give equal weights.
  constexpr explicit Seed(std::uint64_t seed) noexcept : value(seed) {}
  /// The seed.
  std::uint64_t value;
};

ABC_NAMESPACE_END
