// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::BoundedAttention, the operator every control plugs into.
#pragma once

#include <algorithm>
#include <utility>

#include "concepts.hpp"
#include "config.hpp"
#include "control_input.hpp"
#include "detail/attention_check.hpp"
#include "detail/check.hpp"
#include "detail/state_access.hpp"
#include "gradients.hpp"
#include "kernel/backward.hpp"
#include "kernel/linear_backward.hpp"
#include "kernel/engine.hpp"
#include "options.hpp"
#include "simd_arch.hpp"
#include "state.hpp"
#include "state_gradient.hpp"
#include "types.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief Attention whose memory has a fixed number of slots, written by a control policy.
 *
 * Every token's key and value are added to the n memory slots through the recurrence
 * `K̃_t = diag(a_t) K̃_{t-1} + w_t ⊗ k_t` (and the same for Ṽ), whose decay `a_t` and write `w_t`
 * the control states; queries read `Ṽᵀ softmax(scale · K̃ q)`. Cost is O(N · n · d) time and
 * O(n · d) decode state, instead of O(N²) for full attention. Slots never written take no softmax
 * mass unless `Options::empty_slots` says otherwise; a memory with no written slot reads as zero.
 *
 * Three forms, which agree to rounding for every control:
 * - `forward`: non-causal and cross attention; every query reads the memory of all keys.
 * - `forward_causal`: query t reads the memory of keys 0..t, computed in parallel by chunks.
 * - `step`: one token, O(n · d), continuing a State; `forward_causal(state, ...)` continues a State
 *   over many tokens (prefill, or a long sequence fed in pieces).
 *
 * Each call takes the control input x (the rows the control reads: ABC-MLP's and GSA's layer input)
 * as an optional last argument; left out, the control reads the keys.
 *
 * Every call checks shapes, capacity and finiteness first and throws abc::shape_error or
 * abc::config_error naming the argument; a call that throws leaves the state unchanged. The
 * `validate*` functions run the same checks without throwing.
 *
 * \tparam Control a control policy (see abc/concepts.hpp; built-ins live in abc/control/).
 *
 * \code
 * abc::BoundedAttention attn{abc::control::SlidingWindow{32}};
 * abc::Matrix<float> out = attn.forward_causal(q, k, v);   // [N × dv]
 * \endcode
 */
template <class Control>
class BoundedAttention {
  static_assert(detail::control_contract<Control>::value, "");

 public:
  /// The control policy that states each token's decay and write.
  using control_type = Control;
  /// float or double: the control's scalar type, that of every input, output and State.
  using scalar_type = typename Control::scalar_type;
  /// The decode state of one sequence, made by make_state() and continued by step() and forward_causal().
  using state_type = State<scalar_type>;
  static_assert(detail::is_supported_scalar<scalar_type>::value,
                "abc::BoundedAttention<Control>: Control::scalar_type must be float or double");
  /// The optional control input of a call, [N × d_x]; left out, the control reads the keys.
  using Rows = ControlInput<MatrixRef<scalar_type>>;
  /// The optional control input of a step, [d_x]; left out, the control reads the key.
  using Row = ControlInput<VectorRef<scalar_type>>;

 private:
  using T = scalar_type;
  using Form = detail::CallForm;

 public:
  /// \throws config_error if the control has no slot or the scale is not finite and positive.
  explicit BoundedAttention(Control control, Options options = {})
      : control_(std::move(control)), options_(options) {
    detail::advise_isa_once();
    detail::require_scale("abc::BoundedAttention", "options.scale", options_.scale);
    if (auto p = detail::attention_problem(control_.num_slots(), options_.chunk, options_.backward_block))
      detail::raise("abc::BoundedAttention", p);
  }

  /// The control policy, as given to the constructor.
  const Control& control() const noexcept { return control_; }
  /// The options, as given to the constructor.
  const Options& options() const noexcept { return options_; }
  /// n, the number of memory slots (the control's num_slots()).
  Index num_slots() const noexcept { return control_.num_slots(); }
  /// The scale a read with queries of width `d` uses.
  T scale(Index d) const noexcept { return detail::read_scale<T>(options_.scale, d); }

