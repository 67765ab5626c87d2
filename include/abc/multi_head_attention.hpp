// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::MultiHeadAttention: many heads and sequences over strided buffers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bounded_attention.hpp"
#include "detail/check.hpp"
#include "detail/control_check.hpp"
#include "head_tensor.hpp"

namespace abc {

/**
 * \brief BoundedAttention over every (sequence, head) of a batch, in the layouts transformers use.
 *
 * Inputs are HeadTensor views: q [batch, seq_q, heads, d], k [batch, seq_k, kv_heads, d],
 * v [batch, seq_k, kv_heads, dv], out [batch, seq_q, heads, dv], in any of the bshd, bhsd or
 * packed (variable-length) layouts; nothing is copied or padded. Grouped-query attention: query
 * head h reads key/value head h / (heads / kv_heads). One control per head, or one shared by all.
 * Every (sequence, head) runs exactly the single-head kernels, so results equal per-head calls bit
 * for bit. With ABC_WITH_OPENMP the (sequence × head) pairs run in parallel; all checks happen
 * before, so an error is thrown on the calling thread and nothing has been written, and no
 * exception ever leaves a parallel region.
 *
 * Decoding keeps a Pool: per sequence id, one State per head; `forward_causal(pool, ids, ...)`
 * continues each listed sequence by its tokens (prefill, or one token each: a batched step, which
 * runs each sequence through exactly BoundedAttention::step).
 */
template <class Control>
class MultiHeadAttention {
 public:
  /// The control's scalar type, float or double.
  using scalar_type = typename Control::scalar_type;
  /// The single-head operator each query head runs.
  using attention_type = BoundedAttention<Control>;
  /// The decode state of one sequence and head.
  using state_type = State<scalar_type>;
  /// A sequence's id in a Pool, chosen by the caller.
  using SeqId = std::uint64_t;

  /// The decode states of many sequences, addressed by id: one State per head each. The states are
  /// handed out read-only: only the MultiHeadAttention that added a sequence changes them.
  class Pool {
   public:
    /// Whether sequence `id` is in the pool.
    bool contains(SeqId id) const { return states_.count(id) != 0; }
    /// The number of sequences in the pool.
    std::size_t size() const noexcept { return states_.size(); }
    /// The states of sequence `id`, one per head. \throws config_error for an unknown id.
    const std::vector<state_type>& states(SeqId id) const { return find(id); }
    /// Removes sequence `id` and its states; an id not in the pool is ignored.
    void drop(SeqId id) { states_.erase(id); }
    /// Sequence `id` back to empty memories at position 0.
    void reset(SeqId id) {
      for (auto& s : find(id)) s.reset();
    }
    /// Bytes of memory all the states hold (State::bytes() summed).
    std::size_t bytes() const noexcept {
      std::size_t b = 0;
      for (const auto& kv : states_)
        for (const auto& s : kv.second) b += s.bytes();
      return b;
    }

   private:
    friend class MultiHeadAttention;
    std::vector<state_type>& find(SeqId id) {
      const auto it = states_.find(id);
      if (it == states_.end()) unknown(id);
      return it->second;
    }
    const std::vector<state_type>& find(SeqId id) const {
      const auto it = states_.find(id);
      if (it == states_.end()) unknown(id);
      return it->second;
    }
    [[noreturn]] static void unknown(SeqId id) {
      ABC_THROW(config_error("abc::MultiHeadAttention::Pool: sequence id " + std::to_string(id) +
                             " is not in the pool (add it first)"));
    }
    std::map<SeqId, std::vector<state_type>> states_;
  };

  /// One control shared by all `heads` query heads; `kv_heads` must divide `heads`.
  MultiHeadAttention(const Control& shared, Index heads, Index kv_heads, Options options = {})
      : MultiHeadAttention(std::vector<Control>(std::size_t(std::max<Index>(heads, 0)), shared), kv_heads, options) {}

