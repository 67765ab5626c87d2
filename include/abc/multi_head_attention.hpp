// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. abc::MultiHeadAttention: many heads and sequences over strided buffers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bounded_attention.hpp"
#include "detail/attention_check.hpp"
#include "detail/check.hpp"
#include "detail/control_check.hpp"
#include "detail/head_layer.hpp"
#include "detail/project.hpp"
#include "detail/state_access.hpp"
#include "head_tensor.hpp"
#include "kernel/engine.hpp"

ABC_NAMESPACE_BEGIN

/**
 * \brief BoundedAttention over every (sequence, head) of a batch, in the layouts transformers use.
 *
 * Inputs are HeadTensor views: q [batch, seq_q, heads, d], k [batch, seq_k, kv_heads, d],
 * v [batch, seq_k, kv_heads, dv], out [batch, seq_q, heads, dv], in any of the bshd, bhsd or
 * packed (variable-length) layouts; nothing is copied or padded. Grouped-query attention: query
 * head h reads key/value head h / (heads / kv_heads).
 *
 * **Memories.** A memory is written by one control from one key/value head. When the controls
 * belong to the key/value heads (one control shared by all, or one per key/value head), the
 * heads / kv_heads query heads of a group read one memory: it is built once and a decode state
 * holds kv_heads memories per sequence, not heads. With one control per query head (each its own
 * W_φ, say) every query head keeps a memory of its own, heads / kv_heads times the state and the
 * build work. Either way each query head's output equals a single-head BoundedAttention call on
 * its own memory bit for bit.
 *
 * **Control input.** Every form takes an optional control input x (the layer input, which ABC-MLP's
 * W_φ and RFA's gate read): a HeadTensor [batch, seq_k, 1, d_x] shared by all memories (the papers'
 * case), or [batch, seq_k, memories(), d_x], one per memory. Without it each control reads its
 * keys. With a shared x and a control that reads x through a projection (ABC-MLP's W_φ), the logits
 * of all memories are one product X · [W¹; …; Wᴹ]ᵀ per sequence, not one per memory.
 *
 * With ABC_WITH_OPENMP the (sequence × memory) pairs run in parallel, in one parallel region per
 * call: each thread first checks its share of the pairs, and only when every pair has passed does
 * any thread write, so an error is thrown on the calling thread and nothing has been written, and
 * no exception ever leaves a parallel region.
 *
 * Decoding keeps a Pool: per sequence id, one State per memory; `forward_causal(pool, ids, ...)`
 * continues each listed sequence by its tokens (prefill, or one token each: a batched step, which
 * runs each sequence through exactly BoundedAttention::step). Cross attention builds a source's
 * memories once with `add_memory(pool, ids, k, v)` and reads them with `read(pool, ids, q, out)`.
 */
template <class Control>
class MultiHeadAttention {
  using T = typename Control::scalar_type;
  using Tensor = HeadTensor<const T>;

 public:
  /// The control's scalar type, float or double.
  using scalar_type = T;
  /// The single-head operator of each memory.
  using attention_type = BoundedAttention<Control>;
  /// The decode state of one sequence and memory.
  using state_type = State<scalar_type>;
  /// A sequence's id in a Pool, chosen by the caller.
  using SeqId = std::uint64_t;

  /// The decode states of many sequences, addressed by id: one State per memory each
  /// (contains, size, states(id), drop, reset, bytes). The states are handed out read-only: only
  /// the MultiHeadAttention that added a sequence changes them.
  using Pool = detail::SequencePool<state_type, MultiHeadAttention>;

  /// One control shared by all heads: `heads` query heads over `kv_heads` key/value heads
  /// (kv_heads divides heads), one memory per key/value head.
  MultiHeadAttention(const Control& shared, Index heads, Index kv_heads, Options options = {})
      : MultiHeadAttention(std::vector<Control>(std::size_t(std::max<Index>(kv_heads, 0)), shared), heads, kv_heads,
                           options) {}

