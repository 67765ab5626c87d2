// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::Slots, a slot count named at the call site.
#pragma once

#include "config.hpp"
#include "types.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief The number of memory slots n, as a control's first constructor argument.
 *
 * Controls built from sizes take their slot count first and as a Slots, so that it cannot be
 * swapped silently with the input width or another size: `Mlp<float>(abc::Slots{32}, d_x,
 * abc::Seed{1})` compiles, `Mlp<float>(32, d_x, 1)` does not.
 */
struct Slots {
  /// n; the control checks it (at least one slot).
  constexpr explicit Slots(Index n) noexcept : value(n) {}
  /// n.
  Index value;
};

ABC_NAMESPACE_END
