// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::ControlInput, the optional control input of a call.
#pragma once

#include <optional>
#include <type_traits>
#include <utility>

#include "types.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief The optional last argument of a BoundedAttention call: the rows a control reads instead of
 * the keys (ABC-MLP's and GSA's layer input x, [N × d_x]; for a step, the vector x_t [d_x]).
 *
 * Left out (`{}`), the control reads the keys. Given, it is a view of the caller's rows (an Eigen
 * matrix, block or expression, as MatrixRef / VectorRef accept) for the duration of the call. It is
 * not copied or kept: it exists so that each call is written once for both cases.
 *
 * \tparam Ref MatrixRef<T> or VectorRef<T>
 */
template <class Ref>
class ControlInput {
 public:
  /// No control input: the control reads the keys.
  ControlInput() noexcept = default;
  /// The control input `x`, viewed (or, for an expression, evaluated) as Ref.
  template <class X, std::enable_if_t<std::is_constructible<Ref, const X&>::value &&
                                          !std::is_same<std::decay_t<X>, ControlInput>::value,
                                      int> = 0>
  ControlInput(const X& x) : ref_(std::in_place, x) {}  // NOLINT(google-explicit-constructor): an argument
  // A copy of a Ref that evaluated an expression would point into the original's buffer.
  ControlInput(const ControlInput&) = delete;
  ControlInput& operator=(const ControlInput&) = delete;

  /// The input, or nullptr when none was given.
  const Ref* get() const noexcept { return ref_ ? &*ref_ : nullptr; }
  /// The input, or `keys` when none was given.
  const Ref& value_or(const Ref& keys) const noexcept { return ref_ ? *ref_ : keys; }

 private:
  std::optional<Ref> ref_;
};

ABC_NAMESPACE_END