  /**
   * \brief Non-causal (encoder or cross) attention: every query reads the memory of all keys.
   * \param q queries, [M × d], row-major; M may differ from N
   * \param k keys, [N × d]
   * \param v values, [N × dv]
   * \param x optional control input, [N × d_x]
   * \return [M × dv]
   * \throws shape_error, config_error
   */
  Matrix<T> forward(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, const Rows& x = {}) const {
    Matrix<T> out(q.rows(), v.cols());
    forward_into(q, k, v, out, x);
    return out;
  }
  /// Allocation of the output left to the caller: `out` must be [M × dv].
  void forward_into(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, MatrixOut<T> out, const Rows& x = {}) const {
    require(Form::non_causal, nullptr, q, k, v, x.get(), out);
    engine().read_memory(built(k, v, x), q, out);
  }
  /// The checks of forward(q, k, v, x), without throwing: Status::ok when the call would succeed,
  /// else the Status of the first failed check.
  [[nodiscard]] Status validate(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, const Rows& x = {}) const noexcept {
    return detail::call_problem(control_, Form::non_causal, nullptr, q, k, v, x.get()).status;
  }

  /**
   * \brief The memory of a source sequence, to be read by many queries (cross attention's encoder
   * side): the state forward(q, k, v) builds and reads, as a State at position N.
   *
   * read(memory, q) then costs O(n · d) per query and gives forward's result bit for bit. Continued
   * with step or forward_causal, it appends tokens as the causal control would (for a control with a
   * non-causal form of its own, such as ABC-MLP, a different recurrence from the one that built it).
   * \param k keys, [N × d]; \param v values, [N × dv]; \param x optional control input, [N × d_x]
   * \throws shape_error, config_error
   */
  state_type memory(MatrixRef<T> k, MatrixRef<T> v, const Rows& x = {}) const {
    if (auto p = detail::call_problem(control_, Form::memory, nullptr, k, k, v, x.get()))
      detail::raise(detail::call_name(Form::memory), p);
    return built(k, v, x);
  }
  /// Every query of q [M × d] reads `memory` (from memory(), make_state() or a decode in progress)
  /// without changing it: [M × dv]. \throws shape_error, config_error
  Matrix<T> read(const state_type& memory, MatrixRef<T> q) const {
    Matrix<T> out(q.rows(), memory.value_dim());
    read_into(memory, q, out);
    return out;
  }
  /// Allocation of the output left to the caller: `out` must be [M × dv].
  void read_into(const state_type& memory, MatrixRef<T> q, MatrixOut<T> out) const {
    if (auto p = detail::read_problem(control_, memory, q, &out)) detail::raise("abc::BoundedAttention::read", p);
    engine().read_memory(memory, q, out);
  }
  /// The checks of read(memory, q), without throwing.
  [[nodiscard]] Status validate_read(const state_type& memory, MatrixRef<T> q) const noexcept {
    return detail::read_problem(control_, memory, q).status;
  }

  /**
   * \brief Causal attention computed in parallel: output t reads the memory of keys 0..t.
   * \param q queries, [N × d]; \param k keys, [N × d]; \param v values, [N × dv]
   * \param x optional control input, [N × d_x]
   * \return [N × dv]
   */
  Matrix<T> forward_causal(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, const Rows& x = {}) const {
    // Zero-width keys or values get a state of width 1, so that the call's own checks report them
    // as the shape errors they are (make_state would report its integer arguments instead).
    state_type s = make_state(std::max<Index>(k.cols(), 1), std::max<Index>(v.cols(), 1));
    return forward_causal(s, q, k, v, x);
  }
  /// Continues `state` over N more tokens (prefill, or the next piece of a long sequence).
  Matrix<T> forward_causal(state_type& state, MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v,
                           const Rows& x = {}) const {
    Matrix<T> out(q.rows(), v.cols());
    forward_causal_into(state, q, k, v, out, x);
    return out;
  }
  /// Allocation of the output left to the caller: `out` must be [N × dv]. Advances `state` by N
  /// tokens; a call that throws leaves it unchanged.
  /// \throws shape_error, config_error
  void forward_causal_into(state_type& state, MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, MatrixOut<T> out,
                           const Rows& x = {}) const {
    require(Form::causal, &state, q, k, v, x.get(), out);
    engine().run_causal(
        state, 1, [&q](Index) -> const MatrixRef<T>& { return q; }, [&out](Index) -> MatrixOut<T>& { return out; }, k,
        v, x.value_or(k), false);
  }
  /// The checks of forward_causal(state, q, k, v, x), without throwing; `state` is only read.
  [[nodiscard]] Status validate(const state_type& state, MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v,
                                const Rows& x = {}) const noexcept {
    return detail::call_problem(control_, Form::causal, &state, q, k, v, x.get()).status;
  }