  /// One control per query head.
  MultiHeadAttention(const std::vector<Control>& per_head, Index kv_heads, Options options = {}) : kv_heads_(kv_heads) {
    const Index heads = Index(per_head.size());
    detail::require_at_least("abc::MultiHeadAttention", "heads", heads, 1, "at least one head");
    detail::require_at_least("abc::MultiHeadAttention", "kv_heads", kv_heads, 1, "at least one key/value head");
    if (heads % kv_heads != 0)
      detail::raise("abc::MultiHeadAttention", detail::value_problem(Status::bad_config, "heads % kv_heads", heads % kv_heads,
                                                                     "", 0, "kv_heads must divide heads"));
    for (const auto& c : per_head) heads_.emplace_back(c, options);
  }

  /// The number of query heads.
  Index heads() const noexcept { return Index(heads_.size()); }
  /// The number of key/value heads; it divides heads().
  Index kv_heads() const noexcept { return kv_heads_; }
  /// The attention of query head h; unchecked: 0 ≤ h < heads().
  const attention_type& head(Index h) const { return heads_[std::size_t(h)]; }
  /// The key/value head query head h reads.
  Index kv_head(Index h) const noexcept { return h / (heads() / kv_heads_); }

  /// Non-causal / cross attention of every sequence and head.
  void forward(const HeadTensor<const scalar_type>& q, const HeadTensor<const scalar_type>& k,
               const HeadTensor<const scalar_type>& v, const HeadTensor<scalar_type>& out) const {
    raise("abc::MultiHeadAttention::forward", problem(Form::non_causal, q, k, v, out, nullptr, no_pool));
    for_each_pair(q.batch(), [&](Index b, Index h) {
      heads_[std::size_t(h)].forward_into(q.head(b, h), k.head(b, kv_head(h)), v.head(b, kv_head(h)), out.head(b, h));
    });
  }

  /// Causal attention of every sequence and head from empty memories.
  void forward_causal(const HeadTensor<const scalar_type>& q, const HeadTensor<const scalar_type>& k,
                      const HeadTensor<const scalar_type>& v, const HeadTensor<scalar_type>& out) const {
    raise("abc::MultiHeadAttention::forward_causal", problem(Form::causal, q, k, v, out, nullptr, no_pool));
    for_each_pair(q.batch(), [&](Index b, Index h) {
      auto s = heads_[std::size_t(h)].make_state(k.dim(), v.dim());
      heads_[std::size_t(h)].forward_causal_into(s, q.head(b, h), k.head(b, kv_head(h)), v.head(b, kv_head(h)),
                                                 out.head(b, h));
    });
  }

  /// Adds sequence `id` with empty memories for keys of width d and values of width dv.
  void add(Pool& pool, SeqId id, Index d, Index dv) const {
    if (pool.contains(id))
      ABC_THROW(config_error("abc::MultiHeadAttention::add: sequence id " + std::to_string(id) +
                             " is already in the pool"));
    std::vector<state_type> s;
    for (const auto& a : heads_) s.push_back(a.make_state(d, dv));
    pool.states_.emplace(id, std::move(s));
  }

  /// Continues the sequences `ids` (sequence b of the tensors is ids[b], each id at most once) by
  /// their tokens: a prefill, or with one token each a batched decode step. Every check (ids,
  /// shapes, every head's state and inputs) runs before any state or output is touched, so a call
  /// that throws changes nothing.
  void forward_causal(Pool& pool, const std::vector<SeqId>& ids, const HeadTensor<const scalar_type>& q,
                      const HeadTensor<const scalar_type>& k, const HeadTensor<const scalar_type>& v,
                      const HeadTensor<scalar_type>& out) const {
    std::vector<std::vector<state_type>*> states;
    raise("abc::MultiHeadAttention::forward_causal", problem(Form::pool, q, k, v, out, &ids, &pool, &states));
    for_each_pair(q.batch(), [&](Index b, Index h) {
      state_type& s = (*states[std::size_t(b)])[std::size_t(h)];
      const attention_type& a = heads_[std::size_t(h)];
      if (q.length(b) == 1)  // a decode step: exactly the step kernel, as a single-sequence decoder runs
        a.step_into(s, q.head(b, h).row(0).transpose(), k.head(b, kv_head(h)).row(0).transpose(),
                    v.head(b, kv_head(h)).row(0).transpose(), out.head(b, h).row(0).transpose());
      else
        a.forward_causal_into(s, q.head(b, h), k.head(b, kv_head(h)), v.head(b, kv_head(h)), out.head(b, h));
    });
  }

