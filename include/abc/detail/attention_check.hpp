// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The checks of a bounded-memory call, shared by BoundedAttention
// and MultiHeadAttention.
#pragma once

#include <string>
#include <type_traits>

#include "../concepts.hpp"
#include "../readout.hpp"
#include "../state.hpp"
#include "../types.hpp"
#include "check.hpp"
#include "control_kind.hpp"
#include "state_access.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// The scalar type of control C, in a parameter list where it must not be deduced from the arguments.
template <class C>
using scalar_of = typename C::scalar_type;

// Which call is checked: its arguments are named after it (step's are vectors: q_t, k_t, …).
enum class CallForm { non_causal, causal, step, memory };

inline const char* call_name(CallForm f) noexcept {
  switch (f) {
    case CallForm::non_causal: return "abc::BoundedAttention::forward";
    case CallForm::causal: return "abc::BoundedAttention::forward_causal";
    case CallForm::step: return "abc::BoundedAttention::step";
    case CallForm::memory: return "abc::BoundedAttention::memory";
  }
  return "abc::BoundedAttention";
}

// Whether `state` (named `arg`) was made for the control type C.
template <class C, class T>
Problem kind_problem(const State<T>& state, const char* arg) noexcept {
  const ControlKind& kind = control_kind_v<C>;
  const ControlKind* actual = StateAccess::kind(state);
  if (same_kind(actual, &kind)) return {};
  return wrong_kind_problem(Status::bad_config, arg, actual ? actual->name : nullptr, kind.name,
                            "a state belongs to the control type whose make_state made it");
}

// Every check of a call of BoundedAttention<C>, in order; an empty Problem when it may run. A step's
// q_t, k_t, v_t and x_t come as one-row matrices and are reported by their size. For `memory`
// there are no queries (q is k); `state` is the state a causal call or a step continues. With
// `inputs_finite` the caller has found q, k, v and x finite already (a layer checks whole tensors).
template <class C, class T = scalar_of<C>>
// NOLINTNEXTLINE(bugprone-easily-swappable-parameters): q, k, v in the attention order of every public form
Problem call_problem(const C& control, CallForm form, const State<scalar_of<C>>* state, const MatrixRef<scalar_of<C>>& q,
                     const MatrixRef<scalar_of<C>>& k, const MatrixRef<scalar_of<C>>& v,
                     const MatrixRef<scalar_of<C>>* x, bool inputs_finite = false) noexcept {
  constexpr bool linear = readout_of<C>::value == Readout::linear;
  const bool one = form == CallForm::step;
  const char* qn = one ? "q_t" : "q";
  const char* kn = one ? "k_t" : "k";
  const char* vn = one ? "v_t" : "v";
  const char* xn = one ? "x_t" : "x";
  const bool keys_only = form == CallForm::memory;
  const auto input_problem = [one](const char* arg, const MatrixRef<T>& m, Index er, Index ec, const char* rule) {
    return one ? size_problem(arg, m.cols(), ec, rule) : shape_problem(arg, m.rows(), m.cols(), er, ec, rule);
  };
  const Index d = q.cols(), n_keys = k.rows();
  if (d < 1)
    return at_least(Status::shape_mismatch, keys_only ? "k.cols()" : one ? "q_t.size()" : "q.cols()", d, 1,
                    "queries and keys need a column");
  if (auto p = input_problem(kn, k, k.rows(), d, one ? "k_t.size() must equal q_t.size()" : "k.cols() must equal q.cols()"))
    return p;
  if (v.cols() < 1) return at_least(Status::shape_mismatch, one ? "v_t.size()" : "v.cols()", v.cols(), 1, "values need a column");
  if (auto p = shape_problem(vn, v.rows(), v.cols(), n_keys, v.cols(), "v.rows() must equal k.rows(): one value per key"))
    return p;
  if (form == CallForm::causal)
    if (auto p = shape_problem(qn, q.rows(), q.cols(), n_keys, d, "causal attention reads one query per key")) return p;
  Index dx = 0;
  if constexpr (has_input_dim<C>::value) dx = control.input_dim();
  if (x) {
    if (auto p = input_problem(xn, *x, n_keys, dx > 0 ? dx : x->cols(),
                               one ? "the control's input_dim()" : "one control input row per key, of the control's input_dim()"))
      return p;
  } else if (dx > 0) {
    if (auto p = input_problem(kn, k, k.rows(), dx,
                               "the control reads the keys as its input, so their width must be the control's "
                               "input_dim(); pass x to give it another input"))
      return p;
  }
  if constexpr (has_key_dim<C>::value)
    if (auto p = input_problem(kn, k, k.rows(), control.key_dim(),
                               "keys and queries must have the width of the control's key_dim()"))
      return p;
  if (state) {
    const char* from = "the state must come from make_state(d, dv) of this attention";
    if (auto p = shape_problem("state.keys()", state->num_slots(), state->key_dim(), control.num_slots(), linear ? 0 : d, from))
      return p;
    if (auto p = shape_problem("state.values()", state->num_slots(), state->value_dim(), control.num_slots(), v.cols(), from))
      return p;
    if (auto p = kind_problem<C>(*state, "state")) return p;
  }
  if constexpr (has_causal_problem<C>::value)
    if (form == CallForm::causal || form == CallForm::step)
      if (auto p = control.causal_problem()) return p;
  if constexpr (has_max_tokens<C>::value) {
    const Index start = state ? state->position() : 0;
    if (start + n_keys > control.max_tokens())
      return value_problem(Status::bad_config, "the token count (state position + new tokens)", start + n_keys, "at most ",
                           control.max_tokens(), "the control's capacity, max_tokens()");
  }
  if (inputs_finite) return {};  // the caller checked them, all at once
  if (one && q.rows() == 1 && k.rows() == 1 && v.rows() == 1 && (!x || x->rows() == 1)) {
    // A decode step's rows in one pass and one test: a pass and a test per row cost more than the
    // rows' loads. The checks below then run only to name the row that fails.
    const T* row[4] = {q.data(), k.data(), v.data(), x ? x->data() : nullptr};
    const Index len[4] = {q.cols(), k.cols(), v.cols(), x ? x->cols() : 0};
    if (kernel::finite_residue_each(row, len, x ? 4 : 3) == T(0)) return {};
  }
  if (!keys_only)
    if (auto p = finite_problem(qn, q)) return p;
  if (auto p = finite_problem(kn, k)) return p;
  if (auto p = finite_problem(vn, v)) return p;
  if (x)
    if (auto p = finite_problem(xn, *x)) return p;
  return {};
}

