// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. What the multi-head layers share (MultiHeadAttention and
// select::MultiHeadCache): the pool of per-sequence states, the query-head groups of a memory,
// the checks of a call's sequence ids, and the loop over (sequence, memory) pairs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../types.hpp"
#include "check.hpp"

ABC_NAMESPACE_BEGIN
namespace detail {

// A failed check of a layer call: the Problem of the head or tensor at fault (its message built
// only when thrown), or a message of the layer itself.
struct LayerFailure {
  Status status = Status::ok;
  Problem problem;
  std::string message;  // when not empty, the whole message
  explicit operator bool() const noexcept { return status != Status::ok; }
};

inline LayerFailure layer_failure(const Problem& p) { return {p.status, p, {}}; }

inline LayerFailure layer_failure(Status status, std::string message) { return {status, Problem{}, std::move(message)}; }

// Sequence b's output rows against its queries: the message names b, one of many sequences.
inline LayerFailure length_failure(Index b, Index out_length, Index q_length) {
  return layer_failure(Status::shape_mismatch, "out.length(" + std::to_string(b) + ") is " + std::to_string(out_length) +
                                                   ", expected " + std::to_string(q_length) + " (one output row per query)");
}

inline void raise(const char* where, const LayerFailure& f) {
  if (!f) return;
  if (f.message.empty()) raise(where, f.problem);
  const std::string m = std::string(where) + ": " + f.message;
  if (f.status == Status::shape_mismatch) ABC_THROW(shape_error(m));
  ABC_THROW(config_error(m));
}

// The query heads that read one memory: [first, first + count), iterable.
struct HeadGroup {
  Index first;  // the first query head
  Index count;  // the number of query heads
  struct It {
    Index h;
    Index operator*() const noexcept { return h; }
    It& operator++() noexcept { return ++h, *this; }
    bool operator!=(const It& o) const noexcept { return h != o.h; }
  };
  It begin() const noexcept { return {first}; }
  It end() const noexcept { return {first + count}; }
};

// Memory m's query heads: itself when every query head has its own memory, else its key/value
// head's group of heads / kv_heads.
inline HeadGroup head_group(Index m, Index memories, Index heads, Index kv_heads) noexcept {
  return memories == heads ? HeadGroup{m, 1} : HeadGroup{m * (heads / kv_heads), heads / kv_heads};
}

// Runs f(b, m) for b < batch, m < width, on OpenMP threads when enabled. An exception (only an
// allocation failure can occur once a layer's checks have passed) never leaves the parallel
// region: the first is kept and rethrown on the calling thread after the loop.
template <class F>
void for_each_pair(Index batch, Index width, F&& f) {
  const Index pairs = batch * width;
  std::exception_ptr error;
#if defined(ABC_WITH_OPENMP)
#  pragma omp parallel for schedule(static)
#endif
  for (Index i = 0; i < pairs; ++i) {
    try {
      f(i / width, i % width);
    } catch (...) {
#if defined(ABC_WITH_OPENMP)
#  pragma omp critical(abc_multi_head_error)
#endif
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// The failure of the first (b, m) pair, b < batch and m < width in b-major order, whose
// `check(b, m)` fails, or none: what a serial loop over the pairs would report, with the pairs
// checked on OpenMP threads when enabled and `parallel` (a check reads every input, so a long
// call's checks are worth spreading; a decode step's are not worth a parallel region). A check
// only reads. One that throws (an allocation while it builds a message) counts as failing, and is
// run again on the calling thread, where it throws: nothing escapes the parallel region.
template <class Check>
LayerFailure first_failure(Index batch, Index width, bool parallel, const Check& check) {
  const Index pairs = batch * width;
#if defined(ABC_WITH_OPENMP)
  if (parallel) {  // not even a one-thread region otherwise: starting one costs a decode step's checks
    Index first = pairs;
#  pragma omp parallel for schedule(static) reduction(min : first)
    for (Index i = 0; i < pairs; ++i) {
      if (i > first) continue;  // a pair before it failed already (on this thread)
      bool failed = true;
      try {
        failed = bool(check(i / width, i % width));
      } catch (...) {
      }
      if (failed) first = i;
    }
    return first < pairs ? check(first / width, first % width) : LayerFailure{};
  }
#endif
  (void)parallel;
  for (Index i = 0; i < pairs; ++i)
    if (LayerFailure f = check(i / width, i % width)) return f;
  return {};
}

// Whether a call's checks are worth spreading over threads: each (sequence, memory) pair checks
// `heads_per_pair` heads of `t`'s shape over a sequence's mean length, and a decode step's few rows
// are checked faster than a parallel region starts.
template <class Tensor>
bool spread_checks(const Tensor& t, Index heads_per_pair) noexcept {
  if (t.batch() == 0) return false;
  Index rows = 0;  // fits: the tensor's element count does
  for (Index b = 0; b < t.batch(); ++b) rows += t.length(b);
  return rows / t.batch() * t.dim() * heads_per_pair >= (Index(1) << 14);
}

// The door ids_problem finds a pool's states by.
struct SequencePoolAccess {
  // The states of sequence `id`, or null when the pool has none: one lookup.
  template <class Pool>
  static auto* find_if(Pool& pool, std::uint64_t id) {
    const auto it = pool.states_.find(id);
    return it == pool.states_.end() ? nullptr : &it->second;
  }
};

/**
 * The decode states of many sequences, addressed by a caller's id: one state per memory each. The
 * states are handed out read-only: only the layer that added a sequence (`Owner`) changes them.
 * `Owner::pool_name()` names the pool in messages.
 */
template <class State, class Owner>
class SequencePool {
 public:
  /// A sequence's id, chosen by the caller.
  using SeqId = std::uint64_t;
  /// Whether sequence `id` is in the pool.
  bool contains(SeqId id) const { return states_.count(id) != 0; }
  /// The number of sequences in the pool.
  std::size_t size() const noexcept { return states_.size(); }
  /// The states of sequence `id`, one per memory. \throws config_error for an unknown id.
  const std::vector<State>& states(SeqId id) const { return find(id); }
  /// Removes sequence `id` and its states; an id not in the pool is ignored.
  void drop(SeqId id) { states_.erase(id); }
  /// Sequence `id` back to empty states at position 0.
  void reset(SeqId id) {
    for (auto& s : find(id)) s.reset();
  }
  /// Bytes of memory all the states hold (their bytes() summed).
  std::size_t bytes() const noexcept {
    std::size_t b = 0;
    for (const auto& kv : states_)
      for (const auto& s : kv.second) b += s.bytes();
    return b;
  }

 private:
  friend Owner;
  friend struct SequencePoolAccess;
  std::vector<State>& find(SeqId id) {
    const auto it = states_.find(id);
    if (it == states_.end()) unknown(id);
    return it->second;
  }
  const std::vector<State>& find(SeqId id) const {
    const auto it = states_.find(id);
    if (it == states_.end()) unknown(id);
    return it->second;
  }
  [[noreturn]] static void unknown(SeqId id) {
    ABC_THROW(config_error(std::string(Owner::pool_name()) + ": sequence id " + std::to_string(id) +
                           " is not in the pool (add it first)"));
  }
  std::map<SeqId, std::vector<State>> states_;
};

// The smallest id that `ids` holds more than once, or null. A decode batch is short, so small
// ones are compared pairwise (no allocation on every step); long ones are sorted.
inline const std::uint64_t* smallest_repeat(const std::vector<std::uint64_t>& ids) {
  const std::uint64_t* found = nullptr;
  if (ids.size() <= 64) {
    for (std::size_t i = 0; i < ids.size(); ++i)
      for (std::size_t j = i + 1; j < ids.size(); ++j)
        if (ids[i] == ids[j] && (!found || ids[i] < *found)) found = &ids[i];
    return found;
  }
  std::vector<std::uint64_t> sorted(ids);
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) found = &*std::find(ids.begin(), ids.end(), *dup);
  return found;
}

// What a call does with its sequence ids: continue sequences in the pool (each once), read them
// (an id may repeat), or add new ones.
enum class IdUse { advance, read, add };

// The checks of a layer call's sequence ids: one per sequence, distinct unless read, and in the
// pool (`seq_states` receives each one's states, which must number `memories`) or, to add, not
// yet in it. `owner` names the layer in the message of a pool filled by another one.
template <class PoolT, class States>
// NOLINTNEXTLINE(bugprone-easily-swappable-parameters): private
LayerFailure ids_problem(IdUse use, PoolT& pool, const std::vector<std::uint64_t>& ids, Index batch, Index memories,
                         const char* owner, States& seq_states) {
  if (Index(ids.size()) != batch)
    return layer_failure(value_problem(Status::shape_mismatch, "ids.size()", Index(ids.size()), "", batch,
                                       "one id per sequence"));
  const auto config = [](std::string m) { return layer_failure(Status::bad_config, std::move(m)); };
  if (use != IdUse::read)
    if (const std::uint64_t* dup = smallest_repeat(ids))
      return config("ids holds sequence id " + std::to_string(*dup) +
                    " twice, expected distinct ids (each sequence advances once per call)");
  seq_states.reserve(ids.size());
  for (std::uint64_t id : ids) {
    if (use == IdUse::add) {
      if (pool.contains(id)) return config("sequence id " + std::to_string(id) + " is already in the pool (drop it first)");
      continue;
    }
    auto* st = SequencePoolAccess::find_if(pool, id);
    if (!st) return config("sequence id " + std::to_string(id) + " is not in the pool (add it first)");
    if (Index(st->size()) != memories)
      return config("pool sequence " + std::to_string(id) + " holds " + std::to_string(st->size()) +
                    " states, expected " + std::to_string(memories) + " (the pool was filled by another " + owner +
                    ")");
    seq_states.push_back(st);
  }
  return {};
}

}  // namespace detail
ABC_NAMESPACE_END
