// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The scalar forget gate of control::Gated and gated RFA.
#pragma once

#include <cmath>
#include <utility>

#include "../config.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// σ(s) with exp of a non-positive number only.
template <class T>
T sigmoid(T s) noexcept {
  if (s >= T(0)) return T(1) / (T(1) + std::exp(-s));
  const T e = std::exp(s);
  return e / (T(1) + e);
}

// The gate from its logit s = w_g · x + b_g: (g, 1 − g) = (σ(s), σ(−s)), each from a sigmoid of
// its own sign, so that 1 − g keeps its precision when g is close to 1 (1 − σ(s) would round to 0
// from s ≈ 17 in float). A NaN logit (w_g · x overflowed to +∞ − ∞ on finite input) is an
// undecided gate, s = 0.
template <class T>
std::pair<T, T> sigmoid_gate(T s) noexcept {
  if (std::isnan(s)) s = T(0);
  return {sigmoid(s), sigmoid(-s)};
}

}  // namespace detail
ABC_NAMESPACE_END