  /// The checks of forward(q, k, v, out), without throwing: Status::ok when the call would succeed.
  [[nodiscard]] Status validate(const HeadTensor<const scalar_type>& q, const HeadTensor<const scalar_type>& k,
                                const HeadTensor<const scalar_type>& v, const HeadTensor<scalar_type>& out) const {
    return problem(Form::non_causal, q, k, v, out, nullptr, no_pool).status;
  }
  /// The checks of forward_causal(q, k, v, out), without throwing.
  [[nodiscard]] Status validate_causal(const HeadTensor<const scalar_type>& q, const HeadTensor<const scalar_type>& k,
                                       const HeadTensor<const scalar_type>& v,
                                       const HeadTensor<scalar_type>& out) const {
    return problem(Form::causal, q, k, v, out, nullptr, no_pool).status;
  }
  /// The checks of forward_causal(pool, ids, q, k, v, out), without throwing; nothing is changed.
  [[nodiscard]] Status validate(const Pool& pool, const std::vector<SeqId>& ids, const HeadTensor<const scalar_type>& q,
                                const HeadTensor<const scalar_type>& k, const HeadTensor<const scalar_type>& v,
                                const HeadTensor<scalar_type>& out) const {
    return problem(Form::pool, q, k, v, out, &ids, &pool).status;
  }

 private:
  enum class Form { non_causal, causal, pool };
  static constexpr const Pool* no_pool = nullptr;

  // A failed check: the Problem of the head or tensor at fault (its message built only when thrown),
  // or a message of the multi-head level.
  struct Failure {
    Status status = Status::ok;
    detail::Problem problem;
    std::string message;  // when not empty, the whole message
    explicit operator bool() const noexcept { return status != Status::ok; }
  };

  static void raise(const char* where, const Failure& f) {
    if (!f) return;
    if (f.message.empty()) detail::raise(where, f.problem);
    const std::string m = std::string(where) + ": " + f.message;
    if (f.status == Status::shape_mismatch) ABC_THROW(shape_error(m));
    ABC_THROW(config_error(m));
  }

