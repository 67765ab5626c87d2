// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::MultiHeadAttention: many heads and sequences over strided buffers.
#pragma once

#include <cstdint>
#include <map>
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
 * before, so an error is thrown on the calling thread and nothing has been written.
 *
 * Decoding keeps a Pool: per sequence id, one State per head; `forward_causal(pool, ids, ...)`
 * continues each listed sequence by its tokens (prefill, or one token each: a batched step, which
 * runs each sequence through exactly BoundedAttention::step).
 */
template <class Control>
class MultiHeadAttention {
 public:
  using scalar_type = typename Control::scalar_type;
  using attention_type = BoundedAttention<Control>;
  using state_type = State<scalar_type>;
  using SeqId = std::uint64_t;

  /// The decode states of many sequences, addressed by id: one State per head each.
  class Pool {
   public:
    bool contains(SeqId id) const { return states_.count(id) != 0; }
    std::size_t size() const noexcept { return states_.size(); }
    /// The states of sequence `id`, one per head. \throws config_error for an unknown id.
    const std::vector<state_type>& states(SeqId id) const { return find(id); }
    std::vector<state_type>& states(SeqId id) { return const_cast<std::vector<state_type>&>(std::as_const(*this).find(id)); }
    void drop(SeqId id) { states_.erase(id); }
    void reset(SeqId id) {
      for (auto& s : states(id)) s.reset();
    }
    std::size_t bytes() const noexcept {
      std::size_t b = 0;
      for (const auto& kv : states_)
        for (const auto& s : kv.second) b += s.bytes();
      return b;
    }

