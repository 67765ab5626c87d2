// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. What a control policy must provide, as detection traits.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "readout.hpp"
#include "schedule.hpp"
#include "schedule_tape.hpp"
#include "types.hpp"

// concept Control {
//   using scalar_type = float | double;
//   Index num_slots() const;                       // n ≥ 1, fixed for the control's lifetime
//
//   // Exactly one of the two schedules, stating (a_t, w_t) of K̃_t = diag(a_t) K̃_{t-1} + w_t ⊗ k_t:
//   // (a) sparse: the token touches at most max_writes slots
//   static constexpr int max_writes;
//   void schedule(Index t, VectorRef<T> x, MatrixOut<T> slot_state, SparseWrite<T, max_writes>& w) const;
//   // (b) dense: a block of tokens t0 .. t0 + rows - 1, decay and write are [rows × n]
//   void schedule(Index t0, MatrixRef<T> x, MatrixOut<T> slot_state, MatrixOut<T> decay,
//                 MatrixOut<T> write) const;
//   // Either may take `PositionsOut positions` after `slot_state`: per-slot integers kept in the State
//   // (the token each slot holds, −1 when empty), for controls whose schedule depends on them.
//
//   // Optional:
//   static std::string tag();     // the control's name in state blobs, e.g. "abc::control::Mlp";
//                                 // required by save_state / load_state, portable across compilers
//   const char* slot_state_problem(MatrixRef<T> slot_state, PositionsRef positions, Index position) const noexcept;
//                                 // why a loaded (slot_state, positions) cannot be this control's state
//                                 // after `position` tokens, or nullptr; absent: the default rule
//                                 // (detail::default_slot_state_problem)
//   Index input_dim() const;      // width of the control input x; 0: the control reads no input
//   Index max_tokens() const;     // capacity (Linformer N_max, compressive n·c); absent: unbounded
//   static constexpr bool has_decay;  // false: a_t ≡ 1, the kernels skip every decay product
//   Index key_dim() const;            // the key (and query) width the control requires, if any
//
//   // A linear readout (random features, see abc/readout.hpp) replaces the schedule and the softmax:
//   static constexpr Readout readout = Readout::linear;
//   void key_schedule(Index t0, MatrixRef<T> k, MatrixRef<T> x, MatrixOut<T> decay,
//                     MatrixOut<T> write) const;           // w_t = φ(k_t), a_t from x (a gate)
//   void query_features(MatrixRef<T> q, MatrixOut<T> phi) const;  // φ(q), [rows × n]
//   T denominator_floor() const;      // optional: 0 (off) by default
//   Control noncausal_form(MatrixRef<T> x) const;  // the control non-causal calls use, when it
//                                     // differs; sees the whole control input (k-means on keys)
//   std::pair<Index, Index> read_range(Index t) const;  // slots [first, second) query t reads
//   detail::Problem causal_problem() const noexcept;  // why the control cannot run causally or
//                                     // step (empty Problem: it can); reported as config_error
//   static constexpr bool has_decay_all;  // sparse: false when decay_all is always 1 (default:
//                                     // has_decay); lets Concat stay sparse (one decay_all only)
//   const Matrix<T>& input_projection() const;  // dense: W [m × d_x], when the schedule reads x only
//   void schedule_projected(Index t0, MatrixRef<T> logits, MatrixOut<T> slot_state, MatrixOut<T> decay,
//                           MatrixOut<T> write) const;  // through logits = x Wᵀ [rows × m]: the
//                                     // schedule of given logits. Multi-head calls with one control
//                                     // input shared by all heads then form every head's logits as
//                                     // one product (ABC-MLP's W_φ)
//   void block_weights(Index t0, MatrixRef<T> x, bool projected, MatrixOut<T> slot_state,
//                      MatrixOut<T> eff, T* dcum) const;  // dense, non-causal memory build: the
//                                     // weights of a block of tokens at its end and what it
//                                     // leaves of the memory before it (what suffix_weights folds
//                                     // from the schedule), formed at once; `projected`: x holds
//                                     // the logits x Wᵀ, as for schedule_projected
//   bool chunk_weights(Index t0, MatrixRef<T> x, bool projected, MatrixOut<T> slot_state,
//                      MatrixOut<T> u, MatrixOut<T> r, T* carry) const;  // dense, causal chunks:
//                                     // true with weights that factor over time (token i's
//                                     // weight at time t ≥ i is u_i ⊙ r_t, the memory before the
//                                     // chunk's carry ⊙ r_t; all [rows × n] but carry [n]); false
//                                     // with the schedule's decay rows in r and write rows in u
//   static constexpr bool stores_tokens;  // sparse: true when each write stores one token as it is,
//                                     // alone in its slot, and no per-slot state depends on the
//                                     // writes; lets Concat count a token once (default: false)
//
//   // Gradients (BoundedAttention::backward, backward_causal), one of the two:
//   struct Gradient { ... };          // the parameters' gradients, shaped like the parameters;
//                                     // with `Gradient& operator+=(const Gradient&)`, a long call's
//                                     // backward pass runs in blocks (Options::backward_block)
//   void schedule_backward(const ScheduleTape<T>& tape, MatrixOut<T> d_slot_state, MatrixOut<T> dx,
//                          Gradient& grad) const;  // the chain rule through the schedule: from
//                                     // ∂L/∂w_t and ∂L/∂log a_t (the tape) to x (added into dx,
//                                     // [N × d_x]), the parameters (assigned to grad) and the
//                                     // per-slot state (d_slot_state [2 × n]: in, the gradient for
//                                     // the state after the call; out, for the state before it)
//   static constexpr bool constant_schedule = true;  // or: the schedule has no parameters and is
//                                     // piecewise constant in x (a window, a cluster assignment):
//                                     // no gradient flows through it
//   // A linear readout instead (kernel::LinearBackward), with `struct Gradient`:
//   void features_backward(const ScheduleTape<T>& tape, MatrixRef<T> q, MatrixRef<T> d_phi_q,
//                          MatrixRef<T> k, MatrixOut<T> dq, MatrixOut<T> dk, MatrixOut<T> dx,
//                          Gradient& grad) const;  // from ∂L/∂φ(q) [M × n], ∂L/∂w_t and
//                                     // ∂L/∂log a_t (the tape) to q, k, x (added into dq, dk, dx)
//                                     // and the parameters (assigned to grad)
// };
//
// `t` is the token's absolute position in its sequence; `x` is the control input (the key unless the
// caller passes its own); `slot_state` [2 × n] is the control's per-slot state carried in the State:
// a running-mean control keeps its normaliser there (row 0 the running max m of the log-weights, row 1
// the sum Z relative to it), a control with bookkeeping of its own keeps that (Cluster its counts,
// TopKEviction its scores), and any other control leaves it alone. A schedule must not fail: capacity is checked through
// max_tokens() before any state is touched.

