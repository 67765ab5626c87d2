// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. select::MultiHeadCache: a KV-cache operator (KvCacheAttention with
// any policy, or TramsAttention) over every head and sequence of a batch, with grouped-query heads
// sharing one cache, and a Pool of caches for batched decoding.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../detail/check.hpp"
#include "../detail/head_layer.hpp"
#include "../detail/segment_check.hpp"
#include "../error.hpp"
#include "../head_tensor.hpp"
#include "../types.hpp"
#include "kv_cache_attention.hpp"
#include "trams_attention.hpp"

ABC_NAMESPACE_BEGIN
namespace select {

/**
 * \brief A KV-cache operator over every (sequence, head) of a batch, in the layouts transformers
 * use: `MultiHeadCache<HeavyHitterAttention<float>>`, `MultiHeadCache<TramsAttention<float>>`.
 *
 * Inputs are HeadTensor views (bshd, bhsd, strided, or packed variable-length): q [batch, seq,
 * heads, d], k [batch, seq, kv_heads, d], v [batch, seq, kv_heads, dv], out [batch, seq, heads,
 * dv]. Query head h reads key/value head h / (heads / kv_heads).
 *
 * **Caches.** With one attention shared by all heads, or one per key/value head, the heads /
 * kv_heads query heads of a group share one cache per sequence (grouped-query attention keeps
 * kv_heads caches, not heads). Each of them reads the cache exactly as a single head would; the
 * policy then scores the tokens from the group's mean probabilities (the sum over the group's
 * heads in order, divided by their count), so one cache keeps what the whole group attended to.
 * With one head per group (kv_heads = heads), every output and every cache equals the
 * single-head operator's bit for bit. TRAMS scores keys, not reads, so its groups need no mean.
 * With one attention per query head, each query head keeps a cache of its own, written from its
 * key/value head.
 *
 * Every check (shapes, ids, every cache and input) runs before anything is written, so a call that
 * throws changes nothing. With ABC_WITH_OPENMP the (sequence × cache) pairs run in parallel, and
 * no exception leaves the parallel region.
 *
 * Decoding keeps a Pool: per sequence id, one cache per memory(). `forward_causal(pool, ids, ...)`
 * continues each listed sequence by its tokens (a prefill, or one token each: a batched step, which
 * allocates nothing).
 *
 * \tparam Attention KvCacheAttention<Policy> or TramsAttention<T>.
 */
template <class Attention>
class MultiHeadCache {
  using T = typename Attention::scalar_type;
  using Tensor = HeadTensor<const T>;

 public:
  /// float or double.
  using scalar_type = T;
  /// The single-head operator of each cache.
  using attention_type = Attention;
  /// The cache of one sequence and memory.
  using state_type = typename Attention::State;
  /// A sequence's id in a Pool, chosen by the caller.
  using SeqId = std::uint64_t;
  /// The caches of many sequences, addressed by id: one per memory each (contains, size,
  /// states(id), drop, reset, bytes). Only the MultiHeadCache that added a sequence changes them.
  using Pool = detail::SequencePool<state_type, MultiHeadCache>;

  /// One attention shared by all heads: `heads` query heads over `kv_heads` key/value heads
  /// (kv_heads divides heads), one cache per key/value head.
  MultiHeadCache(const Attention& shared, Index heads, Index kv_heads)
      : MultiHeadCache(std::vector<Attention>(std::size_t(std::max<Index>(kv_heads, 0)), shared), heads, kv_heads) {}

  /// One attention per memory: kv_heads of them (their query heads share its caches) or heads of
  /// them (each query head keeps caches of its own).
  MultiHeadCache(std::vector<Attention> per_memory, Index heads, Index kv_heads)
      : memories_(std::move(per_memory)), heads_(heads), kv_heads_(kv_heads) {
    constexpr const char* who = "abc::select::MultiHeadCache";
    if (heads < 1) detail::raise(who, detail::at_least(Status::bad_config, "heads", heads, 1, "at least one head"));
    if (kv_heads < 1)
      detail::raise(who, detail::at_least(Status::bad_config, "kv_heads", kv_heads, 1, "at least one key/value head"));
    if (heads % kv_heads != 0)
      detail::raise(who, detail::value_problem(Status::bad_config, "heads % kv_heads", heads % kv_heads, "", 0,
                                               "kv_heads must divide heads"));
    const Index m = Index(memories_.size());
    if (m != kv_heads && m != heads)
      ABC_THROW(config_error(std::string(who) + ": attentions.size() is " + std::to_string(m) + ", expected " +
                             std::to_string(kv_heads) + " (one per key/value head) or " + std::to_string(heads) +
                             " (one per query head)"));
  }