  /// One control per memory: `controls` holds kv_heads controls (one per key/value head, whose query
  /// heads share its memory) or heads controls (one per query head, each with a memory of its own).
  MultiHeadAttention(const std::vector<Control>& controls, Index heads, Index kv_heads, Options options = {})
      : heads_(heads), kv_heads_(kv_heads) {
    constexpr const char* who = "abc::MultiHeadAttention";
    detail::require_at_least(who, "heads", heads, 1, "at least one head");
    detail::require_at_least(who, "kv_heads", kv_heads, 1, "at least one key/value head");
    if (heads % kv_heads != 0)
      detail::raise(who, detail::value_problem(Status::bad_config, "heads % kv_heads", heads % kv_heads, "", 0,
                                               "kv_heads must divide heads"));
    const Index m = Index(controls.size());
    if (m != kv_heads && m != heads)
      ABC_THROW(config_error(std::string(who) + ": controls.size() is " + std::to_string(m) + ", expected " +
                             std::to_string(kv_heads) + " (one per key/value head) or " + std::to_string(heads) +
                             " (one per query head)"));
    for (const auto& c : controls) memories_.emplace_back(c, options);
    if constexpr (detail::has_input_projection<Control>::value) {
      Index rows = 0;
      for (const auto& c : controls) rows += c.input_projection().rows();
      const Index dx = controls.front().input_projection().cols();
      bool same_width = true;
      for (const auto& c : controls) same_width = same_width && c.input_projection().cols() == dx;
      if (same_width) {
        projection_.resize(rows, dx);
        logit_at_.push_back(0);
        for (const auto& c : controls) {
          projection_.middleRows(logit_at_.back(), c.input_projection().rows()) = c.input_projection();
          logit_at_.push_back(logit_at_.back() + c.input_projection().rows());
        }
        projection_t_ = projection_.transpose();
      }
    }
  }

  /// One control per query head, each with a memory of its own (heads = per_head.size()).
  MultiHeadAttention(const std::vector<Control>& per_head, Index kv_heads, Options options = {})
      : MultiHeadAttention(per_head, Index(per_head.size()), kv_heads, options) {}

  /// The number of query heads.
  Index heads() const noexcept { return heads_; }
  /// The number of key/value heads; it divides heads().
  Index kv_heads() const noexcept { return kv_heads_; }
  /// The number of memories per sequence: kv_heads() when the controls belong to key/value heads,
  /// heads() when each query head has its own control.
  Index memories() const noexcept { return Index(memories_.size()); }
  /// The key/value head query head h reads.
  Index kv_head(Index h) const noexcept { return h / (heads_ / kv_heads_); }
  /// The memory query head h reads; unchecked: 0 ≤ h < heads().
  Index memory_of(Index h) const noexcept { return memories() == heads_ ? h : kv_head(h); }
  /// The attention query head h reads through (that of its memory); unchecked: 0 ≤ h < heads().
  const attention_type& head(Index h) const { return memories_[std::size_t(memory_of(h))]; }
  /// The attention of memory m; unchecked: 0 ≤ m < memories().
  const attention_type& memory(Index m) const { return memories_[std::size_t(m)]; }