  // Runs f(b, h) for every (sequence, head) pair, on OpenMP threads when enabled. An exception
  // (only an allocation failure can occur once the checks have passed) never leaves a parallel
  // region: the first is kept and rethrown on the calling thread after the loop.
  template <class F>
  void for_each_pair(Index batch, F&& f) const {
    const Index pairs = batch * heads();
    std::exception_ptr error;
#if defined(ABC_WITH_OPENMP)
#  pragma omp parallel for schedule(dynamic)
#endif
    for (Index i = 0; i < pairs; ++i) {
      try {
        f(i / heads(), i % heads());
      } catch (...) {
#if defined(ABC_WITH_OPENMP)
#  pragma omp critical(abc_multi_head_error)
#endif
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  }

  // Every check of a call, before anything runs. With a pool, `states` (if given) receives each
  // sequence's states.
  template <class PoolT>
  Failure problem(Form form, const HeadTensor<const scalar_type>& q, const HeadTensor<const scalar_type>& k,
                  const HeadTensor<const scalar_type>& v, const HeadTensor<scalar_type>& out,
                  const std::vector<SeqId>* ids, PoolT* pool,
                  std::vector<std::vector<state_type>*>* states = nullptr) const {
    using detail::value_problem;
    Failure f;
    const auto fail = [&f](detail::Problem p) {
      f.status = p.status;
      f.problem = p;
      return f;
    };
    const auto fail_with = [&f](Status s, std::string m) {
      f.status = s;
      f.message = std::move(m);
      return f;
    };
    if (q.heads() != heads()) return fail(value_problem(Status::shape_mismatch, "q.heads()", q.heads(), "", heads(), "one per query head"));
    if (out.heads() != heads()) return fail(value_problem(Status::shape_mismatch, "out.heads()", out.heads(), "", heads(), "one per query head"));
    if (k.heads() != kv_heads_) return fail(value_problem(Status::shape_mismatch, "k.heads()", k.heads(), "", kv_heads_, "one per key/value head"));
    if (v.heads() != kv_heads_) return fail(value_problem(Status::shape_mismatch, "v.heads()", v.heads(), "", kv_heads_, "one per key/value head"));
    if (k.batch() != q.batch()) return fail(value_problem(Status::shape_mismatch, "k.batch()", k.batch(), "", q.batch(), "one key sequence per query sequence"));
    if (v.batch() != q.batch()) return fail(value_problem(Status::shape_mismatch, "v.batch()", v.batch(), "", q.batch(), "one value sequence per query sequence"));
    if (out.batch() != q.batch()) return fail(value_problem(Status::shape_mismatch, "out.batch()", out.batch(), "", q.batch(), "one output sequence per query sequence"));
    if (out.dim() != v.dim()) return fail(value_problem(Status::shape_mismatch, "out.dim()", out.dim(), "", v.dim(), "outputs have the values' width"));
    std::vector<const std::vector<state_type>*> seq_states;
    if (form == Form::pool) {
      if (Index(ids->size()) != q.batch())
        return fail(value_problem(Status::shape_mismatch, "ids.size()", Index(ids->size()), "", q.batch(), "one id per sequence"));
      std::vector<SeqId> sorted(*ids);
      std::sort(sorted.begin(), sorted.end());
      const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
      if (dup != sorted.end())
        return fail_with(Status::bad_config, "ids holds sequence id " + std::to_string(*dup) +
                                                 " twice, expected distinct ids (each sequence advances once per call)");
      for (SeqId id : *ids) {
        if (!pool->contains(id))
          return fail_with(Status::bad_config, "sequence id " + std::to_string(id) + " is not in the pool (add it first)");
        auto& st = pool->find(id);
        if (Index(st.size()) != heads())
          return fail_with(Status::bad_config, "pool sequence " + std::to_string(id) + " holds " + std::to_string(st.size()) +
                                                   " head states, expected " + std::to_string(heads()) +
                                                   " (the pool was filled by another MultiHeadAttention)");
        seq_states.push_back(&st);
        if constexpr (!std::is_const<PoolT>::value)
          if (states) states->push_back(&st);
      }
    }
    for (Index b = 0; b < q.batch(); ++b) {
      if (out.length(b) != q.length(b))
        return fail(value_problem(Status::shape_mismatch, "out.length(b)", out.length(b), "", q.length(b), "one output row per query"));
      for (Index h = 0; h < heads(); ++h) {
        const attention_type& a = heads_[std::size_t(h)];
        const auto kh = k.head(b, kv_head(h));
        const auto vh = v.head(b, kv_head(h));
        const auto qh = q.head(b, h);
        const state_type* st = form == Form::pool ? &(*seq_states[std::size_t(b)])[std::size_t(h)] : nullptr;
        using Mode = typename attention_type::Mode;
        if (auto p = a.check(form == Form::non_causal ? Mode::non_causal : Mode::causal, st, qh, kh, vh, nullptr))
          return fail(p);
      }
    }
    return f;
  }

  std::vector<attention_type> heads_;
  Index kv_heads_;
};

}  // namespace abc
