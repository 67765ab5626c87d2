// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Traits shared by the controls built from other controls.
#pragma once

#include <limits>
#include <type_traits>

#include "../concepts.hpp"
#include "../types.hpp"

namespace abc {
namespace detail {

// C::max_writes for a sparse control, 0 for a dense one (so sums over parts stay well-formed).
template <class C, class = void>
struct max_writes_of : std::integral_constant<int, 0> {};
template <class C>
struct max_writes_of<C, std::enable_if_t<has_sparse_schedule<C>::value>>
    : std::integral_constant<int, C::max_writes> {};

// The optional members as values: input_dim() (0 when absent), max_tokens() (unbounded when absent).
template <class C>
Index input_dim_of(const C& c) noexcept {
  if constexpr (has_input_dim<C>::value)
    return c.input_dim();
  else
    return 0;
}
template <class C>
Index max_tokens_of(const C& c) noexcept {
  if constexpr (has_max_tokens<C>::value)
    return c.max_tokens();
  else
    return std::numeric_limits<Index>::max();
}

}  // namespace detail
}  // namespace abc
