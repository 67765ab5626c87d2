// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::Gradients, what a backward pass of BoundedAttention returns.
#pragma once

#include <type_traits>
#include <utility>

#include "concepts.hpp"
#include "state_gradient.hpp"
#include "types.hpp"

ABC_NAMESPACE_BEGIN

/// The parameter gradient of a control that has nothing to learn.
struct NoParameters {
  /// Nothing to add (a backward pass sums its blocks' gradients).
  NoParameters& operator+=(const NoParameters& /*other*/) noexcept { return *this; }
};

namespace detail {
template <class C, class = void>
struct control_gradient {
  using type = NoParameters;
};
template <class C>
struct control_gradient<C, std::void_t<typename C::Gradient>> {
  using type = typename C::Gradient;
};

// Whether a control's parameter gradients add with `+=`: a backward pass then works through a long
// sequence in blocks of Options::backward_block tokens, summing the blocks' parameter gradients,
// and keeps its per-token records for one block at a time; without it, for the whole call.
template <class G, class = void>
struct summable_gradient : std::false_type {};
template <class G>
struct summable_gradient<G, std::void_t<decltype(std::declval<G&>() += std::declval<const G&>())>>
    : std::true_type {};
}  // namespace detail

/**
 * \brief The gradients of a loss L with respect to everything a BoundedAttention call read, given
 * ∂L/∂out: what `backward` and `backward_causal` return.
 *
 * \tparam Control the attention's control policy.
 */
template <class Control>
struct Gradients {
  /// float or double.
  using scalar_type = typename Control::scalar_type;
  /// The control's parameter gradient: `Control::Gradient` (shaped like its parameters, e.g.
  /// ABC-MLP's ∂L/∂W_φ), or NoParameters.
  using control_gradient_type = typename detail::control_gradient<Control>::type;

  /// ∂L/∂q, [M × d].
  Matrix<scalar_type> q;
  /// ∂L/∂k, [N × d]: includes the control's share when the control read the keys (no x given).
  Matrix<scalar_type> k;
  /// ∂L/∂v, [N × dv].
  Matrix<scalar_type> v;
  /// ∂L/∂x, [N × d_x] when the call was given a control input; empty otherwise.
  Matrix<scalar_type> x;
  /// The gradient with respect to the control's parameters.
  control_gradient_type control{};
  /// backward_causal continuing a state: the gradient with respect to the state the call started
  /// from (to hand to the backward pass of the call that made it). Empty for the other forms.
  StateGradient<scalar_type> state;
};

ABC_NAMESPACE_END