  /// An empty decode state for keys of width d and values of width dv: O(n · (d + dv)), its memory
  /// held in `storage` (StateStorage::bfloat16, for float states: half the bytes; see StateStorage).
  /// \throws config_error for d or dv below 1, or a storage a state of T cannot have
  state_type make_state(Index d, Index dv, StateStorage storage = StateStorage::native) const {
    constexpr const char* where = "abc::BoundedAttention::make_state";
    if (auto p = detail::state_problem(d, dv)) detail::raise(where, p);
    if (auto why = detail::storage_problem<T>(storage); !why.empty())
      ABC_THROW(config_error(std::string(where) + ": storage is " + why));
    constexpr bool keeps_keys = detail::readout_of<Control>::value != Readout::linear;  // a linear readout has no K̃
    state_type s = detail::StateAccess::empty<T>(num_slots(), keeps_keys ? d : 0, dv, &detail::control_kind_v<Control>,
                                                 storage);
    detail::StateAccess::reserve_scratch(s, 1, num_slots());
    return s;
  }

  /**
   * \brief One causal token: writes (k_t, v_t) into `state` and reads it with q_t. O(n · d).
   * \param state a state from make_state(d, dv) of this attention, advanced by one token
   * \param q_t [d], \param k_t [d], \param v_t [dv], \param x_t optional control input, [d_x]
   * \return [dv]
   */
  Vector<T> step(state_type& state, VectorRef<T> q_t, VectorRef<T> k_t, VectorRef<T> v_t, const Row& x_t = {}) const {
    Vector<T> out(v_t.size());
    step_into(state, q_t, k_t, v_t, out, x_t);
    return out;
  }
  /// Allocation-free step: `out` must hold dv entries.
  void step_into(state_type& state, VectorRef<T> q_t, VectorRef<T> k_t, VectorRef<T> v_t, VectorOut<T> out,
                 const Row& x_t = {}) const {
    const MatrixRef<T> x = rows(x_t.value_or(k_t));
    require(Form::step, &state, rows(q_t), rows(k_t), rows(v_t), x_t.get() ? &x : nullptr, out);
    engine().step_heads(
        state, 1, [&q_t](Index) { return q_t.data(); }, [&out](Index) { return out.data(); }, k_t.data(), v_t.data(),
        x, false, k_t.size(), v_t.size());
  }
  /**
   * \brief The gradients of forward(q, k, v, x): given ∂L/∂out [M × dv], ∂L/∂q, ∂L/∂k, ∂L/∂v,
   * ∂L/∂x and the control's parameter gradient. O(N · n · d) time; memory beyond the arguments and
   * the results of one block of Options::backward_block tokens (kernel/backward.hpp).
   * \param q queries, [M × d]; \param k keys, [N × d]; \param v values, [N × dv]: as given to forward
   * \param d_out ∂L/∂out, [M × dv]
   * \param x optional control input, [N × d_x], as given to forward
   * \throws shape_error, config_error (forward's checks, and d_out's shape and finiteness)
   */
  Gradients<Control> backward(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, MatrixRef<T> d_out,
                              const Rows& x = {}) const {
    static_assert_differentiable();
    require(Form::non_causal, nullptr, q, k, v, x.get(), d_out, "abc::BoundedAttention::backward");
    Gradients<Control> g;
    if constexpr (kLinear)
      kernel::LinearBackward<Control>(control_, options_).non_causal(q, k, v, x.value_or(k), x.get() != nullptr, d_out, g);
    else
      kernel::SoftmaxBackward<Control>(control_, options_).non_causal(q, k, v, x.value_or(k), x.get() != nullptr, d_out, g);
    return g;
  }

