// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::SoftmaxEngine, the softmax-readout memory's build, causal
// and step kernels.
#pragma once

#include <algorithm>

#include "../concepts.hpp"
#include "../detail/compose.hpp"
#include "recurrence.hpp"
#include "../detail/state_access.hpp"
#include "../options.hpp"
#include "../state.hpp"
#include "../types.hpp"
#include "rows.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {
// Kernels take (rows, cols) and parallel operands of one type by design; only the library calls
// them, through checked public forms.
// NOLINTBEGIN(bugprone-easily-swappable-parameters)

/**
 * \brief The kernels of a memory read by a softmax over slots, for a control with a sparse (one-hot)
 * or a dense schedule: the memory of a whole sequence, the causal chunked and recurrent kernels,
 * and the decode step.
 *
 * Runs only once every check has passed (abc::BoundedAttention and abc::MultiHeadAttention check
 * first). `heads` query heads read one memory (one head, or the query heads of a grouped-query
 * group sharing their key/value head's memory): query(g) and output(g) are head g's queries and
 * outputs; the memory is updated once, and each head reads exactly what a memory of its own would
 * give. `input` is the control input (the keys unless the caller gives one); when `projected`, it
 * is already the control's logits x Wᵀ (see has_input_projection), formed for many heads at once.
 */
template <class Control>
class SoftmaxEngine {
  using T = typename Control::scalar_type;
  static constexpr bool sparse = detail::has_sparse_schedule<Control>::value;
  static constexpr bool has_decay = detail::decay_flag<Control>::value;
  static constexpr bool may_decay_all = sparse && detail::decay_all_flag<Control>::value;
  using Access = detail::StateAccess;

 public:
  SoftmaxEngine(const Control& control, const Options& options) noexcept : control_(control), options_(options) {}

  /// The memory of all N tokens (the final state of the recurrence, of the control's non-causal
  /// form when it has one) into the empty state `s`.
  void build_memory(State<T>& s, const MatrixRef<T>& k, const MatrixRef<T>& v, const MatrixRef<T>& input,
                    bool projected) const {
    detail::UnpackedMemory<T> unpacked(s);
    if constexpr (detail::has_noncausal_form<Control>::value)
      build(control_.noncausal_form(input), s, input, projected, k, v);  // e.g. k-means sees every row
    else
      build(control_, s, input, projected, k, v);
    Access::position(s) = k.rows();
  }

  /// Every query of one head reads the finished memory `s`; nothing changes.
  template <class Q, class O>
  void read_memory(const State<T>& s, const Q& q, O&& out) const {
    if (s.storage() == StateStorage::native)
      read_all<T>(Access::keys(s), Access::values(s), Access::written(s), masked(), range_of(0), scale(q.cols()), q, out);
    else
      read_all<T>(s.keys(), s.values(), Access::written(s), masked(), range_of(0), scale(q.cols()), q, out);
  }

