// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. control::Concat<A, B>, two memories read under one softmax.
#pragma once

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>

#include "../concepts.hpp"
#include "../detail/check.hpp"
#include "../detail/compose.hpp"
#include "../detail/control_kind.hpp"
#include "../error.hpp"
#include "../schedule.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace control {

/**
 * \brief The slots of A (0 .. nA − 1) followed by those of B (nA .. nA + nB − 1), read by one
 * softmax over the union: Concat<GlobalTokens, SlidingWindow> is the Longformer / BigBird
 * local + global pattern, and the base of GMAT's global memory.
 *
 * Each part keeps its own schedule on its own slots and its own columns of the per-slot state; both see
 * the same control input x, so their input_dim() must agree when both read one.
 *
 * Sparse or dense, decided at compile time: a SparseWrite has a single decay_all for every slot,
 * so Concat is sparse only when both parts are sparse and neither may decay all its slots at once
 * (detail::decay_all_flag: `has_decay_all`, or `has_decay` when that is absent; a Gated part does).
 * Otherwise it is dense, and a sparse part's writes are expanded into its columns.
 * Parts that restrict which slots a query reads (read_range) are not supported.
 *
 * Each token is counted once when both parts store tokens (`stores_tokens`: SlidingWindow,
 * GlobalTokens, Identity, and a Concat of such parts): the read is attention over the union of the
 * tokens the parts hold, as Longformer's and BigBird's local + global pattern, and with global
 * tokens 0 .. s − 1 StreamingLLM's attention sinks + window. A token both parts would store is
 * stored by the part that never evicts (A when neither does); the other part still evicts what it
 * would have (its slot is reset and reads as empty) but does not write the token. Between two
 * parts that both evict (which one holds a token longer is not known), and between other parts
 * (dense, pooled or bookkeeping controls hold no single token to drop), each part writes every
 * token it would write on its own.
 */
template <class A, class B>
class Concat {
  static_assert(std::is_same<typename A::scalar_type, typename B::scalar_type>::value,
                "abc::control::Concat<A, B>: A and B must have the same scalar_type");
  static_assert(!detail::has_read_range<A>::value && !detail::has_read_range<B>::value,
                "abc::control::Concat<A, B>: parts with read_range() (Dilated) are not supported: "
                "a read range of the union would have to cover the other part's slots");
  static constexpr bool kSparse = is_sparse_control_v<A> && is_sparse_control_v<B> &&
                                  !detail::decay_all_flag<A>::value &&
                                  !detail::decay_all_flag<B>::value;
  // Both parts store single tokens and one never evicts: the union is read, each token once.
  static constexpr bool kUnion = kSparse && detail::stores_tokens<A>::value && detail::stores_tokens<B>::value &&
                                 (!detail::decay_flag<A>::value || !detail::decay_flag<B>::value);

 public:
  /// The parts' common scalar type, float or double.
  using scalar_type = typename A::scalar_type;
  /// True when either part decays its slots.
  static constexpr bool has_decay = detail::decay_flag<A>::value || detail::decay_flag<B>::value;
  static constexpr bool has_decay_all = false;  ///< when sparse, decay_all is always 1
  /// True when the parts store single tokens and one never evicts: the union, each token once.
  static constexpr bool stores_tokens = kUnion;
  /// Slots one token can write when sparse: A's max_writes plus B's (1, unused, when dense).
  static constexpr int max_writes =
      kSparse ? detail::max_writes_of<A>::value + detail::max_writes_of<B>::value : 1;
  /// True when both parts' schedules are: no gradient flows through the union's. A part with
  /// parameters of its own is not differentiated through the union (its writes are cut where the
  /// other part holds the token).
  static constexpr bool constant_schedule = detail::constant_schedule<A>::value && detail::constant_schedule<B>::value;

  /// \throws config_error if A and B read control inputs of different widths, or if their slot
  /// counts add up past Index.
  Concat(A a, B b) : a_(std::move(a)), b_(std::move(b)) {
    // num_slots() is this sum, formed on every call: it must fit once and for all.
    detail::require_sum("abc::control::Concat", "a.num_slots() + b.num_slots() (the slot count)", a_.num_slots(),
                        b_.num_slots());
    const Index da = detail::input_dim_of(a_), db = detail::input_dim_of(b_);
    if (da > 0 && db > 0 && da != db)
      ABC_THROW(config_error("abc::control::Concat: b.input_dim() is " + std::to_string(db) + ", expected " +
                             std::to_string(da) + " (a.input_dim(): both parts read the same control input)"));
  }

  /// The control's name in state blobs, built from both parts' names.
  static std::string tag() {
    return "abc::control::Concat<" + detail::control_name<A>() + "," + detail::control_name<B>() + ">";
  }
  /// Each part's rule on its own slots.
  const char* slot_state_problem(MatrixRef<scalar_type> slot_state, PositionsRef positions, Index position) const noexcept {
    const Index na = a_.num_slots(), nb = b_.num_slots();
    if (const char* p = detail::slot_state_problem_of(a_, slot_state.leftCols(na), positions.head(na), position)) return p;
    return detail::slot_state_problem_of(b_, slot_state.rightCols(nb), positions.tail(nb), position);
  }

