// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::BoundedAttention, the operator every control plugs into.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "concepts.hpp"
#include "config.hpp"
#include "detail/check.hpp"
#include "detail/compose.hpp"
#include "detail/control_kind.hpp"
#include "detail/linear_readout.hpp"
#include "detail/recurrence.hpp"
#include "kernel/rows.hpp"
#include "options.hpp"
#include "simd_arch.hpp"
#include "state.hpp"
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
  static_assert(detail::has_scalar_type<Control>::value,
                "abc::BoundedAttention<Control>: Control must provide `using scalar_type = float;` "
                "(or double) (see abc/concepts.hpp)");
  static_assert(detail::has_num_slots<Control>::value,
                "abc::BoundedAttention<Control>: Control must provide `Index num_slots() const` "
                "(see abc/concepts.hpp)");
  static_assert(detail::has_sparse_schedule<Control>::value ||
                    detail::has_dense_schedule<Control>::value ||
                    detail::has_linear_readout<Control>::value,
                "abc::BoundedAttention<Control>: Control must provide a schedule: either "
                "`static constexpr int max_writes` with `void schedule(Index t, VectorRef<T> x, "
                "MatrixOut<T> norm, SparseWrite<T, max_writes>& w) const`, or `void "
                "schedule(Index t0, MatrixRef<T> x, MatrixOut<T> norm, MatrixOut<T> decay, "
                "MatrixOut<T> write) const` (see abc/concepts.hpp)");

 public:
  /// The control policy that states each token's decay and write.
  using control_type = Control;
  /// float or double: the control's scalar type, that of every input, output and State.
  using scalar_type = typename Control::scalar_type;
  /// The decode state of one sequence, made by make_state() and continued by step() and forward_causal().
  using state_type = State<scalar_type>;
  static_assert(detail::is_supported_scalar<scalar_type>::value,
                "abc::BoundedAttention<Control>: Control::scalar_type must be float or double");

 private:
  using T = scalar_type;
  static constexpr bool linear = detail::readout_of<Control>::value == Readout::linear;
  static constexpr bool sparse = detail::has_sparse_schedule<Control>::value && !linear;
  static_assert(!linear || detail::has_linear_readout<Control>::value,
                "abc::BoundedAttention<Control>: a Control with `readout = Readout::linear` must provide "
                "`void key_schedule(Index t0, MatrixRef<T> k, MatrixRef<T> x, MatrixOut<T> decay, "
                "MatrixOut<T> write) const` and `void query_features(MatrixRef<T> q, MatrixOut<T> phi) "
                "const` (see abc/concepts.hpp)");
  static constexpr bool has_decay = detail::decay_flag<Control>::value;

 public:
  /// \throws config_error if the control has no slot or the scale is not finite and positive.
  explicit BoundedAttention(Control control, Options options = {})
      : control_(std::move(control)), options_(options) {
    detail::advise_isa_once();
    detail::require_scale("abc::BoundedAttention", "options.scale", options_.scale);
    detail::Problem p;
    if (control_.num_slots() < 1)
      p = detail::at_least(Status::bad_config, "num_slots()", control_.num_slots(), 1,
                           "a memory needs a slot");
    else if (options_.chunk < 1)
      p = detail::at_least(Status::bad_config, "options.chunk", options_.chunk, 1,
                           "a chunk holds a token");
    if (p) detail::raise("abc::BoundedAttention", p);
  }

  /// The control policy, as given to the constructor.
  const Control& control() const noexcept { return control_; }
  /// The options, as given to the constructor.
  const Options& options() const noexcept { return options_; }
  /// n, the number of memory slots (the control's num_slots()).
  Index num_slots() const noexcept { return control_.num_slots(); }

  /// The scale a read with queries of width `d` uses.
  T scale(Index d) const noexcept {
    return options_.scale > 0 ? T(options_.scale) : T(1) / std::sqrt(T(d));
  }

  // ---- non-causal / cross attention -----------------------------------------------------------

  /**
   * \brief Non-causal (encoder or cross) attention: every query reads the memory of all keys.
   * \param q queries, [M × d], row-major; M may differ from N
   * \param k keys, [N × d]
   * \param v values, [N × dv]
   * \return [M × dv]
   * \throws shape_error, config_error
   */
  Matrix<T> forward(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v) const {
    Matrix<T> out(q.rows(), v.cols());
    forward_into(q, k, v, out);
    return out;
  }
  /// As forward(q, k, v), with the control input x [N × d_x] instead of the keys.
  Matrix<T> forward(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, MatrixRef<T> x) const {
    Matrix<T> out(q.rows(), v.cols());
    forward_into(q, k, v, x, out);
    return out;
  }
  /// Allocation of the output left to the caller: `out` must be [M × dv].
  void forward_into(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, MatrixOut<T> out) const {
    checked_forward(q, k, v, nullptr, out);
  }
  /// As forward_into(q, k, v, out), with the control input x [N × d_x] instead of the keys.
  void forward_into(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, MatrixRef<T> x,
                    MatrixOut<T> out) const {
    checked_forward(q, k, v, &x, out);
  }
  /// The checks of forward(q, k, v), without throwing: Status::ok when the call would succeed, else
  /// the Status of the first failed check.
  [[nodiscard]] Status validate(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v) const noexcept {
    return check(Mode::non_causal, nullptr, q, k, v, nullptr).status;
  }
  /// The checks of forward(q, k, v, x), without throwing.
  [[nodiscard]] Status validate(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v,
                                MatrixRef<T> x) const noexcept {
    return check(Mode::non_causal, nullptr, q, k, v, &x).status;
  }

  // ---- memories: built once, read many times --------------------------------------------------

  /**
   * \brief The memory of a source sequence, to be read by many queries (cross attention's encoder
   * side): the state forward(q, k, v) builds and reads, as a State at position N.
   *
   * read(memory, q) then costs O(n · d) per query instead of O(N · n · d) for forward(), and gives
   * forward's result bit for bit. The memory is a State: save_state / load_state serialise it.
   * Continuing it with step or forward_causal appends tokens as the causal control would; for a
   * control with a non-causal form of its own (ABC-MLP's per-token normalisation, k-means fitted
   * to the source), that is a different recurrence from the one that built it.
   * \param k keys, [N × d]; \param v values, [N × dv]
   * \throws shape_error, config_error
   */
  state_type memory(MatrixRef<T> k, MatrixRef<T> v) const { return checked_memory(k, v, nullptr); }
  /// As memory(k, v), with the control input x [N × d_x] instead of the keys.
  state_type memory(MatrixRef<T> k, MatrixRef<T> v, MatrixRef<T> x) const { return checked_memory(k, v, &x); }

  /// Every query of q [M × d] reads `memory` (from memory(), make_state() or a decode in progress)
  /// without changing it: [M × dv]. \throws shape_error, config_error
  Matrix<T> read(const state_type& memory, MatrixRef<T> q) const {
    Matrix<T> out(q.rows(), memory.value_dim());
    read_into(memory, q, out);
    return out;
  }
  /// Allocation of the output left to the caller: `out` must be [M × dv].
  void read_into(const state_type& memory, MatrixRef<T> q, MatrixOut<T> out) const {
    detail::Problem p = read_problem(memory, q);
    if (!p)
      p = detail::shape_problem("out", out.rows(), out.cols(), q.rows(), memory.value_dim(),
                                "the output buffer holds one row per query");
    if (p) detail::raise("abc::BoundedAttention::read", p);
    read_memory(memory, q, out);
  }
  /// The checks of read(memory, q), without throwing.
  [[nodiscard]] Status validate_read(const state_type& memory, MatrixRef<T> q) const noexcept {
    return read_problem(memory, q).status;
  }

  // ---- causal, parallel -----------------------------------------------------------------------

  /**
   * \brief Causal attention computed in parallel: output t reads the memory of keys 0..t.
   * \param q queries, [N × d]; \param k keys, [N × d]; \param v values, [N × dv]
   * \return [N × dv]
   */
  Matrix<T> forward_causal(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v) const {
    state_type s = state_for(k, v);
    return forward_causal(s, q, k, v);
  }
  /// As forward_causal(q, k, v), with the control input x [N × d_x] instead of the keys.
  Matrix<T> forward_causal(MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v, MatrixRef<T> x) const {
    state_type s = state_for(k, v);
    return forward_causal(s, q, k, v, x);
  }
  /// Continues `state` over N more tokens (prefill, or the next piece of a long sequence).
  Matrix<T> forward_causal(state_type& state, MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v) const {
    Matrix<T> out(q.rows(), v.cols());
    forward_causal_into(state, q, k, v, out);
    return out;
  }
  /// As forward_causal(state, q, k, v), with the control input x [N × d_x] instead of the keys.
  Matrix<T> forward_causal(state_type& state, MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v,
                           MatrixRef<T> x) const {
    Matrix<T> out(q.rows(), v.cols());
    forward_causal_into(state, q, k, v, x, out);
    return out;
  }
  /// Allocation of the output left to the caller: `out` must be [N × dv]. Advances `state` by N
  /// tokens; a call that throws leaves it unchanged.
  /// \throws shape_error, config_error
  void forward_causal_into(state_type& state, MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v,
                           MatrixOut<T> out) const {
    checked_causal(state, q, k, v, nullptr, out);
  }
  /// As forward_causal_into(state, q, k, v, out), with the control input x [N × d_x] instead of the
  /// keys.
  void forward_causal_into(state_type& state, MatrixRef<T> q, MatrixRef<T> k, MatrixRef<T> v,
                           MatrixRef<T> x, MatrixOut<T> out) const {
    checked_causal(state, q, k, v, &x, out);
  }
  /// The checks of forward_causal(state, q, k, v), without throwing; `state` is only read.
  [[nodiscard]] Status validate(const state_type& state, MatrixRef<T> q, MatrixRef<T> k,
                                MatrixRef<T> v) const noexcept {
    return check(Mode::causal, &state, q, k, v, nullptr).status;
  }
  /// The checks of forward_causal(state, q, k, v, x), without throwing.
  [[nodiscard]] Status validate(const state_type& state, MatrixRef<T> q, MatrixRef<T> k,
                                MatrixRef<T> v, MatrixRef<T> x) const noexcept {
    return check(Mode::causal, &state, q, k, v, &x).status;
  }

  // ---- recurrent ------------------------------------------------------------------------------

  /// An empty decode state for keys of width d and values of width dv: O(n · (d + dv)).
  state_type make_state(Index d, Index dv) const {
    detail::Problem p;
    if (d < 1) p = detail::at_least(Status::bad_config, "d", d, 1, "keys need a column");
    if (dv < 1) p = detail::at_least(Status::bad_config, "dv", dv, 1, "values need a column");
    if (p) detail::raise("abc::BoundedAttention::make_state", p);
    state_type s(control_.num_slots(), linear ? 0 : d, dv, &kind);  // a linear readout keeps no K̃
    s.scratch_.resize(3, control_.num_slots());
    return s;
  }

  /**
   * \brief One causal token: writes (k_t, v_t) into `state` and reads it with q_t. O(n · d).
   * \param state a state from make_state(d, dv) of this attention, advanced by one token
   * \param q_t [d], \param k_t [d], \param v_t [dv]
   * \return [dv]
   */
  Vector<T> step(state_type& state, VectorRef<T> q_t, VectorRef<T> k_t, VectorRef<T> v_t) const {
    Vector<T> out(v_t.size());
    step_into(state, q_t, k_t, v_t, out);
    return out;
  }
  /// As step(state, q_t, k_t, v_t), with the control input x_t [d_x] instead of the key.
  Vector<T> step(state_type& state, VectorRef<T> q_t, VectorRef<T> k_t, VectorRef<T> v_t,
                 VectorRef<T> x_t) const {
    Vector<T> out(v_t.size());
    step_into(state, q_t, k_t, v_t, x_t, out);
    return out;
  }
  /// Allocation-free step: `out` must hold dv entries.
  void step_into(state_type& state, VectorRef<T> q_t, VectorRef<T> k_t, VectorRef<T> v_t,
                 VectorOut<T> out) const {
    checked_step(state, q_t, k_t, v_t, nullptr, out);
  }
  /// As step_into(state, q_t, k_t, v_t, out), with the control input x_t [d_x] instead of the key.
  void step_into(state_type& state, VectorRef<T> q_t, VectorRef<T> k_t, VectorRef<T> v_t,
                 VectorRef<T> x_t, VectorOut<T> out) const {
    checked_step(state, q_t, k_t, v_t, &x_t, out);
  }
  /// The checks of step(state, q_t, k_t, v_t), without throwing; `state` is only read.
  [[nodiscard]] Status validate_step(const state_type& state, VectorRef<T> q_t, VectorRef<T> k_t,
                                     VectorRef<T> v_t) const noexcept {
    return check(Mode::step, &state, rows(q_t), rows(k_t), rows(v_t), nullptr).status;
  }
  /// The checks of step(state, q_t, k_t, v_t, x_t), without throwing.
  [[nodiscard]] Status validate_step(const state_type& state, VectorRef<T> q_t, VectorRef<T> k_t,
                                     VectorRef<T> v_t, VectorRef<T> x_t) const noexcept {
    MatrixRef<T> x = rows(x_t);
    return check(Mode::step, &state, rows(q_t), rows(k_t), rows(v_t), &x).status;
  }

 private:
  template <class C>
  friend class MultiHeadAttention;  // runs the per-head checks of its calls without a state to spare

  enum class Mode { non_causal, causal, step, memory };

  static const char* where(Mode m) noexcept {
    switch (m) {
      case Mode::non_causal: return "abc::BoundedAttention::forward";
      case Mode::causal: return "abc::BoundedAttention::forward_causal";
      case Mode::step: return "abc::BoundedAttention::step";
      case Mode::memory: return "abc::BoundedAttention::memory";
    }
    return "abc::BoundedAttention";
  }

  // A vector as a one-row matrix view (no copy): step shares every check with the parallel calls.
  static Eigen::Map<const Matrix<T>> rows(const VectorRef<T>& x) noexcept {
    return Eigen::Map<const Matrix<T>>(x.data(), 1, x.size());
  }

  // The fresh state of a causal call. Zero-width keys or values get a state of width 1, so that the
  // call's own checks report them as the shape errors they are (make_state would report its
  // integer arguments instead).
  state_type state_for(const MatrixRef<T>& k, const MatrixRef<T>& v) const {
    return make_state(std::max<Index>(k.cols(), 1), std::max<Index>(v.cols(), 1));
  }

  bool masked() const noexcept { return options_.empty_slots == EmptySlots::masked; }

  // The linear readout's denominator floor (0: off), when the control has one.
  T floor() const noexcept {
    if constexpr (detail::has_denominator_floor<Control>::value)
      return control_.denominator_floor();
    else
      return T(0);
  }

  Index control_input_dim() const noexcept {
    if constexpr (detail::has_input_dim<Control>::value)
      return control_.input_dim();
    else
      return 0;
  }

  // Every check of every call, in one place; nothing is touched before it passes.
  detail::Problem check(Mode mode, const state_type* state, const MatrixRef<T>& q,
                        const MatrixRef<T>& k, const MatrixRef<T>& v,
                        const MatrixRef<T>* x) const noexcept {
    using detail::at_least;
    using detail::shape_problem;
    const bool one = mode == Mode::step;
    const char* qn = one ? "q_t" : "q";
    const char* kn = one ? "k_t" : "k";
    const char* vn = one ? "v_t" : "v";
    const char* xn = one ? "x_t" : "x";
    const bool keys_only = mode == Mode::memory;  // no queries: q is k
    // step's k_t and x_t are vectors, seen here as one-row matrices: reported by their size.
    const auto input_problem = [one](const char* arg, const MatrixRef<T>& m, Index er, Index ec, const char* rule) {
      return one ? detail::size_problem(arg, m.cols(), ec, rule) : shape_problem(arg, m.rows(), m.cols(), er, ec, rule);
    };
    const Index d = q.cols(), n_keys = k.rows();
    if (d < 1) return at_least(Status::shape_mismatch, keys_only ? "k.cols()" : one ? "q_t.size()" : "q.cols()", d, 1,
                               "queries and keys need a column");
    if (auto p = input_problem(kn, k, k.rows(), d,
                               one ? "k_t.size() must equal q_t.size()" : "k.cols() must equal q.cols()"))
      return p;
    if (v.cols() < 1) return at_least(Status::shape_mismatch, one ? "v_t.size()" : "v.cols()",
                                      v.cols(), 1, "values need a column");
    if (auto p = shape_problem(vn, v.rows(), v.cols(), n_keys, v.cols(),
                               "v.rows() must equal k.rows(): one value per key"))
      return p;
    if (mode == Mode::causal)
      if (auto p = shape_problem(qn, q.rows(), q.cols(), n_keys, d,
                                 "causal attention reads one query per key"))
        return p;
    const Index dx = control_input_dim();
    if (x) {
      const Index want = dx > 0 ? dx : x->cols();
      if (auto p = input_problem(xn, *x, n_keys, want,
                                 one ? "the control's input_dim()"
                                     : "one control input row per key, of the control's input_dim()"))
        return p;
    } else if (dx > 0) {
      if (auto p = input_problem(kn, k, k.rows(), dx,
                                 "the control reads the keys as its input, so their width must be "
                                 "the control's input_dim(); pass x to give it another input"))
        return p;
    }
    if constexpr (detail::has_key_dim<Control>::value)
      if (auto p = input_problem(kn, k, k.rows(), control_.key_dim(),
                                 "keys and queries must have the width of the control's key_dim()"))
        return p;
    if (state) {
      if (auto p = shape_problem("state.keys()", state->num_slots(), state->key_dim(),
                                 control_.num_slots(), linear ? 0 : d,
                                 "the state must come from make_state(d, dv) of this attention"))
        return p;
      if (auto p = shape_problem("state.values()", state->num_slots(), state->value_dim(),
                                 control_.num_slots(), v.cols(),
                                 "the state must come from make_state(d, dv) of this attention"))
        return p;
      if (auto p = kind_problem(*state, "state")) return p;
    }
    if constexpr (detail::has_causal_problem<Control>::value)
      if (mode == Mode::causal || mode == Mode::step)
        if (auto p = control_.causal_problem()) return p;
    if constexpr (detail::has_max_tokens<Control>::value) {
      const Index start = state ? state->position() : 0;
      if (start + n_keys > control_.max_tokens())
        return detail::value_problem(Status::bad_config,
                                     "the token count (state position + new tokens)", start + n_keys,
                                     "at most ", control_.max_tokens(),
                                     "the control's capacity, max_tokens()");
    }
    if (!keys_only)
      if (auto p = detail::finite_problem(qn, q)) return p;
    if (auto p = detail::finite_problem(kn, k)) return p;
    if (auto p = detail::finite_problem(vn, v)) return p;
    if (x)
      if (auto p = detail::finite_problem(xn, *x)) return p;
    return {};
  }

  void require(Mode mode, const state_type* state, const MatrixRef<T>& q, const MatrixRef<T>& k,
               const MatrixRef<T>& v, const MatrixRef<T>* x, Index out_rows, Index out_cols,
               Index actual_rows, Index actual_cols) const {
    detail::Problem p = check(mode, state, q, k, v, x);
    if (!p)
      p = mode == Mode::step ? detail::size_problem("out", actual_rows, out_rows, "the output holds one entry per value")
                             : detail::shape_problem("out", actual_rows, actual_cols, out_rows, out_cols,
                                                     "the output buffer holds one row per query");
    if (p) detail::raise(where(mode), p);
  }

  // The slots query `first + i` may read, as a function of i.
  static auto range_of(const Control& ctl, Index first) noexcept {
    return [&ctl, first](Index i) -> detail::SlotRange {
      if constexpr (detail::has_read_range<Control>::value) {
        const auto r = ctl.read_range(first + i);
        return {r.first, r.second};
      } else {
        (void)first;
        (void)i;
        return {0, ctl.num_slots()};
      }
    };
  }

  detail::MemoryView<T> view(state_type& s) const noexcept {
    return {s.keys_, s.values_, s.norm_, s.written_};
  }

  state_type checked_memory(const MatrixRef<T>& k, const MatrixRef<T>& v, const MatrixRef<T>* x) const {
    if (auto p = check(Mode::memory, nullptr, k, k, v, x)) detail::raise(where(Mode::memory), p);
    state_type s = make_state(k.cols(), v.cols());
    build_memory(s, k, v, x ? *x : k, false);
    return s;
  }

  // Why queries q cannot read `memory`; an empty Problem when they can.
  detail::Problem read_problem(const state_type& memory, const MatrixRef<T>& q) const noexcept {
    const Index d = q.cols();
    if (d < 1) return detail::at_least(Status::shape_mismatch, "q.cols()", d, 1, "queries need a column");
    Index want_d = d;
    if constexpr (linear) {
      want_d = 0;
      if constexpr (detail::has_key_dim<Control>::value)
        if (auto p = detail::shape_problem("q", q.rows(), d, q.rows(), control_.key_dim(),
                                           "queries must have the width of the control's key_dim()"))
          return p;
    }
    if (auto p = detail::shape_problem("memory.keys()", memory.num_slots(), memory.key_dim(), control_.num_slots(),
                                       want_d, "the memory must come from this attention, for queries of this width"))
      return p;
    if (memory.value_dim() < 1)
      return detail::at_least(Status::shape_mismatch, "memory.value_dim()", memory.value_dim(), 1,
                              "the memory must come from this attention");
    if (auto p = kind_problem(memory, "memory")) return p;
    return detail::finite_problem("q", q);
  }

  // Whether `state` (named `arg`) was made for this control type.
  static detail::Problem kind_problem(const state_type& state, const char* arg) noexcept {
    if (detail::same_kind(state.kind_, &kind)) return {};
    return detail::wrong_kind_problem(Status::bad_config, arg, state.kind_ ? state.kind_->name : nullptr, kind.name,
                                      "a state belongs to the control type whose make_state made it");
  }

  // ---- the public calls: every check, then the engine with one reading head ---------------------

  void checked_forward(const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v, const MatrixRef<T>* x,
                       MatrixOut<T>& out) const {
    require(Mode::non_causal, nullptr, q, k, v, x, q.rows(), v.cols(), out.rows(), out.cols());
    state_type s = make_state(k.cols(), v.cols());
    build_memory(s, k, v, x ? *x : k, false);
    read_memory(s, q, out);
  }

  void checked_causal(state_type& s, const MatrixRef<T>& q, const MatrixRef<T>& k, const MatrixRef<T>& v,
                      const MatrixRef<T>* x, MatrixOut<T>& out) const {
    require(Mode::causal, &s, q, k, v, x, q.rows(), v.cols(), out.rows(), out.cols());
    run_causal(
        s, 1, [&q](Index) -> const MatrixRef<T>& { return q; }, [&out](Index) -> MatrixOut<T>& { return out; }, k, v,
        x ? *x : k, false);
  }

  void checked_step(state_type& s, const VectorRef<T>& q, const VectorRef<T>& k, const VectorRef<T>& v,
                    const VectorRef<T>* x, VectorOut<T>& out) const {
    MatrixRef<T> xm = rows(x ? *x : k);
    require(Mode::step, &s, rows(q), rows(k), rows(v), x ? &xm : nullptr, v.size(), 1, out.size(), 1);
    step_heads(
        s, 1, [&q](Index) { return q.data(); }, [&out](Index) { return out.data(); }, k.data(), v.data(), xm, false,
        k.size(), v.size());
  }

  // ---- engines ---------------------------------------------------------------------------------
  // Below the checks: the public calls and MultiHeadAttention run these once every check has
  // passed. `heads` query heads read one memory (one head, or the query heads of a grouped-query
  // group, which share their key/value head's memory): query(g) and output(g) are head g's queries
  // and outputs. The memory is built once; each head's reads are exactly those of a memory of its
  // own. `input` is the control input (the keys unless given); when `projected`, it is already the
  // control's logits x Wᵀ (see has_input_projection), formed for many heads at once by the caller.

  // The control's schedule for tokens [t0, t0 + c) as dense rows of decays and writes.
  static void fill(const Control& ctl, Index t0, Index c, const MatrixRef<T>& input, bool projected,
                   Matrix<T>& norm, PositionsRow& positions, detail::ChunkWorkspace<T>& ws) {
    if constexpr (sparse) {
      (void)projected;
      for (Index t = 0; t < c; ++t) {
        SparseWrite<T, Control::max_writes> sw;
        detail::sparse_schedule(ctl, t0 + t, input.row(t).transpose(), norm, positions, sw);
        detail::expand_sparse(sw, ws.decay.row(t), ws.write.row(t));
      }
    } else {
      if constexpr (detail::has_input_projection<Control>::value)
        if (projected) return ctl.schedule_projected(t0, input, norm, ws.decay.topRows(c), ws.write.topRows(c));
      (void)projected;
      detail::dense_schedule(ctl, t0, input, norm, positions, ws.decay.topRows(c), ws.write.topRows(c));
    }
  }

  // Tokens per block of the non-causal memory build, which has no per-token reads: its cost is two
  // GEMMs per block, so larger blocks than the causal kernel's chunk pay (bench/README.md, "Chunk
  // size", has the sweep). Options::chunk is the causal kernel's.
  static constexpr Index build_block = 128;

  // The memory of all N tokens, the final state of the recurrence (of the control's non-causal
  // form, when it has one), into the empty state `s`.
  void build_memory(state_type& s, const MatrixRef<T>& k, const MatrixRef<T>& v, const MatrixRef<T>& input,
                    bool projected) const {
    const Index n_keys = k.rows();
    if constexpr (linear) {
      const Index chunk = std::min(build_block, std::max<Index>(n_keys, 1));
      detail::ChunkWorkspace<T> ws(chunk, control_.num_slots(), 0);
      auto z = s.norm_.row(1).transpose();
      for (Index t0 = 0; t0 < n_keys; t0 += chunk) {
        const Index c = std::min(chunk, n_keys - t0);
        control_.key_schedule(t0, k.middleRows(t0, c), input.middleRows(t0, c), ws.decay.topRows(c),
                              ws.write.topRows(c));
        detail::advance_chunk_linear<T>(s.values_, z, ws, c, has_decay, v.middleRows(t0, c));
      }
      (void)projected;
    } else if constexpr (detail::has_noncausal_form<Control>::value) {
      // The control fitted to the whole sequence (k-means sees every input row; a control with an
      // input projection is handed its logits when `projected`).
      build(control_.noncausal_form(input), s, input, projected, k, v);
    } else {
      build(control_, s, input, projected, k, v);
    }
    s.position_ = n_keys;
  }

  void build(const Control& ctl, state_type& s, const MatrixRef<T>& input, bool projected, const MatrixRef<T>& k,
             const MatrixRef<T>& v) const {
    const Index n_keys = k.rows();
    if constexpr (sparse) {
      // One-hot writes: O(d) per token, no dense weights at all.
      (void)projected;
      for (Index t = 0; t < n_keys; ++t) {
        SparseWrite<T, Control::max_writes> sw;
        detail::sparse_schedule(ctl, t, input.row(t).transpose(), s.norm_, s.positions_, sw);
        detail::apply_sparse<T, Control::max_writes>(view(s), sw, k.row(t).transpose(), v.row(t).transpose());
      }
    } else {
      const Index chunk = std::min(build_block, std::max<Index>(n_keys, 1));
      detail::ChunkWorkspace<T> ws(chunk, control_.num_slots(), 0);
      for (Index t0 = 0; t0 < n_keys; t0 += chunk) {
        const Index c = std::min(chunk, n_keys - t0);
        fill(ctl, t0, c, input.middleRows(t0, c), projected, s.norm_, s.positions_, ws);
        detail::advance_chunk<T>(view(s), ws, c, has_decay, k.middleRows(t0, c), v.middleRows(t0, c));
      }
    }
  }

  // Every query of one head reads the finished memory `s` (a non-causal read: nothing changes).
  template <class Q, class O>
  void read_memory(const state_type& s, const Q& q, O&& out) const {
    if constexpr (linear) {
      Matrix<T> phi(q.rows(), control_.num_slots());
      control_.query_features(q, phi);
      detail::read_all_linear<T>(s.values_, s.norm_.row(1).transpose(), phi, floor(), out);
    } else {
      detail::read_all<T>(s.keys_, s.values_, s.written_, masked(), range_of(control_, 0), scale(q.cols()), q, out);
    }
  }

  bool use_chunked() const noexcept {
    switch (options_.causal_kernel) {
      case CausalKernel::chunked: return true;
      case CausalKernel::recurrent: return false;
      case CausalKernel::automatic: break;
    }
    return !sparse;  // one-hot writes are O(d) per token: the token loop is the cheaper kernel
  }

  // Continues `s` over the N tokens of k, v, each head's query t reading the memory of keys ..t.
  template <class QueryOf, class OutputOf>
  void run_causal(state_type& s, Index heads, const QueryOf& query, const OutputOf& output, const MatrixRef<T>& k,
                  const MatrixRef<T>& v, const MatrixRef<T>& input, bool projected) const {
    const Index n_keys = k.rows(), start = s.position_;
    if (n_keys == 0) return;
    if constexpr (linear) {
      const Index chunk = std::min(options_.chunk, n_keys);
      detail::ChunkWorkspace<T> ws(chunk, control_.num_slots(), heads);
      auto z = s.norm_.row(1).transpose();
      for (Index t0 = 0; t0 < n_keys; t0 += chunk) {
        const Index c = std::min(chunk, n_keys - t0);
        control_.key_schedule(start + t0, k.middleRows(t0, c), input.middleRows(t0, c), ws.decay.topRows(c),
                              ws.write.topRows(c));
        for (Index g = 0; g < heads; ++g)
          control_.query_features(query(g).middleRows(t0, c), ws.read(g).prev.topRows(c));
        detail::causal_chunk_linear<T>(s.values_, z, ws, c, has_decay, heads,
                                       [&](Index g) { return output(g).middleRows(t0, c); }, v.middleRows(t0, c),
                                       floor());
      }
      (void)projected;
    } else if (use_chunked()) {
      const Index chunk = std::min(options_.chunk, n_keys);
      detail::ChunkWorkspace<T> ws(chunk, control_.num_slots(), heads);
      const T sc = scale(k.cols());
      for (Index t0 = 0; t0 < n_keys; t0 += chunk) {
        const Index c = std::min(chunk, n_keys - t0);
        fill(control_, start + t0, c, input.middleRows(t0, c), projected, s.norm_, s.positions_, ws);
        detail::causal_chunk<T>(
            view(s), ws, c, has_decay, masked(), range_of(control_, start + t0), sc, heads,
            [&](Index g) { return query(g).middleRows(t0, c); }, [&](Index g) { return output(g).middleRows(t0, c); },
            k.middleRows(t0, c), v.middleRows(t0, c));
      }
    } else {
      reserve_scratch(s, heads);
      for (Index t = 0; t < n_keys; ++t)
        advance_and_read(
            s, start + t, heads, [&](Index g) { return query(g).row(t).data(); },
            [&](Index g) { return output(g).row(t).data(); }, k.row(t).data(), v.row(t).data(), input.row(t),
            projected, k.cols(), v.cols());
    }
    s.position_ = start + n_keys;
  }

  // One decode step of `heads` heads reading the memory: the token at the state's position.
  template <class QueryOf, class OutputOf, class Input>
  void step_heads(state_type& s, Index heads, const QueryOf& query, const OutputOf& output, const T* k, const T* v,
                  const Input& input, bool projected, Index d, Index dv) const {
    reserve_scratch(s, heads);
    advance_and_read(s, s.position_, heads, query, output, k, v, input, projected, d, dv);
    ++s.position_;
  }

  // Scratch rows of a state for `heads` reading heads: the decays, the writes and one score row per
  // head (make_state makes room for one).
  void reserve_scratch(state_type& s, Index heads) const {
    if (s.scratch_.rows() < 2 + heads) s.scratch_.resize(2 + heads, control_.num_slots());
  }

  // Token t: the control's write into the memory, then each head's read, in two passes over the
  // state: each K̃ row is updated and dotted with the first head's query in one go (the other heads
  // read the updated rows), and after the softmax each Ṽ row is updated and accumulated into the
  // first head's output (kernel/rows.hpp). Scratch rows of the state hold the decays, writes and
  // scores, so a step allocates nothing.
  template <class QueryOf, class OutputOf, class Input>
  void advance_and_read(state_type& s, Index t, Index heads, const QueryOf& query, const OutputOf& output,
                        const T* k, const T* v, const Input& input, bool projected, Index d, Index dv) const {
    const Index n = control_.num_slots();
    T* a = s.scratch_.row(0).data();
    T* w = s.scratch_.row(1).data();
    const auto scores = [&s](Index g) { return s.scratch_.row(2 + g).data(); };
    const Eigen::Map<const Matrix<T>> k_row(k, 1, d), v_row(v, 1, dv);
    if constexpr (linear) {
      (void)projected;
      control_.key_schedule(t, k_row, input, s.scratch_.row(0), s.scratch_.row(1));
      for (Index g = 0; g < heads; ++g)
        control_.query_features(Eigen::Map<const Matrix<T>>(query(g), 1, d), s.scratch_.row(2 + g));
      detail::step_linear(s.values_, s.norm_.row(1).data(), scores(0), a, w, v, floor(), output(0), dv);
      for (Index g = 1; g < heads; ++g)
        detail::read_linear(s.values_, s.norm_.row(1).data(), scores(g), floor(), output(g), dv);
      return;
    } else {
      const T sc = scale(d);
      if constexpr (sparse) {
        (void)projected;
        SparseWrite<T, Control::max_writes> sw;
        detail::sparse_schedule(control_, t, input.transpose(), s.norm_, s.positions_, sw);
        detail::apply_sparse<T, Control::max_writes>(view(s), sw, k_row.transpose(), v_row.transpose());
        for (Index g = 0; g < heads; ++g) kernel::rows_dot<false>(s.keys_.data(), d, n, d, a, w, k, query(g), sc, scores(g));
      } else {
        bool done = false;
        if constexpr (detail::has_input_projection<Control>::value)
          if (projected) {
            control_.schedule_projected(t, input, s.norm_, s.scratch_.row(0), s.scratch_.row(1));
            done = true;
          }
        if (!done) detail::dense_schedule(control_, t, input, s.norm_, s.positions_, s.scratch_.row(0), s.scratch_.row(1));
        detail::mark_written<T>(has_decay, s.scratch_.row(0), s.scratch_.row(1), s.written_);
        kernel::rows_dot<true>(s.keys_.data(), d, n, d, a, w, k, query(0), sc, scores(0));
        for (Index g = 1; g < heads; ++g) kernel::rows_dot<false>(s.keys_.data(), d, n, d, a, w, k, query(g), sc, scores(g));
      }
      const detail::SlotRange range = range_of(control_, t)(0);
      for (Index g = 0; g < heads; ++g) detail::softmax_slots(scores(g), n, s.written_.data(), masked(), range);
      // A one-hot write has already been applied: then every pass only reads Ṽ.
      kernel::rows_axpy<!sparse>(s.values_.data(), dv, n, dv, a, w, v, scores(0), output(0));
      for (Index g = 1; g < heads; ++g) kernel::rows_axpy<false>(s.values_.data(), dv, n, dv, a, w, v, scores(g), output(g));
    }
  }

  static constexpr const detail::ControlKind& kind = detail::control_kind_v<Control>;

  Control control_;
  Options options_;
};

ABC_NAMESPACE_END