  /// Non-causal / cross attention of every sequence and head.
  void forward(const Tensor& q, const Tensor& k, const Tensor& v, const HeadTensor<T>& out) const {
    run(Form::non_causal, "abc::MultiHeadAttention::forward", nullptr, nullptr, q, k, v, nullptr, out);
  }
  /// As forward(q, k, v, out), with the control input x ([batch, seq_k, 1 or memories(), d_x]).
  void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& x, const HeadTensor<T>& out) const {
    run(Form::non_causal, "abc::MultiHeadAttention::forward", nullptr, nullptr, q, k, v, &x, out);
  }

  /// Causal attention of every sequence and head from empty memories.
  void forward_causal(const Tensor& q, const Tensor& k, const Tensor& v, const HeadTensor<T>& out) const {
    run(Form::causal, "abc::MultiHeadAttention::forward_causal", nullptr, nullptr, q, k, v, nullptr, out);
  }
  /// As forward_causal(q, k, v, out), with the control input x.
  void forward_causal(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& x,
                      const HeadTensor<T>& out) const {
    run(Form::causal, "abc::MultiHeadAttention::forward_causal", nullptr, nullptr, q, k, v, &x, out);
  }

  /// Adds sequence `id` with empty memories for keys of width d and values of width dv, held in
  /// `storage` (StateStorage::bfloat16, for float states: half the bytes; see StateStorage).
  void add(Pool& pool, SeqId id, Index d, Index dv, StateStorage storage = StateStorage::native) const {
    const char* where = "abc::MultiHeadAttention::add";
    if (pool.contains(id))
      ABC_THROW(config_error(std::string(where) + ": sequence id " + std::to_string(id) +
                             " is already in the pool (drop it first)"));
    if (auto why = detail::storage_problem<T>(storage); !why.empty())
      ABC_THROW(config_error(std::string(where) + ": storage is " + why));
    std::vector<state_type> s;
    for (const auto& a : memories_) s.push_back(with_scratch(a.make_state(d, dv, storage)));
    pool.states_.emplace(id, std::move(s));
  }

  /**
   * \brief Adds sequence `id` with the given states, one per memory in memory order: a decode
   * resumed where it stopped, e.g. from the blobs of abc::save_state(memory(m), pool.states(id)[m])
   * read back by abc::load_state(memory(m), blob, state).
   *
   * Every state is checked (made for this control type, memory m's slot count, the same key and
   * value widths for every memory) before the pool changes; the states keep their positions.
   * \throws config_error for an id already in the pool or a state of another control type;
   * shape_error for a wrong count of states or a state of another shape
   */
  void add(Pool& pool, SeqId id, std::vector<state_type> states) const {
    const char* where = "abc::MultiHeadAttention::add";
    if (pool.contains(id))
      ABC_THROW(config_error(std::string(where) + ": sequence id " + std::to_string(id) +
                             " is already in the pool (drop it first)"));
    if (auto p = detail::size_problem("states", Index(states.size()), memories(), "one state per memory, in memory order"))
      detail::raise(where, p);
    for (Index m = 0; m < memories(); ++m) {
      const state_type& st = states[std::size_t(m)];
      const std::string name = "states[" + std::to_string(m) + "]";
      const std::string keys = name + ".keys()", values = name + ".values()";
      detail::Problem p = detail::kind_problem<Control>(st, name.c_str());
      if (!p)
        p = detail::shape_problem(keys.c_str(), st.num_slots(), st.key_dim(), memories_[std::size_t(m)].num_slots(),
                                  states.front().key_dim(), "memory m's slots, and one key width for every memory");
      if (!p)
        p = detail::shape_problem(values.c_str(), st.num_slots(), st.value_dim(),
                                  memories_[std::size_t(m)].num_slots(), states.front().value_dim(),
                                  "memory m's slots, and one value width for every memory");
      if (p) detail::raise(where, p);
    }
    for (auto& st : states) st = with_scratch(std::move(st));
    pool.states_.emplace(id, std::move(states));
  }

  /// Continues the sequences `ids` (sequence b of the tensors is ids[b], each id at most once) by
  /// their tokens: a prefill, or with one token each a batched decode step. Every check (ids,
  /// shapes, every memory's state and inputs) runs before any state or output is touched, so a
  /// call that throws changes nothing.
  void forward_causal(Pool& pool, const std::vector<SeqId>& ids, const Tensor& q, const Tensor& k, const Tensor& v,
                      const HeadTensor<T>& out) const {
    run(Form::pool, "abc::MultiHeadAttention::forward_causal", &pool, &ids, q, k, v, nullptr, out);
  }
  /// As forward_causal(pool, ids, q, k, v, out), with the control input x of the new tokens.
  void forward_causal(Pool& pool, const std::vector<SeqId>& ids, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& x, const HeadTensor<T>& out) const {
    run(Form::pool, "abc::MultiHeadAttention::forward_causal", &pool, &ids, q, k, v, &x, out);
  }

  /// Cross attention's source side: adds the sequences `ids` (none of them in the pool yet) with the
  /// memories of their sources k, v (BoundedAttention::memory per memory), built once, for read().
  void add_memory(Pool& pool, const std::vector<SeqId>& ids, const Tensor& k, const Tensor& v) const {
    build_memories(pool, ids, k, v, nullptr);
  }
  /// As add_memory(pool, ids, k, v), with the control input x of the source tokens.
  void add_memory(Pool& pool, const std::vector<SeqId>& ids, const Tensor& k, const Tensor& v, const Tensor& x) const {
    build_memories(pool, ids, k, v, &x);
  }

  /// Every query of q [batch, seq_q, heads, d] reads its sequence's memories in the pool without
  /// changing them (BoundedAttention::read): O(n · d) per query and head, whatever the source length.
  void read(const Pool& pool, const std::vector<SeqId>& ids, const Tensor& q, const HeadTensor<T>& out) const {
    std::vector<const std::vector<state_type>*> states;
    detail::raise("abc::MultiHeadAttention::read", read_problem(pool, ids, q, out, &states));
    for_each_pair(q.batch(), [&](Index b, Index m) {
      const state_type& st = (*states[std::size_t(b)])[std::size_t(m)];
      for (Index h : group(m)) engine(memories_[std::size_t(m)]).read_memory(st, q.head(b, h), out.head(b, h));
    });
  }

  /// The checks of forward(q, k, v, out), without throwing: Status::ok when the call would succeed.
  [[nodiscard]] Status validate(const Tensor& q, const Tensor& k, const Tensor& v, const HeadTensor<T>& out) const {
    return problem<const Pool>(Form::non_causal, nullptr, nullptr, q, k, v, nullptr, out).status;
  }
  /// The checks of forward(q, k, v, x, out), without throwing.
  [[nodiscard]] Status validate(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& x,
                                const HeadTensor<T>& out) const {
    return problem<const Pool>(Form::non_causal, nullptr, nullptr, q, k, v, &x, out).status;
  }
  /// The checks of forward_causal(q, k, v, out), without throwing.
  [[nodiscard]] Status validate_causal(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const HeadTensor<T>& out) const {
    return problem<const Pool>(Form::causal, nullptr, nullptr, q, k, v, nullptr, out).status;
  }
  /// The checks of forward_causal(q, k, v, x, out), without throwing.
  [[nodiscard]] Status validate_causal(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& x,
                                       const HeadTensor<T>& out) const {
    return problem<const Pool>(Form::causal, nullptr, nullptr, q, k, v, &x, out).status;
  }
  /// The checks of forward_causal(pool, ids, q, k, v, out), without throwing; nothing is changed.
  [[nodiscard]] Status validate(const Pool& pool, const std::vector<SeqId>& ids, const Tensor& q, const Tensor& k,
                                const Tensor& v, const HeadTensor<T>& out) const {
    return problem(Form::pool, &pool, &ids, q, k, v, nullptr, out).status;
  }
  /// The checks of forward_causal(pool, ids, q, k, v, x, out), without throwing; nothing is changed.
  [[nodiscard]] Status validate(const Pool& pool, const std::vector<SeqId>& ids, const Tensor& q, const Tensor& k,
                                const Tensor& v, const Tensor& x, const HeadTensor<T>& out) const {
    return problem(Form::pool, &pool, &ids, q, k, v, &x, out).status;
  }

 private:
  enum class Form { non_causal, causal, pool, memory, read };

  using Failure = detail::LayerFailure;
  static Failure failure(const detail::Problem& p) { return detail::layer_failure(p); }
  using Group = detail::HeadGroup;
  Group group(Index m) const noexcept { return detail::head_group(m, memories(), heads_, kv_heads_); }

  friend Pool;
  static const char* pool_name() noexcept { return "abc::MultiHeadAttention::Pool"; }

  // A state with room for the scores of every query head of a group (BoundedAttention::step's
  // scratch), so a batched decode step allocates nothing.
  state_type with_scratch(state_type s) const {
    detail::StateAccess::reserve_scratch(s, group(0).count, memories_.front().num_slots());
    return s;
  }

  // The kernels of memory m's attention (its control and options), run once the layer's checks pass.
  static kernel::Engine<Control> engine(const attention_type& a) noexcept { return {a.control(), a.options()}; }

  // Runs f(b, m) for every (sequence, memory) pair (detail::for_each_pair), or for every
  // (sequence, j < per_sequence) pair.
  template <class F>
  void for_each_pair(Index batch, F&& f, Index per_sequence = -1) const {
    detail::for_each_pair(batch, per_sequence < 0 ? memories() : per_sequence, std::forward<F>(f));
  }

  // Whether a shared control input is projected once for all memories (see the class comment).
  bool projects(const Tensor* x) const noexcept { return x && x->heads() == 1 && projection_.size() > 0; }

  // The control logits of every sequence for all memories, one product per sequence: [len × Σm].
  std::vector<Matrix<T>> project(const Tensor& x) const {
    std::vector<Matrix<T>> logits(std::size_t(x.batch()));
    for_each_pair(x.batch(), [&](Index b, Index) { project(x, b, logits[std::size_t(b)]); }, 1);
    return logits;
  }
  void project(const Tensor& x, Index b, Matrix<T>& logits) const {
    logits.resize(x.length(b), projection_.rows());
    detail::project<T>(x.head(b, 0), projection_, projection_t_, logits, detail::RowSum::interleaved);  // as Mlp's
  }

  // Memory m's control input for sequence b: its columns of the projected logits, its own slice of
  // x or the shared x (read from `x_copy` where packed_head copies it), or the keys.
  template <class KeyMap>
  Eigen::Ref<const Matrix<T>> input_of(Index b, Index m, const Tensor* x, const std::vector<Matrix<T>>& logits,
                                       const KeyMap& k, Matrix<T>& x_copy) const {
    if (!logits.empty()) {
      const Matrix<T>& l = logits[std::size_t(b)];
      const Index at = logit_at_[std::size_t(m)], cols = logit_at_[std::size_t(m) + 1] - at;
      // A sequence of no tokens has logits with no buffer, which no offset may be added to.
      if (l.rows() == 0) return Eigen::Map<const Matrix<T>>(nullptr, 0, cols);
      return l.middleCols(at, cols);
    }
    if (x) return packed_head(*x, b, x->heads() == 1 ? 0 : m, x_copy);
    return k;
  }

  // A call of the forward forms, checked first.
  void run(Form form, const char* where, Pool* pool, const std::vector<SeqId>* ids, const Tensor& q, const Tensor& k,
           const Tensor& v, const Tensor* x, const HeadTensor<T>& out) const {
    std::vector<std::vector<state_type>*> states;  // filled by the checks, before any pair runs
    std::vector<Matrix<T>> logits;                   // filled by prepare, once the checks have passed
    bool projected = false;
    if constexpr (detail::has_input_projection<Control>::value)
      if (projects(x)) logits.resize(std::size_t(q.batch())), projected = true;
    const auto prepare = [&](Index b) { project(*x, b, logits[std::size_t(b)]); };
    const auto pair = [&](Index b, Index m) {
      const attention_type& a = memories_[std::size_t(m)];
      const kernel::Engine<Control> e = engine(a);
      const Group g = group(m);
      // A long sequence whose heads' rows lie far apart runs on contiguous copies (packed_head).
      Matrix<T> kb, vb, xb;
      std::vector<Matrix<T>> qb(packs(q, b) ? std::size_t(g.count) : 0), ob(packs(out, b) ? std::size_t(g.count) : 0);
      const auto kh = packed_head(k, b, kv_of(m), kb);
      const auto vh = packed_head(v, b, kv_of(m), vb);
      const Eigen::Ref<const Matrix<T>> input = input_of(b, m, x, logits, kh, xb);
      for (Index i = 0; i < Index(qb.size()); ++i) packed_head(q, b, g.first + i, qb[std::size_t(i)]);
      const auto query = [&](Index i) {
        return qb.empty() ? q.head(b, g.first + i) : in_rows(qb[std::size_t(i)]);
      };
      for (auto& o : ob) o.resize(out.length(b), out.dim());
      const auto output = [&](Index i) {
        return ob.empty() ? out.head(b, g.first + i) : out_rows(ob[std::size_t(i)]);
      };
      if (form == Form::non_causal) {
        state_type s = a.make_state(k.dim(), v.dim());
        e.build_memory(s, kh, vh, input, projected);
        for (Index i = 0; i < g.count; ++i) e.read_memory(s, query(i), output(i));
      } else if (form == Form::causal) {
        state_type s = a.make_state(k.dim(), v.dim());
        e.run_causal(s, g.count, query, output, kh, vh, input, projected);
      } else if (q.length(b) == 1) {  // a decode step: exactly the step kernel, as a single-sequence decoder runs
        e.step_heads(
            (*states[std::size_t(b)])[std::size_t(m)], g.count, [&](Index i) { return query(i).data(); },
            [&](Index i) { return output(i).data(); }, kh.data(), vh.data(), input.row(0), projected, k.dim(), v.dim());
      } else {
        e.run_causal((*states[std::size_t(b)])[std::size_t(m)], g.count, query, output, kh, vh, input, projected);
      }
      for (Index i = 0; i < Index(ob.size()); ++i) {
        auto o = out.head(b, g.first + i);
        copy_rows(ob[std::size_t(i)].data(), o.cols(), o.data(), o.outerStride(), o.rows(), o.cols());
      }
    };
    using Then = detail::CheckThenRun<decltype(prepare), decltype(pair)>;
    detail::raise(where, problem(form, pool, ids, q, k, v, x, out, &states, Then{projected, prepare, pair}));
  }

  // The key/value head memory m is written from.
  Index kv_of(Index m) const noexcept { return memories() == heads_ ? kv_head(m) : m; }

  // Whether sequence b of t is worth copying to contiguous rows for its pair's kernels: its rows
  // lie apart (a [batch, seq, heads, dim] tensor's rows of one head are heads · dim entries apart,
  // 4 KiB at 16 heads of 64 floats, so a long call's rows fall into few cache sets and prefetch
  // streams) and it is long enough for the copy, O(length · dim) against the kernels'
  // O(length · slots · dim), to be lost in the time it saves. A decode step's one row is read in place.
  template <class S>
  static bool packs(const HeadTensor<S>& t, Index b) noexcept {
    constexpr Index pack_rows = 32;
    return t.seq_stride() != t.dim() && t.length(b) >= pack_rows;
  }
  // Sequence b, head h of t: in place, or (packs) copied into `buf` and read from there.
  static typename Tensor::map_type packed_head(const Tensor& t, Index b, Index h, Matrix<T>& buf) {
    if (!packs(t, b)) return t.head(b, h);
    const auto src = t.head(b, h);
    buf.resize(src.rows(), src.cols());
    copy_rows(src.data(), src.outerStride(), buf.data(), buf.cols(), src.rows(), src.cols());
    return in_rows(buf);
  }
  // rows × cols entries from rows `from_stride` apart to rows `to_stride` apart. The spaced side's
  // rows are a page or more apart, where the hardware's prefetchers do not follow, so its lines are
  // fetched a few rows ahead.
  static void copy_rows(const T* from, Index from_stride, T* to, Index to_stride, Index rows, Index cols) noexcept {
    constexpr Index ahead = 8, line = 64;
    const Index bytes = cols * Index(sizeof(T));
    for (Index i = 0; i < rows; ++i) {
      if (i + ahead < rows) {
        const char* src = reinterpret_cast<const char*>(from + (i + ahead) * from_stride);
        char* dst = reinterpret_cast<char*>(to + (i + ahead) * to_stride);
        for (Index at = 0; at < bytes; at += line) {
          if (from_stride != cols) ABC_PREFETCH(src + at, 0);
          if (to_stride != cols) ABC_PREFETCH(dst + at, 1);
        }
      }
      std::copy(from + i * from_stride, from + i * from_stride + cols, to + i * to_stride);
    }
  }
  static typename Tensor::map_type in_rows(const Matrix<T>& m) noexcept {
    return typename Tensor::map_type(m.data(), m.rows(), m.cols(), Eigen::OuterStride<>(m.cols()));
  }
  static typename HeadTensor<T>::map_type out_rows(Matrix<T>& m) noexcept {
    return typename HeadTensor<T>::map_type(m.data(), m.rows(), m.cols(), Eigen::OuterStride<>(m.cols()));
  }

  void build_memories(Pool& pool, const std::vector<SeqId>& ids, const Tensor& k, const Tensor& v,
                      const Tensor* x) const {
    constexpr const char* where = "abc::MultiHeadAttention::add_memory";
    detail::raise(where, problem<Pool>(Form::memory, &pool, &ids, k, k, v, x, HeadTensor<T>::packed(nullptr, {0}, 0, 0)));
    std::vector<Matrix<T>> logits;
    if constexpr (detail::has_input_projection<Control>::value)
      if (projects(x)) logits = project(*x);
    std::vector<std::vector<state_type>> built(std::size_t(k.batch()));
    for (auto& b : built)
      for (const auto& a : memories_) b.push_back(with_scratch(a.make_state(k.dim(), v.dim())));
    for_each_pair(k.batch(), [&](Index b, Index m) {
      Matrix<T> kb, vb, xb;  // a long source of spaced rows is built from contiguous copies (packed_head)
      const auto kh = packed_head(k, b, kv_of(m), kb);
      engine(memories_[std::size_t(m)]).build_memory(built[std::size_t(b)][std::size_t(m)], kh,
                                                     packed_head(v, b, kv_of(m), vb),
                                                     input_of(b, m, x, logits, kh, xb), !logits.empty());
    });
    for (std::size_t b = 0; b < built.size(); ++b) pool.states_.emplace(ids[b], std::move(built[b]));
  }

  // Every check of a call, before anything runs: those of the whole call here, then the pairs'
  // check handed to `then` (detail::FirstFailure, or a detail::CheckThenRun that runs the pairs).
  // With a pool, `states` (if given) receives each sequence's states before `then` is called.
  // Form::memory checks a source (k, v, x; q is k and out is not used).
  template <class PoolT, class Then = detail::FirstFailure>
  Failure problem(Form form, PoolT* pool, const std::vector<SeqId>* ids, const Tensor& q, const Tensor& k,
                  const Tensor& v, const Tensor* x, const HeadTensor<T>& out,
                  std::vector<std::vector<state_type>*>* states = nullptr, const Then& then = {}) const {
    using detail::value_problem;
    Failure f;
    const bool keys_only = form == Form::memory;
    const Status shape = Status::shape_mismatch;
    if (!keys_only) {
      if (q.heads() != heads_) return failure(value_problem(shape, "q.heads()", q.heads(), "", heads_, "one per query head"));
      if (out.heads() != heads_) return failure(value_problem(shape, "out.heads()", out.heads(), "", heads_, "one per query head"));
    }
    if (k.heads() != kv_heads_) return failure(value_problem(shape, "k.heads()", k.heads(), "", kv_heads_, "one per key/value head"));
    if (v.heads() != kv_heads_) return failure(value_problem(shape, "v.heads()", v.heads(), "", kv_heads_, "one per key/value head"));
    if (v.batch() != k.batch()) return failure(value_problem(shape, "v.batch()", v.batch(), "", k.batch(), "one value sequence per key sequence"));
    if (!keys_only) {
      if (k.batch() != q.batch()) return failure(value_problem(shape, "k.batch()", k.batch(), "", q.batch(), "one key sequence per query sequence"));
      if (out.batch() != q.batch()) return failure(value_problem(shape, "out.batch()", out.batch(), "", q.batch(), "one output sequence per query sequence"));
      if (out.dim() != v.dim()) return failure(value_problem(shape, "out.dim()", out.dim(), "", v.dim(), "outputs have the values' width"));
    }
    if (x) {
      if (x->heads() != 1 && x->heads() != memories()) {
        f.status = shape;
        f.message = "x.heads() is " + std::to_string(x->heads()) + ", expected 1 (one control input shared by all heads) or " +
                    std::to_string(memories()) + " (one per memory: " +
                    (memories() == heads_ ? "per query head" : "per key/value head") + ", as the controls are)";
        return f;
      }
      if (x->batch() != k.batch()) return failure(value_problem(shape, "x.batch()", x->batch(), "", k.batch(), "one control input sequence per key sequence"));
    }
    using Held = std::conditional_t<std::is_const<PoolT>::value, const std::vector<state_type>, std::vector<state_type>>;
    std::vector<Held*> seq_states;
    if (form == Form::pool || form == Form::memory) {
      f = detail::ids_problem(form == Form::memory ? detail::IdUse::add : detail::IdUse::advance, *pool, *ids, k.batch(),
                             memories(), "MultiHeadAttention", seq_states);
      if (f) return f;
      if constexpr (!std::is_const<PoolT>::value)
        if (states) *states = seq_states;
    }
    using detail::CallForm;
    const CallForm mode = form == Form::non_causal ? CallForm::non_causal : keys_only ? CallForm::memory : CallForm::causal;
    const bool spread = detail::spread_checks(k, heads_ / memories() + 2);  // the group's q, k and v
    // A call finds its inputs finite in passes over a sequence's rows, not a pass per head, but a
    // long one whose heads' rows lie together checks each pair's heads on that pair's thread
    // (detail::by_pairs). Where an input is not finite, the pairs find which.
    const auto rows_finite = [&](Index b, Index s0, Index rows) {
      return (keys_only || q.rows_finite(b, s0, rows)) && k.rows_finite(b, s0, rows) && v.rows_finite(b, s0, rows) &&
             (!x || x->rows_finite(b, s0, rows));
    };
    const auto rows = [&](Index b) {
      return std::max({keys_only ? 0 : q.length(b), k.length(b), v.length(b), x ? x->length(b) : 0});
    };
    const auto check = [&](Index b, Index m, bool finite) -> Failure {
      if (m == 0 && !keys_only && out.length(b) != q.length(b)) return detail::length_failure(b, out.length(b), q.length(b));
      const attention_type& a = memories_[std::size_t(m)];
      const state_type* st = form == Form::pool ? seq_states[std::size_t(b)]->data() + m : nullptr;
      // With the inputs finite, the other sequences' pairs need only what differs between
      // sequences, given that pair (0, m) passes (a decode step's checks stay O(batch), not a full
      // check per pair); where (0, m) fails it is the first failure whatever the others say.
      if (b > 0 && finite &&
          detail::passes_like(a.control(), mode, st, form == Form::pool ? seq_states[0]->data() + m : nullptr,
                              keys_only ? k.length(b) : q.length(b), k.length(b), v.length(b), x ? x->length(b) : -1))
        return {};
      const auto kh = k.head(b, kv_of(m));
      const Group g = group(m);
      const MatrixRef<T> qh = keys_only ? MatrixRef<T>(kh) : MatrixRef<T>(q.head(b, g.first));
      const MatrixRef<T> xh = x ? MatrixRef<T>(x->head(b, x->heads() == 1 ? 0 : m)) : qh;
      if (auto p = detail::call_problem(a.control(), mode, st, qh, kh, v.head(b, kv_of(m)), x ? &xh : nullptr, finite))
        return failure(p);
      if (!keys_only && !finite)
        for (Index h = g.first + 1; h < g.first + g.count; ++h)
          if (auto p = detail::finite_problem("q", q.head(b, h))) return failure(p);
      return {};
    };
    return then(detail::pair_checks(k, memories(), spread, rows_finite, check, rows));
  }

  // The checks of read(pool, ids, q, out); `states` receives each sequence's states.
  Failure read_problem(const Pool& pool, const std::vector<SeqId>& ids, const Tensor& q, const HeadTensor<T>& out,
                       std::vector<const std::vector<state_type>*>* states) const {
    using detail::value_problem;
    Failure f;
    const Status shape = Status::shape_mismatch;
    if (q.heads() != heads_) return failure(value_problem(shape, "q.heads()", q.heads(), "", heads_, "one per query head"));
    if (out.heads() != heads_) return failure(value_problem(shape, "out.heads()", out.heads(), "", heads_, "one per query head"));
    if (out.batch() != q.batch()) return failure(value_problem(shape, "out.batch()", out.batch(), "", q.batch(), "one output sequence per query sequence"));
    f = detail::ids_problem(detail::IdUse::read, pool, ids, q.batch(), memories(), "MultiHeadAttention", *states);
    if (f) return f;
    for (Index b = 0; b < q.batch(); ++b) {
      if (out.length(b) != q.length(b)) return detail::length_failure(b, out.length(b), q.length(b));
      for (Index m = 0; m < memories(); ++m) {
        const state_type& st = (*(*states)[std::size_t(b)])[std::size_t(m)];
        if (out.dim() != st.value_dim())
          return failure(value_problem(shape, "out.dim()", out.dim(), "", st.value_dim(), "outputs have the memory's value width"));
        for (Index h : group(m))
          if (auto p = detail::read_problem(memories_[std::size_t(m)].control(), st, q.head(b, h))) return failure(p);
      }
    }
    return f;
  }

  std::vector<attention_type> memories_;
  Index heads_, kv_heads_;
  Matrix<T> projection_;         // every memory's input projection stacked, when the control has one
  Matrix<T> projection_t_;       // its transpose, for detail::project
  std::vector<Index> logit_at_;  // memory m's logits are columns [logit_at_[m], logit_at_[m + 1])
};

ABC_NAMESPACE_END