  /// Continues `s` over the N tokens of k, v; each head's query t reads the memory of keys ..t.
  template <class QueryOf, class OutputOf>
  void run_causal(State<T>& s, Index heads, const QueryOf& query, const OutputOf& output, const MatrixRef<T>& k,
                  const MatrixRef<T>& v, const MatrixRef<T>& input, bool projected) const {
    const Index n_keys = k.rows(), start = s.position();
    if (n_keys == 0) return;
    detail::UnpackedMemory<T> unpacked(s);
    if (use_chunked()) {
      const Index chunk = std::min(options_.chunk, n_keys);
      ChunkWorkspace<T> ws(chunk, control_.num_slots(), heads);
      const T sc = scale(k.cols());
      for (Index t0 = 0; t0 < n_keys; t0 += chunk) {
        const Index c = std::min(chunk, n_keys - t0);
        const auto query_rows = [&](Index g) { return query(g).middleRows(t0, c); };
        const auto output_rows = [&](Index g) { return output(g).middleRows(t0, c); };
        if constexpr (detail::has_chunk_weights<Control>::value) {
          // Weights that factor over time: the chunk's sums over its tokens as products.
          if (control_.chunk_weights(start + t0, input.middleRows(t0, c), projected, Access::slot_state(s),
                                     ws.write.topRows(c), ws.decay.topRows(c), ws.dcum.data())) {
            factored_chunk<T>(view(s), ws, c, masked(), range_of(start + t0), sc, heads, query_rows, output_rows,
                              k.middleRows(t0, c), v.middleRows(t0, c));
            continue;
          }
        } else {
          fill(control_, start + t0, c, input.middleRows(t0, c), projected, s, ws);
        }
        causal_chunk<T>(view(s), ws, c, has_decay, masked(), range_of(start + t0), sc, heads, query_rows,
                        output_rows, k.middleRows(t0, c), v.middleRows(t0, c));
      }
    } else {
      Access::reserve_scratch(s, heads, control_.num_slots());
      for (Index t = 0; t < n_keys; ++t)
        advance_and_read(
            s, Access::keys(s).data(), Access::values(s).data(), start + t, heads,
            [&](Index g) { return query(g).row(t).data(); },
            [&](Index g) { return output(g).row(t).data(); }, k.row(t).data(), v.row(t).data(), input.row(t),
            projected, k.cols(), v.cols());
    }
    Access::position(s) = start + n_keys;
  }

  /// One decode step of `heads` heads: the token at the state's position, written then read.
  template <class QueryOf, class OutputOf, class Input>
  void step_heads(State<T>& s, Index heads, const QueryOf& query, const OutputOf& output, const T* k, const T* v,
                  const Input& input, bool projected, Index d, Index dv) const {
    Access::reserve_scratch(s, heads, control_.num_slots());
    if (s.storage() == StateStorage::native) {
      advance_and_read(s, Access::keys(s).data(), Access::values(s).data(), s.position(), heads, query, output, k, v,
                       input, projected, d, dv);
    } else {
      // A dense schedule read by up to four heads updates and reads the bfloat16 rows in place, in
      // one pass per matrix, each entry widened, updated, read in T by every head and rounded as it
      // is stored: exactly what the call would give on the memory unpacked. Other steps unpack it.
      bool done = false;
      if constexpr (!sparse && std::is_same<T, float>::value)
        if (heads <= max_shared_heads) {
          advance_and_read(s, Access::packed_keys(s), Access::packed_values(s), s.position(), heads, query, output, k,
                           v, input, projected, d, dv);
          done = true;
        }
      if (!done) {
        detail::UnpackedMemory<T> unpacked(s);
        advance_and_read(s, Access::keys(s).data(), Access::values(s).data(), s.position(), heads, query, output, k,
                         v, input, projected, d, dv);
      }
    }
    ++Access::position(s);
  }

 private:
  bool masked() const noexcept { return options_.empty_slots == EmptySlots::masked; }
  T scale(Index d) const noexcept { return detail::read_scale<T>(options_.scale, d); }

  bool use_chunked() const noexcept {
    switch (options_.causal_kernel) {
      case CausalKernel::chunked: return true;
      case CausalKernel::recurrent: return false;
      case CausalKernel::automatic: break;
    }
    return !sparse;  // one-hot writes are O(d) per token: the token loop is the cheaper kernel
  }

  // The slots query `first + i` may read, as a function of i.
  auto range_of(Index first) const noexcept {
    return [this, first](Index i) -> SlotRange {
      if constexpr (detail::has_read_range<Control>::value) {
        const auto r = control_.read_range(first + i);
        return {r.first, r.second};
      } else {
        (void)first;
        (void)i;
        return {0, control_.num_slots()};
      }
    };
  }

  static MemoryView<T> view(State<T>& s) noexcept {
    ABC_ASSERT(Access::unpacked(s), "the kernels in T run on a memory in T (detail::UnpackedMemory)");
    return {Access::keys(s), Access::values(s), Access::slot_state(s), Access::written(s)};
  }

