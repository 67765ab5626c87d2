// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. What the multi-head layers share (MultiHeadAttention and
// select::MultiHeadCache): the pool of per-sequence states, the query-head groups of a memory,
// the checks of a call's sequence ids, and the loop over (sequence, memory) pairs.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <limits>
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

// The rows a long call whose heads' rows lie apart finds finite at a time, for all heads
// (PairChecks::blocks): enough to cover a pass's start, few enough to share among threads.
constexpr Index finite_block_rows = 128;

// The checks of a layer call's (sequence, memory) pairs, as a serial loop in b-major order would
// run them, and the first pair that fails. A call finds its inputs finite in passes over a
// sequence's rows that test all its heads at once, `finite(b, s0, rows)` for tokens [s0, s0 + rows)
// of sequence b (clipped to its length), then runs check(b, m, finite) for each pair (which, with
// finite inputs, need only look at what differs between sequences). How the work is shared:
// - a short call goes a sequence at a time (a decode step's rows are checked faster than they are
//   shared);
// - a long call whose heads' rows lie together, `by_pairs`, checks pair by pair, each pair its own
//   heads (`finite` false), since the pairs are more to share among threads than the sequences;
// - a long call whose heads' rows lie apart goes by `blocks` of rows (b, s0), a block's rows for all
//   heads at once (a pass per head would touch a page per row), then pair by pair with each
//   sequence's verdict.
// A check only reads; one that throws (an allocation while it builds a message) counts as failing
// and is run again on the calling thread by failure(), where it throws: nothing escapes a parallel
// region.
template <class Finite, class Check>
struct PairChecks {
  Index batch, width;
  bool spread;    // a long call's checks, worth a parallel region of their own (validate())
  bool by_pairs;  // see above
  const Finite& finite;
  const Check& check;
  std::vector<std::pair<Index, Index>> blocks = {};  // (b, s0), when the call goes by blocks
  // Whether a block of sequence b found an entry that is not finite (when it goes by blocks).
  mutable std::vector<std::atomic<bool>> spoilt = std::vector<std::atomic<bool>>(blocks.empty() ? 0 : std::size_t(batch));

  static constexpr Index all_rows = std::numeric_limits<Index>::max();

  // Whether sequence b's inputs are finite: its blocks' verdict (found by run()), or one pass over
  // its rows.
  bool sequence_finite(Index b) const {
    if (!blocks.empty()) return !spoilt[std::size_t(b)].load(std::memory_order_relaxed);
    return finite(b, 0, all_rows);
  }

  // Checks the pairs and lowers `first` to the index of the first failing one (b · width + m; it
  // starts at batch · width). With OpenMP, called by every thread of a parallel region, the loop is
  // shared among them, and after it every thread reads the same `first`.
  void run(std::atomic<Index>& first) const {
    const auto fails = [&](Index b, Index m, bool finite_inputs) {
      try {
        return bool(check(b, m, finite_inputs));
      } catch (...) {
        return true;
      }
    };
    const auto lower = [&first](Index i) {
      Index now = first.load(std::memory_order_relaxed);
      while (i < now && !first.compare_exchange_weak(now, i, std::memory_order_relaxed)) {
      }
    };
    if (by_pairs || !blocks.empty()) {
      if (!blocks.empty()) {
#if defined(ABC_WITH_OPENMP)
#  pragma omp for schedule(static)
#endif
        for (Index u = 0; u < Index(blocks.size()); ++u) {
          const auto& [b, s0] = blocks[std::size_t(u)];
          if (!finite(b, s0, finite_block_rows)) spoilt[std::size_t(b)].store(true, std::memory_order_relaxed);
        }
      }
#if defined(ABC_WITH_OPENMP)
#  pragma omp for schedule(static)
#endif
      for (Index i = 0; i < batch * width; ++i)
        if (i < first.load(std::memory_order_relaxed) && fails(i / width, i % width, !by_pairs && sequence_finite(i / width)))
          lower(i);
    } else {
#if defined(ABC_WITH_OPENMP)
#  pragma omp for schedule(static)
#endif
      for (Index b = 0; b < batch; ++b) {
        if (b * width >= first.load(std::memory_order_relaxed)) continue;  // a pair before these failed
        const bool finite_inputs = sequence_finite(b);
        for (Index m = 0; m < width; ++m)
          if (fails(b, m, finite_inputs)) {
            lower(b * width + m);
            break;
          }
      }
    }
  }
  // The failure of pair `first`, found again on the calling thread; none when first is batch · width.
  LayerFailure failure(Index first) const {
    if (first >= batch * width) return {};
    const Index b = first / width;
    return check(b, first % width, !by_pairs && sequence_finite(b));
  }
};