  /// The gradients of forward_causal(q, k, v, x) from an empty state: backward_causal(make_state(),
  /// q, k, v, d_out, {}, x).
  Gradients<Control> backward_causal(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, MatrixRef<T> d_out,
                                     const Rows& x = {}) const {
    return backward_causal(make_state(std::max<Index>(k.cols(), 1), std::max<Index>(v.cols(), 1)), q, k, v, d_out,
                           StateGradient<T>{}, x);
  }

  /**
   * \brief The gradients of forward_causal(start, q, k, v, x), the call that continued `start`
   * (which is only read: pass the state as it was before that call).
   *
   * A sequence run in pieces is differentiated piece by piece, last first: `d_end` is the gradient
   * with respect to the state the call left (empty when the loss does not read it), and the
   * result's `state` is the gradient with respect to `start`, the d_end of the piece before.
   * \param start the state the forward call continued, as it was before that call
   * \param q queries, [N × d]; \param k keys, [N × d]; \param v values, [N × dv]: as given to it
   * \param d_out ∂L/∂out, [N × dv]; \param d_end empty, or K̃ [n × d], Ṽ [n × dv], per-slot [2 × n]
   * \param x optional control input, [N × d_x], as given to it
   * \throws shape_error, config_error
   */
  Gradients<Control> backward_causal(const state_type& start, MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v,
                                     MatrixRef<T> d_out, const StateGradient<T>& d_end, const Rows& x = {}) const {
    static_assert_differentiable();
    require(Form::causal, &start, q, k, v, x.get(), d_out, "abc::BoundedAttention::backward_causal");
    if (!d_end.empty()) {
      const char* rule = "d_end holds the gradient of the state the call leaves, shaped as the state";
      detail::Problem p = detail::shape_problem("d_end.keys", d_end.keys.rows(), d_end.keys.cols(), num_slots(),
                                                start.key_dim(), rule);
      if (!p)
        p = detail::shape_problem("d_end.values", d_end.values.rows(), d_end.values.cols(), num_slots(),
                                  start.value_dim(), rule);
      if (!p)
        p = detail::shape_problem("d_end.slot_state", d_end.slot_state.rows(), d_end.slot_state.cols(), 2,
                                  num_slots(), rule);
      if (!p) p = detail::finite_problem("d_end.keys", d_end.keys);
      if (!p) p = detail::finite_problem("d_end.values", d_end.values);
      if (!p) p = detail::finite_problem("d_end.slot_state", d_end.slot_state);
      if (p) detail::raise("abc::BoundedAttention::backward_causal", p);
    }
    // A bfloat16 start is differentiated as the call ran: on its memory widened to T (exact).
    state_type widened;
    if (start.storage() != StateStorage::native) widened = detail::StateAccess::as_native(start);
    const state_type& from = start.storage() != StateStorage::native ? widened : start;
    Gradients<Control> g;
    if constexpr (kLinear)
      kernel::LinearBackward<Control>(control_, options_)
          .causal(from, q, k, v, x.value_or(k), x.get() != nullptr, d_out, d_end, g);
    else
      kernel::SoftmaxBackward<Control>(control_, options_)
          .causal(from, q, k, v, x.value_or(k), x.get() != nullptr, d_out, d_end, g);
    return g;
  }