  /// The number of query heads.
  Index heads() const noexcept { return heads_; }
  /// The number of key/value heads; it divides heads().
  Index kv_heads() const noexcept { return kv_heads_; }
  /// The caches per sequence: kv_heads() when the attentions belong to key/value heads, heads()
  /// when each query head has its own.
  Index memories() const noexcept { return Index(memories_.size()); }
  /// The key/value head query head h reads.
  Index kv_head(Index h) const noexcept { return h / (heads_ / kv_heads_); }
  /// The memory (cache) query head h reads; unchecked: 0 ≤ h < heads().
  Index memory_of(Index h) const noexcept { return memories() == heads_ ? h : kv_head(h); }
  /// The attention of memory m; unchecked: 0 ≤ m < memories().
  const Attention& memory(Index m) const { return memories_[std::size_t(m)]; }

  /// Causal attention of every sequence and head, each from empty caches (a prompt read through
  /// the cache's budget, as the single-head segment() reads it).
  void forward_causal(const Tensor& q, const Tensor& k, const Tensor& v, const HeadTensor<T>& out) const {
    run("abc::select::MultiHeadCache::forward_causal", nullptr, nullptr, q, k, v, out);
  }

  /// Adds sequence `id` with empty caches for keys of width d and values of width dv.
  /// \throws config_error if the id is in the pool, or as the attention's make_state(d, dv).
  void add(Pool& pool, SeqId id, Index d, Index dv) const {
    constexpr const char* who = "abc::select::MultiHeadCache::add";
    if (pool.contains(id))
      ABC_THROW(config_error(std::string(who) + ": sequence id " + std::to_string(id) +
                             " is already in the pool (drop it first)"));
    for (const Attention& a : memories_)  // each: per-head attentions may differ in budget or rope
      if (auto p = a.make_problem(d, dv)) detail::raise(who, p);
    std::vector<state_type> s;
    for (const auto& a : memories_) {
      s.push_back(a.make_state(d, dv));
      Attention::prepare_heads(s.back(), group(0).count);
    }
    pool.states_.emplace(id, std::move(s));
  }

  /// Continues the sequences `ids` (sequence b of the tensors is ids[b], each id at most once) by
  /// their tokens: a prefill, or with one token each a batched decode step. Every check runs
  /// before any cache or output is touched, so a call that throws changes nothing.
  void forward_causal(Pool& pool, const std::vector<SeqId>& ids, const Tensor& q, const Tensor& k, const Tensor& v,
                      const HeadTensor<T>& out) const {
    run("abc::select::MultiHeadCache::forward_causal", &pool, &ids, q, k, v, out);
  }

  /// The checks of forward_causal(q, k, v, out), without throwing: Status::ok when it would succeed.
  [[nodiscard]] Status validate_causal(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const HeadTensor<T>& out) const {
    std::vector<const std::vector<state_type>*> none;
    return problem<const Pool>(nullptr, nullptr, q, k, v, out, none).status;
  }
  /// The checks of forward_causal(pool, ids, q, k, v, out), without throwing; nothing is changed.
  [[nodiscard]] Status validate(const Pool& pool, const std::vector<SeqId>& ids, const Tensor& q, const Tensor& k,
                                const Tensor& v, const HeadTensor<T>& out) const {
    std::vector<const std::vector<state_type>*> none;
    return problem(&pool, &ids, q, k, v, out, none).status;
  }

 private:
  friend Pool;
  static const char* pool_name() noexcept { return "abc::select::MultiHeadCache::Pool"; }

  detail::HeadGroup group(Index m) const noexcept { return detail::head_group(m, memories(), heads_, kv_heads_); }
  // The key/value head memory m is written from.
  Index kv_of(Index m) const noexcept { return memories() == heads_ ? kv_head(m) : m; }