// Whether a long call checks its pairs pair by pair (PairChecks::by_pairs) rather than by blocks
// of rows: where a head's rows lie together ([batch, heads, seq, dim]) a pair reads its heads in
// memory order, and the pairs are more to share among threads than the sequences; where they lie
// apart ([batch, seq, heads, dim]: heads · dim entries apart, a page or more for common sizes), a
// pair's pass would touch a page per row, several times slower than a pass over a block of rows,
// which holds all the sequence's heads together.
template <class Tensor>
bool by_pairs(const Tensor& t, bool spread) noexcept {
  return spread && t.seq_stride() == t.dim();
}

// The PairChecks of a call of `width` memories per sequence whose layout is `t`'s (a tensor every
// pair reads): spread over threads when `spread`, then pair by pair or by blocks as the layout
// says; a sequence's inputs span its first rows(b) tokens.
template <class Tensor, class Finite, class Check, class Rows>
PairChecks<Finite, Check> pair_checks(const Tensor& t, Index width, bool spread, const Finite& finite,
                                      const Check& check, const Rows& rows) {
  const bool pairs = by_pairs(t, spread);
  std::vector<std::pair<Index, Index>> blocks;
  if (spread && !pairs)
    for (Index b = 0; b < t.batch(); ++b)
      for (Index s0 = 0; s0 < rows(b); s0 += finite_block_rows) blocks.emplace_back(b, s0);
  return PairChecks<Finite, Check>{t.batch(), width, spread, pairs, finite, check, std::move(blocks)};
}

// What a layer's checks do with their pairs' checks when the call only checks (validate()): find
// the first failure, with spread checks on OpenMP threads (a short call's are not worth starting a
// parallel region).
struct FirstFailure {
  template <class SequenceFinite, class Check>
  LayerFailure operator()(const PairChecks<SequenceFinite, Check>& checks) const {
    std::atomic<Index> first{checks.batch * checks.width};
#if defined(ABC_WITH_OPENMP)
    if (checks.spread) {
#  pragma omp parallel
      checks.run(first);
      return checks.failure(first.load());
    }
#endif
    for (Index b = 0; b < checks.batch; ++b) {  // PairChecks::run's order, stopping at the first failure
      const bool finite = !checks.by_pairs && checks.finite(b, 0, checks.all_rows);
      for (Index m = 0; m < checks.width; ++m)
        if (LayerFailure f = checks.check(b, m, finite)) return f;
    }
    return {};
  }
};

// What a layer call has its checks do: check the pairs and, when none fails, prepare(b) for every
// sequence (if `prepares`: the control logits a call projects once per sequence), then run(b, m)
// for every pair. With OpenMP all of it is one parallel region: the checks are spread over the
// threads and cost no region of their own (at a decode step a region costs more than the checks),
// and the loops' barriers keep every write after every check, so a failed call has written
// nothing. An exception of prepare or run (only an allocation failure can occur once the checks
// have passed) never leaves the region: the first is kept and rethrown after it; a failed prepare
// runs no pair.
template <class Prepare, class Run>
struct CheckThenRun {
  bool prepares;
  const Prepare& prepare;
  const Run& run;
  template <class SequenceFinite, class Check>
  LayerFailure operator()(const PairChecks<SequenceFinite, Check>& checks) const {
    const Index batch = checks.batch, width = checks.width, pairs = batch * width;
#if defined(ABC_WITH_OPENMP)
    std::atomic<Index> first{pairs};
    std::exception_ptr error;
    std::atomic<bool> failed_prepare{false};
    const auto keep = [&error] {
#  pragma omp critical(abc_multi_head_error)
      if (!error) error = std::current_exception();
    };
#  pragma omp parallel
    {
      checks.run(first);
      // The checks' loop and its barrier have passed: every thread reads the same `first`.
      if (first.load(std::memory_order_relaxed) == pairs) {
        if (prepares) {
#  pragma omp for schedule(static)
          for (Index b = 0; b < batch; ++b) {
            try {
              prepare(b);
            } catch (...) {
              failed_prepare.store(true, std::memory_order_relaxed);
              keep();
            }
          }
        }
        if (!failed_prepare.load(std::memory_order_relaxed)) {
          // No barrier of its own: the region's end is one.
#  pragma omp for schedule(static) nowait
          for (Index i = 0; i < pairs; ++i) {
            try {
              run(i / width, i % width);
            } catch (...) {
              keep();
            }
          }
        }
      }
    }
    if (error) std::rethrow_exception(error);
    return checks.failure(first.load());
#else
    if (LayerFailure f = FirstFailure{}(checks)) return f;
    if (prepares)
      for (Index b = 0; b < batch; ++b) prepare(b);
    for (Index i = 0; i < pairs; ++i) run(i / width, i % width);
    return {};
#endif
  }
};

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