  // The control's schedule for tokens [t0, t0 + c) as dense rows of decays and writes; with
  // `projected`, from the logits the caller formed.
  static void fill(const Control& ctl, Index t0, Index c, const MatrixRef<T>& input, bool projected, State<T>& s,
                   ChunkWorkspace<T>& ws) {
    if constexpr (detail::has_input_projection<Control>::value)
      if (projected) return ctl.schedule_projected(t0, input, Access::slot_state(s), ws.decay.topRows(c), ws.write.topRows(c));
    (void)projected;
    detail::schedule_rows(ctl, t0, input, Access::slot_state(s), Access::positions(s), ws.decay.topRows(c), ws.write.topRows(c));
  }

  void build(const Control& ctl, State<T>& s, const MatrixRef<T>& input, bool projected, const MatrixRef<T>& k,
             const MatrixRef<T>& v) const {
    const Index n_keys = k.rows();
    if constexpr (sparse) {
      // One-hot writes: O(d) per token, no dense weights at all.
      for (Index t = 0; t < n_keys; ++t) {
        SparseWrite<T, Control::max_writes> sw;
        detail::sparse_schedule(ctl, t, input.row(t).transpose(), Access::slot_state(s), Access::positions(s), sw);
        apply_sparse<T, Control::max_writes>(view(s), sw, k.row(t).transpose(), v.row(t).transpose());
      }
      (void)projected;
    } else {
      const Index chunk = std::min(build_block, std::max<Index>(n_keys, 1));
      ChunkWorkspace<T> ws(chunk, control_.num_slots(), 0);
      for (Index t0 = 0; t0 < n_keys; t0 += chunk) {
        const Index c = std::min(chunk, n_keys - t0);
        if constexpr (detail::has_block_weights<Control>::value) {
          // The block's weights at its end at once, without a decay per token (the memory is read
          // only when it is finished).
          ctl.block_weights(t0, input.middleRows(t0, c), projected, Access::slot_state(s), ws.eff.topRows(c),
                            ws.dcum.data());
          // The marks of the block as one update (decay dcum, then each token's weight): a slot is
          // written when a weight in it is nonzero, or when it was and the block does not reset it.
          mark_written<T>(true, ws.dcum, ws.eff.row(0), Access::written(s));
          for (Index i = 1; i < c; ++i) mark_written<T>(false, ws.eff.row(i), ws.eff.row(i), Access::written(s));
          add_chunk<T>(view(s), ws.eff.topRows(c), ws.dcum.data(), k.middleRows(t0, c), v.middleRows(t0, c));
        } else {
          fill(ctl, t0, c, input.middleRows(t0, c), projected, s, ws);
          advance_chunk<T>(view(s), ws, c, has_decay, k.middleRows(t0, c), v.middleRows(t0, c));
        }
      }
    }
  }