// Whether call_problem(control, form, state, …, inputs_finite = true) passes for inputs of
// q_rows, k_rows, v_rows and x_rows rows (x_rows < 0: no x), given that it passed for inputs of the
// same widths with the state `like` (another sequence's state of the same memory, or none). Only
// what can differ between the sequences of one layer call is looked at: the lengths, the state's
// shape and kind, and the capacity. A batched decode step runs the full check for its first
// sequence and this for the others; where this says no, the full check finds the message.
template <class C>
bool passes_like(const C& control, CallForm form, const State<scalar_of<C>>* state, const State<scalar_of<C>>* like,
                 Index q_rows, Index k_rows, Index v_rows, Index x_rows) noexcept {
  if (v_rows != k_rows || (x_rows >= 0 && x_rows != k_rows)) return false;
  if (form == CallForm::causal && q_rows != k_rows) return false;
  if ((state == nullptr) != (like == nullptr)) return false;
  if (state && (state->num_slots() != like->num_slots() || state->key_dim() != like->key_dim() ||
                state->value_dim() != like->value_dim() || StateAccess::kind(*state) != StateAccess::kind(*like)))
    return false;
  if constexpr (has_max_tokens<C>::value)
    if ((state ? state->position() : 0) + k_rows > control.max_tokens()) return false;
  (void)control;
  return true;
}

// Why a BoundedAttention of n slots and these options cannot be made.
inline Problem attention_problem(Index n, Index chunk, Index backward_block = 1) noexcept {
  if (n < 1) return at_least(Status::bad_config, "num_slots()", n, 1, "a memory needs a slot");
  if (chunk < 1) return at_least(Status::bad_config, "options.chunk", chunk, 1, "a chunk holds a token");
  if (backward_block < 1)
    return at_least(Status::bad_config, "options.backward_block", backward_block, 1, "a block holds a token");
  return {};
}

// Why a state for keys of width d and values of width dv cannot be made (dv reported first when
// both fail, as the checks always have).
inline Problem state_problem(Index d, Index dv) noexcept {
  if (dv < 1) return at_least(Status::bad_config, "dv", dv, 1, "values need a column");
  if (d < 1) return at_least(Status::bad_config, "d", d, 1, "keys need a column");
  return {};
}

// Why a State of T cannot hold its memory in `storage` (the text after "storage is "); empty when it can.
template <class T>
std::string storage_problem(StateStorage storage) {
  if (storage == StateStorage::native) return {};
  if (storage != StateStorage::bfloat16)
    return std::to_string(static_cast<int>(storage)) + ", expected StateStorage::native or StateStorage::bfloat16";
  if (!std::is_same<T, float>::value)
    return "StateStorage::bfloat16, expected StateStorage::native for a double state (bfloat16 storage holds "
           "float memories)";
  return {};
}

// Why queries q cannot read `memory` of BoundedAttention<C> (into `out`, when given); an empty
// Problem when they can.
template <class C>
Problem read_problem(const C& control, const State<scalar_of<C>>& memory, const MatrixRef<scalar_of<C>>& q,
                     const MatrixOut<scalar_of<C>>* out = nullptr) noexcept {
  const Index d = q.cols();
  if (d < 1) return at_least(Status::shape_mismatch, "q.cols()", d, 1, "queries need a column");
  Index want_d = d;
  if constexpr (readout_of<C>::value == Readout::linear) {
    want_d = 0;  // a linear readout keeps no K̃
    if constexpr (has_key_dim<C>::value)
      if (auto p = shape_problem("q", q.rows(), d, q.rows(), control.key_dim(),
                                 "queries must have the width of the control's key_dim()"))
        return p;
  }
  if (auto p = shape_problem("memory.keys()", memory.num_slots(), memory.key_dim(), control.num_slots(), want_d,
                             "the memory must come from this attention, for queries of this width"))
    return p;
  if (memory.value_dim() < 1)
    return at_least(Status::shape_mismatch, "memory.value_dim()", memory.value_dim(), 1,
                    "the memory must come from this attention");
  if (auto p = kind_problem<C>(memory, "memory")) return p;
  if (out)
    if (auto p = shape_problem("out", out->rows(), out->cols(), q.rows(), memory.value_dim(),
                               "the output buffer holds one row per query"))
      return p;
  return finite_problem("q", q);
}

}  // namespace detail
ABC_NAMESPACE_END