  /// The checks of step(state, q_t, k_t, v_t, x_t), without throwing; `state` is only read.
  [[nodiscard]] Status validate_step(const state_type& state, VectorRef<T> q_t, VectorRef<T> k_t, VectorRef<T> v_t,
                                     const Row& x_t = {}) const noexcept {
    const MatrixRef<T> x = rows(x_t.value_or(k_t));
    return detail::call_problem(control_, Form::step, &state, rows(q_t), rows(k_t), rows(v_t), x_t.get() ? &x : nullptr)
        .status;
  }

 private:
  kernel::Engine<Control> engine() const noexcept { return {control_, options_}; }

  // The memory of keys k, values v and control input x (checked already).
  state_type built(const MatrixRef<T>& k, const MatrixRef<T>& v, const Rows& x) const {
    state_type s = make_state(k.cols(), v.cols());
    engine().build_memory(s, k, v, x.value_or(k), false);
    return s;
  }

  static constexpr bool kLinear = detail::readout_of<Control>::value == Readout::linear;

  static constexpr void static_assert_differentiable() {
    static_assert(kLinear || detail::differentiable_control<Control>::value,
                  "abc::BoundedAttention::backward: Control must provide `struct Gradient` with `void "
                  "schedule_backward(const ScheduleTape<T>&, MatrixOut<T> d_slot_state, MatrixOut<T> dx, "
                  "Gradient&) const`, or declare `static constexpr bool constant_schedule = true` when its "
                  "schedule has no parameters and is piecewise constant in x (see abc/concepts.hpp)");
    static_assert(!kLinear || detail::differentiable_control<Control>::value,
                  "abc::BoundedAttention::backward: a Control with a linear readout must provide `struct "
                  "Gradient` with `void features_backward(const ScheduleTape<T>&, MatrixRef<T> q, MatrixRef<T> "
                  "d_phi_q, MatrixRef<T> k, MatrixOut<T> dq, MatrixOut<T> dk, MatrixOut<T> dx, Gradient&) "
                  "const` (see abc/concepts.hpp)");
  }

  // A backward call's checks: the forward call's, then ∂L/∂out's shape and finiteness.
  void require(Form form, const state_type* state, const MatrixRef<T>& q, const MatrixRef<T>& k,
               const MatrixRef<T>& v, const MatrixRef<T>* x, const MatrixRef<T>& d_out, const char* where) const {
    detail::Problem p = detail::call_problem(control_, form, state, q, k, v, x);
    if (!p)
      p = detail::shape_problem("d_out", d_out.rows(), d_out.cols(), q.rows(), v.cols(),
                                "the gradient of the output holds one row per query");
    if (!p) p = detail::finite_problem("d_out", d_out);
    if (p) detail::raise(where, p);
  }

  // A vector as a one-row matrix view (no copy): step shares every check with the parallel calls.
  // The row count is 1 at compile time, so the view holds only the pointer and the length: a view
  // with both extents stored had its two 8-byte fields read back as one 16-byte load where the
  // MatrixRef binds to it, which the store buffer cannot forward (a stall on every step).
  using OneRow = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic, Eigen::RowMajor>>;
  static_assert(Eigen::internal::traits<MatrixRef<T>>::template match<OneRow>::MatchAtCompileTime,
                "a MatrixRef binds to a one-row view without a copy");
  static OneRow rows(const VectorRef<T>& x) noexcept { return OneRow(x.data(), x.size()); }

  // Every check of a call and of its output buffer; nothing is touched before they pass.
  template <class Out>
  void require(Form form, const state_type* state, const MatrixRef<T>& q, const MatrixRef<T>& k,
               const MatrixRef<T>& v, const MatrixRef<T>* x, const Out& out) const {
    detail::Problem p = detail::call_problem(control_, form, state, q, k, v, x);
    if (!p)
      p = form == Form::step ? detail::size_problem("out", out.size(), v.cols(), "the output holds one entry per value")
                             : detail::shape_problem("out", out.rows(), out.cols(), q.rows(), v.cols(),
                                                     "the output buffer holds one row per query");
    if (p) detail::raise(detail::call_name(form), p);
  }

  Control control_;
  Options options_;
};

ABC_NAMESPACE_END