  void run(const char* where, Pool* pool, const std::vector<SeqId>* ids, const Tensor& q, const Tensor& k,
           const Tensor& v, const HeadTensor<T>& out) const {
    std::vector<std::vector<state_type>*> states;  // filled by the checks, before any pair runs
    const auto pair = [&](Index b, Index m) {
      const Attention& a = memories_[std::size_t(m)];
      const detail::HeadGroup g = group(m);
      const auto query = [&](Index i) { return q.head(b, g.first + i); };
      const auto output = [&](Index i) { return out.head(b, g.first + i); };
      if (pool) {
        a.advance((*states[std::size_t(b)])[std::size_t(m)], g.count, query, output, k.head(b, kv_of(m)),
                  v.head(b, kv_of(m)));
      } else {
        state_type s = a.make_state(k.dim(), v.dim());
        a.advance(s, g.count, query, output, k.head(b, kv_of(m)), v.head(b, kv_of(m)));
      }
    };
    const auto none = [](Index) {};
    using Then = detail::CheckThenRun<decltype(none), decltype(pair)>;
    detail::raise(where, problem(pool, ids, q, k, v, out, states, Then{false, none, pair}));
  }

  // Every check of a call, before anything runs: the whole call's here, the pairs' handed to `then`
  // (detail::FirstFailure, or a detail::CheckThenRun that runs the pairs once they pass); with a
  // pool, `states` receives each sequence's before `then` is called.
  template <class PoolT, class Held, class Then = detail::FirstFailure>
  detail::LayerFailure problem(PoolT* pool, const std::vector<SeqId>* ids, const Tensor& q, const Tensor& k,
                               const Tensor& v, const HeadTensor<T>& out, std::vector<Held*>& states,
                               const Then& then = {}) const {
    using detail::layer_failure;
    using detail::value_problem;
    const Status shape = Status::shape_mismatch;
    if (q.heads() != heads_) return layer_failure(value_problem(shape, "q.heads()", q.heads(), "", heads_, "one per query head"));
    if (out.heads() != heads_) return layer_failure(value_problem(shape, "out.heads()", out.heads(), "", heads_, "one per query head"));
    if (k.heads() != kv_heads_) return layer_failure(value_problem(shape, "k.heads()", k.heads(), "", kv_heads_, "one per key/value head"));
    if (v.heads() != kv_heads_) return layer_failure(value_problem(shape, "v.heads()", v.heads(), "", kv_heads_, "one per key/value head"));
    if (k.batch() != q.batch()) return layer_failure(value_problem(shape, "k.batch()", k.batch(), "", q.batch(), "one key sequence per query sequence"));
    if (v.batch() != q.batch()) return layer_failure(value_problem(shape, "v.batch()", v.batch(), "", q.batch(), "one value sequence per query sequence"));
    if (out.batch() != q.batch()) return layer_failure(value_problem(shape, "out.batch()", out.batch(), "", q.batch(), "one output sequence per query sequence"));
    if (pool) {
      if (auto f = detail::ids_problem(detail::IdUse::advance, *pool, *ids, q.batch(), memories(), "MultiHeadCache",
                                       states))
        return f;
    } else {
      for (const Attention& a : memories_)
        if (auto p = a.make_problem(k.dim(), v.dim())) return layer_failure(p);
    }
    const bool spread = detail::spread_checks(q, heads_ / memories() + 2);  // the group's q, k and v
    // As MultiHeadAttention: a short call checks finiteness once per tensor and sequence.
    const auto rows_finite = [&](Index b, Index s0, Index rows) {
      return q.rows_finite(b, s0, rows) && k.rows_finite(b, s0, rows) && v.rows_finite(b, s0, rows);
    };
    const auto rows = [&](Index b) { return std::max({q.length(b), k.length(b), v.length(b)}); };
    const auto check = [&](Index b, Index m, bool finite) -> detail::LayerFailure {
      if (m == 0 && out.length(b) != q.length(b)) return detail::length_failure(b, out.length(b), q.length(b));
      const Attention& a = memories_[std::size_t(m)];
      const detail::HeadGroup g = group(m);
      const MatrixRef<T> qh = q.head(b, g.first), kh = k.head(b, kv_of(m)), vh = v.head(b, kv_of(m));
      const detail::Problem p =
          pool ? a.check((*states[std::size_t(b)])[std::size_t(m)], qh, kh, vh, out.length(b), out.dim(), false, finite)
               : detail::segment_problem(qh, kh, vh, out.length(b), out.dim(), k.dim(), v.dim(), false, finite);
      if (p) return layer_failure(p);
      if (!finite)
        for (Index h = g.first + 1; h < g.first + g.count; ++h)
          if (auto f = detail::finite_problem("q", q.head(b, h))) return layer_failure(f);
      return {};
    };
    return then(detail::pair_checks(q, memories(), spread, rows_finite, check, rows));
  }

  std::vector<Attention> memories_;
  Index heads_, kv_heads_;
};

}  // namespace select
ABC_NAMESPACE_END