   private:
    friend class MultiHeadAttention;
    const std::vector<state_type>& find(SeqId id) const {
      const auto it = states_.find(id);
      if (it == states_.end())
        detail::raise("abc::MultiHeadAttention::Pool", detail::value_problem(Status::bad_config, "sequence id",
                                                                             Index(id), "", 0, "no such sequence in the pool"));
      return it->second;
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

  Index heads() const noexcept { return Index(heads_.size()); }
  Index kv_heads() const noexcept { return kv_heads_; }
  const attention_type& head(Index h) const { return heads_[std::size_t(h)]; }
  /// The key/value head query head h reads.
  Index kv_head(Index h) const noexcept { return h / (heads() / kv_heads_); }

  /// Non-causal / cross attention of every sequence and head.
  void forward(const HeadTensor<const scalar_type>& q, const HeadTensor<const scalar_type>& k,
               const HeadTensor<const scalar_type>& v, const HeadTensor<scalar_type>& out) const {
    check_tensors("abc::MultiHeadAttention::forward", q, k, v, out, false, nullptr, nullptr);
    for_each_pair(q.batch(), [&](Index b, Index h) {
      heads_[std::size_t(h)].forward_into(q.head(b, h), k.head(b, kv_head(h)), v.head(b, kv_head(h)), out.head(b, h));
    });
  }

  /// Causal attention of every sequence and head from empty memories.
  void forward_causal(const HeadTensor<const scalar_type>& q, const HeadTensor<const scalar_type>& k,
                      const HeadTensor<const scalar_type>& v, const HeadTensor<scalar_type>& out) const {
    check_tensors("abc::MultiHeadAttention::forward_causal", q, k, v, out, true, nullptr, nullptr);
    for_each_pair(q.batch(), [&](Index b, Index h) {
      auto s = heads_[std::size_t(h)].make_state(k.dim(), v.dim());
      heads_[std::size_t(h)].forward_causal_into(s, q.head(b, h), k.head(b, kv_head(h)), v.head(b, kv_head(h)),
                                                 out.head(b, h));
    });
  }

  /// Adds sequence `id` with empty memories for keys of width d and values of width dv.
  void add(Pool& pool, SeqId id, Index d, Index dv) const {
    if (pool.contains(id))
      detail::raise("abc::MultiHeadAttention::add", detail::value_problem(Status::bad_config, "sequence id", Index(id), "", 0,
                                                                          "the id is already in the pool"));
    std::vector<state_type> s;
    for (const auto& a : heads_) s.push_back(a.make_state(d, dv));
    pool.states_.emplace(id, std::move(s));
  }

  /// Continues the sequences `ids` (sequence b of the tensors is ids[b]) by their tokens: a prefill,
  /// or with one token each a batched decode step. Nothing changes if any check fails.
  void forward_causal(Pool& pool, const std::vector<SeqId>& ids, const HeadTensor<const scalar_type>& q,
                      const HeadTensor<const scalar_type>& k, const HeadTensor<const scalar_type>& v,
                      const HeadTensor<scalar_type>& out) const {
    std::vector<std::vector<state_type>*> states;
    for (SeqId id : ids) states.push_back(&pool.states(id));
    check_tensors("abc::MultiHeadAttention::forward_causal", q, k, v, out, true, &ids, &states);
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

 private:
  template <class F>
  void for_each_pair(Index batch, F&& f) const {
    const Index pairs = batch * heads();
#if defined(ABC_WITH_OPENMP)
#  pragma omp parallel for schedule(dynamic)
#endif
    for (Index i = 0; i < pairs; ++i) f(i / heads(), i % heads());
  }

  void check_tensors(const char* where, const HeadTensor<const scalar_type>& q, const HeadTensor<const scalar_type>& k,
                     const HeadTensor<const scalar_type>& v, const HeadTensor<scalar_type>& out, bool causal,
                     const std::vector<SeqId>* ids, const std::vector<std::vector<state_type>*>* states) const {
    using detail::value_problem;
    detail::Problem p;
    if (q.heads() != heads()) p = value_problem(Status::shape_mismatch, "q.heads()", q.heads(), "", heads(), "one per query head");
    else if (out.heads() != heads()) p = value_problem(Status::shape_mismatch, "out.heads()", out.heads(), "", heads(), "one per query head");
    else if (k.heads() != kv_heads_) p = value_problem(Status::shape_mismatch, "k.heads()", k.heads(), "", kv_heads_, "one per key/value head");
    else if (v.heads() != kv_heads_) p = value_problem(Status::shape_mismatch, "v.heads()", v.heads(), "", kv_heads_, "one per key/value head");
    else if (k.batch() != q.batch()) p = value_problem(Status::shape_mismatch, "k.batch()", k.batch(), "", q.batch(), "one key sequence per query sequence");
    else if (v.batch() != q.batch()) p = value_problem(Status::shape_mismatch, "v.batch()", v.batch(), "", q.batch(), "one value sequence per query sequence");
    else if (out.batch() != q.batch()) p = value_problem(Status::shape_mismatch, "out.batch()", out.batch(), "", q.batch(), "one output sequence per query sequence");
    else if (ids && Index(ids->size()) != q.batch()) p = value_problem(Status::shape_mismatch, "ids.size()", Index(ids->size()), "", q.batch(), "one id per sequence");
    if (p) detail::raise(where, p);
    for (Index b = 0; b < q.batch(); ++b) {
      if (out.length(b) != q.length(b))
        detail::raise(where, value_problem(Status::shape_mismatch, "out.length(b)", out.length(b), "", q.length(b), "one output row per query"));
      for (Index h = 0; h < heads(); ++h) {
        const attention_type& a = heads_[std::size_t(h)];
        const auto qh = q.head(b, h);
        const auto kh = k.head(b, kv_head(h));
        const auto vh = v.head(b, kv_head(h));
        Status s = Status::ok;
        if (states)
          s = a.validate((*(*states)[std::size_t(b)])[std::size_t(h)], qh, kh, vh);
        else if (causal)
          s = a.validate(a.make_state(k.dim(), v.dim()), qh, kh, vh);
        else
          s = a.validate(qh, kh, vh);
        if (s == Status::ok && out.dim() != v.dim())
          detail::raise(where, value_problem(Status::shape_mismatch, "out.dim()", out.dim(), "", v.dim(), "outputs have the values' width"));
        if (s != Status::ok) {
          // Re-run the failing call's checks to throw its message (they fail before touching state).
          state_type scratch = a.make_state(std::max<Index>(k.dim(), 1), std::max<Index>(v.dim(), 1));
          Matrix<scalar_type> sink(qh.rows(), vh.cols());
          if (states) {
            state_type copy = (*(*states)[std::size_t(b)])[std::size_t(h)];
            a.forward_causal_into(copy, qh, kh, vh, sink);
          } else if (causal) {
            a.forward_causal_into(scratch, qh, kh, vh, sink);
          } else {
            a.forward_into(qh, kh, vh, sink);
          }
        }
      }
    }
  }

  std::vector<attention_type> heads_;
  Index kv_heads_;
};

}  // namespace abc