  /// Part A, on slots 0 .. nA − 1.
  const A& first() const noexcept { return a_; }
  /// Part B, on slots nA .. nA + nB − 1.
  const B& second() const noexcept { return b_; }
  /// nA + nB.
  Index num_slots() const noexcept { return a_.num_slots() + b_.num_slots(); }
  /// The control input width the parts read (0: neither reads one).
  Index input_dim() const noexcept {
    return std::max(detail::input_dim_of(a_), detail::input_dim_of(b_));
  }
  /// The smaller of the parts' capacities (unbounded if neither has one).
  Index max_tokens() const noexcept {
    return std::min(detail::max_tokens_of(a_), detail::max_tokens_of(b_));
  }

  /// Why a part cannot run causally or step (A is asked first), or an empty Problem. Present only
  /// when a part has a causal_problem().
  template <class AA = A, class BB = B,
            std::enable_if_t<detail::has_causal_problem<AA>::value || detail::has_causal_problem<BB>::value, int> = 0>
  detail::Problem causal_problem() const noexcept {
    if constexpr (detail::has_causal_problem<A>::value)
      if (auto p = a_.causal_problem()) return p;
    if constexpr (detail::has_causal_problem<B>::value)
      if (auto p = b_.causal_problem()) return p;
    return {};
  }

  /// The control non-causal calls use: each part that has a non-causal form replaced by it, for
  /// the same control input x [N × d_x]. Present only when a part has a noncausal_form().
  template <class AA = A, class BB = B,
            std::enable_if_t<detail::has_noncausal_form<AA>::value || detail::has_noncausal_form<BB>::value, int> = 0>
  Concat noncausal_form(MatrixRef<scalar_type> x) const {
    Concat c = *this;
    if constexpr (detail::has_noncausal_form<A>::value) c.a_ = a_.noncausal_form(x);
    if constexpr (detail::has_noncausal_form<B>::value) c.b_ = b_.noncausal_form(x);
    return c;
  }

  /// Sparse form: A's writes, then B's shifted by nA.
  template <bool S = kSparse, std::enable_if_t<S, int> = 0>
  void schedule(Index t, VectorRef<scalar_type> x, MatrixOut<scalar_type> slot_state, PositionsOut positions,
                SparseWrite<scalar_type, max_writes>& w) const {
    const Index na = a_.num_slots(), nb = b_.num_slots();
    SparseWrite<scalar_type, A::max_writes> wa;
    SparseWrite<scalar_type, B::max_writes> wb;
    detail::sparse_schedule(a_, t, x, slot_state.leftCols(na), positions.head(na), wa);
    detail::sparse_schedule(b_, t, x, slot_state.rightCols(nb), positions.tail(nb), wb);
    if constexpr (kUnion) {  // the part that never evicts keeps a token both would store
      if constexpr (!detail::decay_flag<A>::value) {
        if (stores(wa)) drop(wb);
      } else {
        if (stores(wb)) drop(wa);
      }
    }
    for (int j = 0; j < wa.count; ++j) w.writes[static_cast<std::size_t>(w.count++)] = wa.writes[static_cast<std::size_t>(j)];
    for (int j = 0; j < wb.count; ++j) {
      SlotWrite<scalar_type> s = wb.writes[static_cast<std::size_t>(j)];
      s.slot += na;
      w.writes[static_cast<std::size_t>(w.count++)] = s;
    }
  }

  /// Dense form: each part fills its own columns of the decay and write rows.
  template <bool S = kSparse, std::enable_if_t<!S, int> = 0>
  void schedule(Index t0, MatrixRef<scalar_type> x, MatrixOut<scalar_type> slot_state, PositionsOut positions,
                MatrixOut<scalar_type> decay, MatrixOut<scalar_type> write) const {
    const Index na = a_.num_slots(), nb = b_.num_slots();
    detail::schedule_rows(a_, t0, x, slot_state.leftCols(na), positions.head(na), decay.leftCols(na), write.leftCols(na));
    detail::schedule_rows(b_, t0, x, slot_state.rightCols(nb), positions.tail(nb), decay.rightCols(nb), write.rightCols(nb));
  }

 private:
  using T = scalar_type;

  template <int W>
  static bool stores(const SparseWrite<T, W>& w) noexcept {
    for (int j = 0; j < w.count; ++j)
      if (w.writes[static_cast<std::size_t>(j)].weight != T(0)) return true;
    return false;
  }
  // The writes' weights to 0; their decays stay (an evicting part still evicts).
  template <int W>
  static void drop(SparseWrite<T, W>& w) noexcept {
    for (int j = 0; j < w.count; ++j) w.writes[static_cast<std::size_t>(j)].weight = T(0);
  }


  A a_;
  B b_;
};

}  // namespace control
ABC_NAMESPACE_END