ABC_NAMESPACE_BEGIN
namespace detail {

template <class C, class = void>
struct has_scalar_type : std::false_type {};
template <class C>
struct has_scalar_type<C, std::void_t<typename C::scalar_type>> : std::true_type {};

template <class C, class = void>
struct has_num_slots : std::false_type {};
template <class C>
struct has_num_slots<C, std::void_t<decltype(Index{std::declval<const C&>().num_slots()})>>
    : std::true_type {};

template <class C, class = void>
struct has_max_writes : std::false_type {};
template <class C>
struct has_max_writes<C, std::void_t<decltype(int{C::max_writes})>> : std::true_type {};

template <class C, class = void>
struct sparse_write_of {
  using type = void;
};
template <class C>
struct sparse_write_of<C, std::enable_if_t<has_scalar_type<C>::value && has_max_writes<C>::value>> {
  using type = SparseWrite<typename C::scalar_type, C::max_writes>;
};

template <class C, class = void>
struct has_plain_sparse_schedule : std::false_type {};
template <class C>
struct has_plain_sparse_schedule<
    C, std::void_t<typename C::scalar_type, typename sparse_write_of<C>::type,
                   decltype(std::declval<const C&>().schedule(
                       Index{}, std::declval<VectorRef<typename C::scalar_type>>(),
                       std::declval<MatrixOut<typename C::scalar_type>>(),
                       std::declval<typename sparse_write_of<C>::type&>()))>> : std::true_type {};

// The same with per-slot positions after the per-slot state.
template <class C, class = void>
struct has_positioned_sparse_schedule : std::false_type {};
template <class C>
struct has_positioned_sparse_schedule<
    C, std::void_t<typename C::scalar_type, typename sparse_write_of<C>::type,
                   decltype(std::declval<const C&>().schedule(
                       Index{}, std::declval<VectorRef<typename C::scalar_type>>(),
                       std::declval<MatrixOut<typename C::scalar_type>>(), std::declval<PositionsOut>(),
                       std::declval<typename sparse_write_of<C>::type&>()))>> : std::true_type {};

template <class C, class = void>
struct has_plain_dense_schedule : std::false_type {};
template <class C>
struct has_plain_dense_schedule<
    C, std::void_t<decltype(std::declval<const C&>().schedule(
           Index{}, std::declval<MatrixRef<typename C::scalar_type>>(),
           std::declval<MatrixOut<typename C::scalar_type>>(),
           std::declval<MatrixOut<typename C::scalar_type>>(),
           std::declval<MatrixOut<typename C::scalar_type>>()))>> : std::true_type {};

template <class C, class = void>
struct has_positioned_dense_schedule : std::false_type {};
template <class C>
struct has_positioned_dense_schedule<
    C, std::void_t<decltype(std::declval<const C&>().schedule(
           Index{}, std::declval<MatrixRef<typename C::scalar_type>>(),
           std::declval<MatrixOut<typename C::scalar_type>>(), std::declval<PositionsOut>(),
           std::declval<MatrixOut<typename C::scalar_type>>(),
           std::declval<MatrixOut<typename C::scalar_type>>()))>> : std::true_type {};

template <class C>
struct has_sparse_schedule
    : std::integral_constant<bool, has_plain_sparse_schedule<C>::value || has_positioned_sparse_schedule<C>::value> {};
template <class C>
struct has_dense_schedule
    : std::integral_constant<bool, has_plain_dense_schedule<C>::value || has_positioned_dense_schedule<C>::value> {};

template <class C, class = void>
struct has_tag : std::false_type {};
template <class C>
struct has_tag<C, std::enable_if_t<std::is_convertible<decltype(C::tag()), std::string>::value>> : std::true_type {};

template <class C, class = void>
struct has_slot_state_problem : std::false_type {};
template <class C>
struct has_slot_state_problem<
    C, std::enable_if_t<std::is_same<decltype(std::declval<const C&>().slot_state_problem(
                                         std::declval<MatrixRef<typename C::scalar_type>>(),
                                         std::declval<PositionsRef>(), Index{})),
                                     const char*>::value>> : std::true_type {};

template <class C, class = void>
struct has_input_dim : std::false_type {};
template <class C>
struct has_input_dim<C, std::void_t<decltype(Index{std::declval<const C&>().input_dim()})>>
    : std::true_type {};

template <class C, class = void>
struct has_max_tokens : std::false_type {};
template <class C>
struct has_max_tokens<C, std::void_t<decltype(Index{std::declval<const C&>().max_tokens()})>>
    : std::true_type {};

template <class C, class = void>
struct has_noncausal_form : std::false_type {};
template <class C>
struct has_noncausal_form<
    C, std::enable_if_t<std::is_same<decltype(std::declval<const C&>().noncausal_form(
                                         std::declval<MatrixRef<typename C::scalar_type>>())),
                                     C>::value>> : std::true_type {};

template <class C, class = void>
struct has_input_projection : std::false_type {};
template <class C>
struct has_input_projection<
    C, std::void_t<decltype(std::declval<const C&>().input_projection().rows()),
                   decltype(std::declval<const C&>().schedule_projected(
                       Index{}, std::declval<MatrixRef<typename C::scalar_type>>(),
                       std::declval<MatrixOut<typename C::scalar_type>>(),
                       std::declval<MatrixOut<typename C::scalar_type>>(),
                       std::declval<MatrixOut<typename C::scalar_type>>()))>> : std::true_type {};

template <class C, class = void>
struct has_block_weights : std::false_type {};
template <class C>
struct has_block_weights<
    C, std::void_t<decltype(std::declval<const C&>().block_weights(
           Index{}, std::declval<MatrixRef<typename C::scalar_type>>(), bool{},
           std::declval<MatrixOut<typename C::scalar_type>>(), std::declval<MatrixOut<typename C::scalar_type>>(),
           std::declval<typename C::scalar_type*>()))>> : std::true_type {};

template <class C, class = void>
struct has_chunk_weights : std::false_type {};
template <class C>
struct has_chunk_weights<
    C, std::enable_if_t<std::is_same<decltype(std::declval<const C&>().chunk_weights(
                                         Index{}, std::declval<MatrixRef<typename C::scalar_type>>(), bool{},
                                         std::declval<MatrixOut<typename C::scalar_type>>(),
                                         std::declval<MatrixOut<typename C::scalar_type>>(),
                                         std::declval<MatrixOut<typename C::scalar_type>>(),
                                         std::declval<typename C::scalar_type*>())),
                                     bool>::value>> : std::true_type {};

template <class C, class = void>
struct has_read_range : std::false_type {};
template <class C>
struct has_read_range<C, std::void_t<decltype(std::declval<const C&>().read_range(Index{}).first),
                                     decltype(std::declval<const C&>().read_range(Index{}).second)>>
    : std::true_type {};

template <class C, class = void>
struct has_causal_problem : std::false_type {};
template <class C>
struct has_causal_problem<C, std::void_t<decltype(std::declval<const C&>().causal_problem())>>
    : std::true_type {};

template <class C, class = void>
struct decay_flag : std::true_type {};
template <class C>
struct decay_flag<C, std::void_t<decltype(bool{C::has_decay})>>
    : std::integral_constant<bool, C::has_decay> {};

// Whether a sparse control may set SparseWrite::decay_all ≠ 1 (decay every slot at once). A
// control with a_t ≡ 1 cannot; others say so with `static constexpr bool has_decay_all`.
template <class C, class = void>
struct decay_all_flag : decay_flag<C> {};
template <class C>
struct decay_all_flag<C, std::void_t<decltype(bool{C::has_decay_all})>>
    : std::integral_constant<bool, C::has_decay_all> {};

// Whether each write of a sparse control stores one token as it is, in a slot of its own, with
// weight 1 and nothing else in that slot, and the control keeps no per-slot state that depends on
// its writes: `static constexpr bool stores_tokens = true` (the window, global tokens, identity).
// Concat counts a token once only between such parts (a dropped write must change nothing else).
template <class C, class = void>
struct stores_tokens : std::false_type {};
template <class C>
struct stores_tokens<C, std::void_t<decltype(bool{C::stores_tokens})>>
    : std::integral_constant<bool, C::stores_tokens> {};

template <class C, class = void>
struct readout_of : std::integral_constant<Readout, Readout::softmax> {};
template <class C>
struct readout_of<C, std::void_t<decltype(C::readout)>> : std::integral_constant<Readout, C::readout> {};

// Linear readout (random features): writes from the keys (and the control input, for a gate), and
// the feature map of the queries.
template <class C, class = void>
struct has_key_schedule : std::false_type {};
template <class C>
struct has_key_schedule<
    C, std::void_t<decltype(std::declval<const C&>().key_schedule(
           Index{}, std::declval<MatrixRef<typename C::scalar_type>>(),
           std::declval<MatrixRef<typename C::scalar_type>>(),
           std::declval<MatrixOut<typename C::scalar_type>>(),
           std::declval<MatrixOut<typename C::scalar_type>>()))>> : std::true_type {};

template <class C, class = void>
struct has_query_features : std::false_type {};
template <class C>
struct has_query_features<
    C, std::void_t<decltype(std::declval<const C&>().query_features(
           std::declval<MatrixRef<typename C::scalar_type>>(),
           std::declval<MatrixOut<typename C::scalar_type>>()))>> : std::true_type {};

template <class C, class = void>
struct has_key_dim : std::false_type {};
template <class C>
struct has_key_dim<C, std::void_t<decltype(Index{std::declval<const C&>().key_dim()})>> : std::true_type {};

template <class C, class = void>
struct has_denominator_floor : std::false_type {};
template <class C>
struct has_denominator_floor<C, std::void_t<decltype(std::declval<const C&>().denominator_floor())>>
    : std::true_type {};

template <class C>
struct has_linear_readout
    : std::integral_constant<bool, readout_of<C>::value == Readout::linear && has_key_schedule<C>::value &&
                                       has_query_features<C>::value> {};

// Gradients: the chain rule through a control's schedule (see the block at the top of this file).
template <class C, class = void>
struct has_schedule_backward : std::false_type {};
template <class C>
struct has_schedule_backward<
    C, std::void_t<typename C::Gradient,
                   decltype(std::declval<const C&>().schedule_backward(
                       std::declval<const ScheduleTape<typename C::scalar_type>&>(),
                       std::declval<MatrixOut<typename C::scalar_type>>(),
                       std::declval<MatrixOut<typename C::scalar_type>>(),
                       std::declval<typename C::Gradient&>()))>> : std::true_type {};

template <class C, class = void>
struct constant_schedule : std::false_type {};
template <class C>
struct constant_schedule<C, std::void_t<decltype(bool{C::constant_schedule})>>
    : std::integral_constant<bool, C::constant_schedule> {};

// A linear readout's chain rule through its features and gate (kernel::LinearBackward).
template <class C, class = void>
struct has_features_backward : std::false_type {};
template <class C>
struct has_features_backward<
    C, std::void_t<typename C::Gradient,
                   decltype(std::declval<const C&>().features_backward(
                       std::declval<const ScheduleTape<typename C::scalar_type>&>(),
                       std::declval<MatrixRef<typename C::scalar_type>>(),
                       std::declval<MatrixRef<typename C::scalar_type>>(),
                       std::declval<MatrixRef<typename C::scalar_type>>(),
                       std::declval<MatrixOut<typename C::scalar_type>>(),
                       std::declval<MatrixOut<typename C::scalar_type>>(),
                       std::declval<MatrixOut<typename C::scalar_type>>(),
                       std::declval<typename C::Gradient&>()))>> : std::true_type {};

// A control BoundedAttention can differentiate: it states its schedule's chain rule, or that none
// is needed; a linear readout, its features' chain rule.
template <class C>
struct differentiable_control
    : std::integral_constant<bool, readout_of<C>::value == Readout::linear
                                       ? has_features_backward<C>::value
                                       : (has_schedule_backward<C>::value || constant_schedule<C>::value)> {};

template <class T>
struct is_supported_scalar : std::integral_constant<bool, std::is_same<T, float>::value ||
                                                              std::is_same<T, double>::value> {};

// The members every control must have, each checked with a message naming it; BoundedAttention
// instantiates this, so a control missing one fails to compile where it is used, saying what to add.
template <class Control>
struct control_contract : std::true_type {
  static_assert(has_scalar_type<Control>::value,
                "abc::BoundedAttention<Control>: Control must provide `using scalar_type = float;` "
                "(or double) (see abc/concepts.hpp)");
  static_assert(has_num_slots<Control>::value,
                "abc::BoundedAttention<Control>: Control must provide `Index num_slots() const` "
                "(see abc/concepts.hpp)");
  static_assert(has_sparse_schedule<Control>::value ||
                    has_dense_schedule<Control>::value ||
                    has_linear_readout<Control>::value,
                "abc::BoundedAttention<Control>: Control must provide a schedule: either "
                "`static constexpr int max_writes` with `void schedule(Index t, VectorRef<T> x, "
                "MatrixOut<T> slot_state, SparseWrite<T, max_writes>& w) const`, or `void "
                "schedule(Index t0, MatrixRef<T> x, MatrixOut<T> slot_state, MatrixOut<T> decay, "
                "MatrixOut<T> write) const` (see abc/concepts.hpp)");
  static_assert(readout_of<Control>::value != Readout::linear || has_linear_readout<Control>::value,
                "abc::BoundedAttention<Control>: a Control with `readout = Readout::linear` must provide "
                "`void key_schedule(Index t0, MatrixRef<T> k, MatrixRef<T> x, MatrixOut<T> decay, "
                "MatrixOut<T> write) const` and `void query_features(MatrixRef<T> q, MatrixOut<T> phi) "
                "const` (see abc/concepts.hpp)");
};

}  // namespace detail

/// True when C provides everything BoundedAttention needs (see the block at the top of this file).
template <class C>
struct is_control_policy
    : std::integral_constant<bool, detail::has_scalar_type<C>::value &&
                                       detail::has_num_slots<C>::value &&
                                       (detail::has_sparse_schedule<C>::value ||
                                        detail::has_dense_schedule<C>::value ||
                                        detail::has_linear_readout<C>::value)> {};

template <class C>
inline constexpr bool is_control_policy_v = is_control_policy<C>::value;

/// True when C's schedule touches few slots per token (SparseWrite) rather than all n.
template <class C>
inline constexpr bool is_sparse_control_v = detail::has_sparse_schedule<C>::value;

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
template <class C>
concept ControlPolicy = is_control_policy_v<C>;
#endif

ABC_NAMESPACE_END
