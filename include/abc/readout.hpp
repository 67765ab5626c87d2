// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::Readout, how queries read the memory.
#pragma once

#include "config.hpp"

ABC_NAMESPACE_BEGIN

/// How a query reads the n-slot memory; a control states it as `static constexpr Readout readout`.
enum class Readout {
  /// Default: out(q) = Ṽᵀ softmax(scale · K̃ q).
  softmax,
  /// Random-feature attention: out(q) = φ(q)ᵀ Ṽ / (φ(q) · z), where z = Σ_t (decayed) w_t is carried
  /// in row 1 of the State's slot_state() and no K̃ is kept. The control supplies φ for queries
  /// (`query_features`) and its writes w_t = φ(k_t) from the keys (`key_schedule`).
  linear,
};

ABC_NAMESPACE_END