  // Token t: the control's write into the memory, then each head's read, in two passes over the
  // state: each column of K̃ is updated and added into the first head's scores in one go (the other
  // heads read the updated columns), and after the softmax each Ṽ row is updated and accumulated into
  // the first head's output (kernel/rows.hpp). An ungated one-hot write touches one row: it is
  // applied first and both passes only read. Scratch rows of the state hold the decays (row 0), the
  // writes (row 1) and one score row per head, so a step allocates nothing.
  // `keys` and `values` are the memory's entries, in T or (one head of a dense schedule) bfloat16.
  template <class S, class QueryOf, class OutputOf, class Input>
  void advance_and_read(State<T>& s, S* keys, S* values, Index t, Index heads, const QueryOf& query,
                        const OutputOf& output, const T* k, const T* v, const Input& input, bool projected, Index d,
                        Index dv) const {
    const Index n = control_.num_slots();
    Matrix<T>& scratch = Access::scratch(s);
    T* a = scratch.row(0).data();
    T* w = scratch.row(1).data();
    const auto scores = [&scratch](Index g) { return scratch.row(2 + g).data(); };
    const T sc = scale(d);
    bool decay_pass = false;  // a gated sparse step: the passes below decay every slot as they read
    if constexpr (sparse) {
      SparseWrite<T, Control::max_writes> sw;
      detail::sparse_schedule(control_, t, input.transpose(), Access::slot_state(s), Access::positions(s), sw);
      // A gated control decays every slot: its scale goes into the update-and-read passes as dense
      // rows (a, w), so each matrix is passed over once rather than scaled and then read. Other
      // sparse controls (decay_all ≡ 1) compile without this path.
      if constexpr (may_decay_all)
        decay_pass = sw.decay_all != T(1) && sparse_as_dense(sw, n, a, w, Access::written(s));
      if (!decay_pass) {
        const VectorRef<T> key(Eigen::Map<const Vector<T>>(k, d));
        const VectorRef<T> value(Eigen::Map<const Vector<T>>(v, dv));
        const SlotWrite<T>& first = sw.writes[0];
        if (sw.decay_all == T(1) && sw.count == 1 && first.decay == T(0)) {
          // A ring buffer's write (one slot overwritten, nothing else decays): Ṽ's row and the marks
          // first, so that their stores reach the cache before the masking and the Ṽ pass load
          // them; K̃'s row by the read pass as it goes (Pass::overwrite), the entries and scores
          // exactly those of apply_sparse followed by a read.
          MemoryView<T> m = view(s);
          write_sparse_rows(m.values, sw, value);
          mark_sparse(sw, m.written);
          columns_pass_heads<Pass::overwrite>(keys, n, n, d, a, w, k, heads, query, sc, scores,
                                              OneWrite<T>{first.slot, first.weight});
        } else {
          apply_sparse<T, Control::max_writes>(view(s), sw, key, value);
          columns_pass_heads<Pass::read>(keys, n, n, d, a, w, k, heads, query, sc, scores);
        }
      } else if constexpr (may_decay_all) {
        columns_pass_heads<Pass::decay>(keys, n, n, d, a, w, k, heads, query, sc, scores);
      }
      (void)projected;
    } else {
      bool done = false;
      if constexpr (detail::has_input_projection<Control>::value)
        if (projected) {
          control_.schedule_projected(t, input, Access::slot_state(s), scratch.row(0), scratch.row(1));
          done = true;
        }
      if (!done)
        detail::dense_schedule(control_, t, input, Access::slot_state(s), Access::positions(s), scratch.row(0),
                               scratch.row(1));
      mark_written<T>(has_decay, scratch.row(0), scratch.row(1), Access::written(s));
      columns_pass_heads<Pass::update>(keys, n, n, d, a, w, k, heads, query, sc, scores);
    }
    const SlotRange range = range_of(t)(0);
    const std::uint8_t* written = Access::written(s).data();
    for (Index g = 0; g < heads; ++g) mask_slots(scores(g), n, written, masked(), range);
    softmax_rows(scores(0), scratch.outerStride(), heads, n, static_cast<bool*>(nullptr));  // heads 4 at a time
    // An ungated one-hot write has already been applied: then every pass only reads Ṽ.
    if constexpr (!sparse) {
      rows_pass_heads<Pass::update>(values, dv, n, dv, a, w, v, heads, scores, output);
    } else {
      if (!decay_pass)
        rows_pass_heads<Pass::read>(values, dv, n, dv, a, w, v, heads, scores, output);
      else if constexpr (may_decay_all)
        rows_pass_heads<Pass::decay>(values, dv, n, dv, a, w, v, heads, scores, output);
    }
  }

  const Control& control_;
  const Options& options_;
};

// NOLINTEND(bugprone-easily-swappable-parameters)
}  // namespace kernel
ABC_NAMESPACE_END
