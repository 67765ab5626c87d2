// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The shared kernels of K̃_t = diag(a_t) K̃_{t-1} + w_t ⊗ k_t.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../schedule.hpp"
#include "../types.hpp"
#include "product.hpp"
#include "rows.hpp"
#include "softmax_slots.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {
// Kernels take (rows, cols) and parallel operands of one type by design; only the library calls
// them, through checked public forms.
// NOLINTBEGIN(bugprone-easily-swappable-parameters)

// The mutable parts of a State, as the kernels see them.
template <class T>
struct MemoryView {
  ColMatrix<T>& keys;                  // K̃ [n × d], column-major (State's layout)
  Matrix<T>& values;                   // Ṽ [n × dv]
  Matrix<T>& slot_state;               // [2 × n]: the control's per-slot state
  std::vector<std::uint8_t>& written;  // [n]
};

// Which slots hold something: a slot is written once a token puts weight on it, and empty again
// when a token resets it (decay exactly 0) without writing it. A reset row is exactly zero, so it is
// masked like a slot never written instead of taking softmax mass for a zero key (this is how
// Concat drops a token the other part already holds, and how a gate of exactly 0 forgets). This
// is the rule for one slot of a sparse write; mark_written applies it to a dense row.
inline void mark_slot(std::uint8_t& written, bool wrote, bool reset) noexcept {
  written = static_cast<std::uint8_t>(wrote | (reset ? 0 : written));
}

// mark_slot for one token of a sparse schedule: a decay_all of 0 empties every slot, then each
// write marks its own. apply_sparse and sparse_as_dense share it, so the step's two paths keep
// the same marks.
template <class T, int W>
void mark_sparse(const SparseWrite<T, W>& s, std::vector<std::uint8_t>& written) noexcept {
  if (s.decay_all == T(0)) std::fill(written.begin(), written.end(), std::uint8_t{0});
  for (int j = 0; j < s.count; ++j) {
    const SlotWrite<T>& w = s.writes[static_cast<std::size_t>(j)];
    mark_slot(written[static_cast<std::size_t>(w.slot)], w.weight != T(0), w.decay == T(0));
  }
}

// The rows one token of a sparse schedule writes in one matrix (K̃ or Ṽ, x the token's key or
// value), in the writes' order, without decay_all or the marks: apply_sparse's part per matrix.
template <class T, int W, class M>
ABC_FORCE_INLINE void write_sparse_rows(M& m, const SparseWrite<T, W>& s, VectorRef<T> x) {
  for (int j = 0; j < s.count; ++j) {
    const SlotWrite<T>& w = s.writes[static_cast<std::size_t>(j)];
    auto row = m.row(w.slot);
    if (w.decay == T(0))  // a ring-buffer overwrite: no read of the old row at all
      row.noalias() = w.weight * x.transpose();
    else
      row = w.decay * row + w.weight * x.transpose();
  }
}

// One token of a sparse schedule: O(count · d), plus O(n · d) only when every slot decays.
template <class T, int W>
void apply_sparse(MemoryView<T> m, const SparseWrite<T, W>& s, VectorRef<T> k, VectorRef<T> v) {
  if (s.decay_all != T(1)) {
    m.keys *= s.decay_all;
    m.values *= s.decay_all;
  }
  write_sparse_rows(m.keys, s, k);
  write_sparse_rows(m.values, s, v);
  mark_sparse(s, m.written);
}

// One token of a sparse schedule that decays every slot (decay_all ≠ 1), as the dense rows of the
// decode step's update-and-read passes: a_l = decay_all and w_l = 0, except a written slot's
// a = decay_all · decay and w = weight; the written marks by mark_sparse, as apply_sparse sets
// them. The step then passes over each matrix once instead of scaling it and then reading it.
// Returns false, changing nothing, when a token writes a slot twice (apply_sparse composes such
// writes in order).
template <class T, int W>
bool sparse_as_dense(const SparseWrite<T, W>& s, Index n, T* a, T* w, std::vector<std::uint8_t>& written) noexcept {
  if constexpr (W > 1) {  // (with one write there is nothing to compare, and g++ -O3 warns on the loop)
    const int count = std::min(s.count, W);
    for (int j = 1; j < count; ++j)
      for (int i = 0; i < j; ++i)
        if (s.writes[static_cast<std::size_t>(i)].slot == s.writes[static_cast<std::size_t>(j)].slot) return false;
  }
  std::fill(a, a + n, s.decay_all);
  std::fill(w, w + n, T(0));
  for (int j = 0; j < s.count; ++j) {
    const SlotWrite<T>& sw = s.writes[static_cast<std::size_t>(j)];
    a[sw.slot] = s.decay_all * sw.decay;
    w[sw.slot] = sw.weight;
  }
  mark_sparse(s, written);
  return true;
}

// mark_slot for one token of a dense schedule: decay row a, write row w. Without decays (a
// control's `has_decay = false`) the decay row is not read: nothing is ever reset. The count is
// read once and the flags combined as integers, so that both loops vectorise: the byte flags may
// alias the rows, and a bound re-read after every store (or a branch per slot) kept this loop
// scalar, at a cost comparable to the Ṽ pass of a step.
template <class T, class RowA, class RowW>
void mark_written(bool has_decay, const RowA& a, const RowW& w, std::vector<std::uint8_t>& written) {
  const T* ap = a.data();
  const T* wp = w.data();
  std::uint8_t* mark = written.data();
  const Index n = w.size();
  if (has_decay) {
    for (Index l = 0; l < n; ++l)
      mark[l] = static_cast<std::uint8_t>((wp[l] != T(0)) | ((ap[l] != T(0)) & (mark[l] != 0)));
  } else {
    for (Index l = 0; l < n; ++l) mark[l] = static_cast<std::uint8_t>((wp[l] != T(0)) | (mark[l] != 0));
  }
}

// One query head's buffers in the chunked kernels: each head that reads the memory has its own
// scores against the chunk's keys and the carried memory, and its own mixing weights.
template <class T>
struct ReadScratch {
  Matrix<T> gram, prev, pd, mix;  // linear readout: prev holds the head's query features φ(q)
  Vector<T> den, floors;          // linear readout: each token's denominator and (scaled) floor
  ReadScratch(Index chunk, Index n) : gram(chunk, chunk), prev(chunk, n), pd(chunk, n), mix(chunk, chunk), den(chunk), floors(chunk) {}
};

// Tokens per block of the non-causal memory build, which has no per-token reads: its cost is two
// products per block, so larger blocks than the causal kernel's chunk pay (bench/README.md, "Chunk
// size", has the sweep). Options::chunk is the causal kernel's.
inline constexpr Index build_block = 128;

// Buffers of the chunked kernels, sized once per call: the schedule and effective weights of the
// chunk's tokens, shared by every head that reads the memory, and one ReadScratch per head.
template <class T>
struct ChunkWorkspace {
  Matrix<T> decay, write, eff;
  Eigen::Matrix<T, 1, Eigen::Dynamic> dcum, scores;
  std::vector<ReadScratch<T>> reads;
  ChunkWorkspace(Index chunk, Index n, Index heads = 1)
      : decay(chunk, n), write(chunk, n), eff(chunk, n), dcum(n), scores(n),
        reads(static_cast<std::size_t>(heads), ReadScratch<T>(chunk, n)) {}
  ReadScratch<T>& read(Index g) noexcept { return reads[static_cast<std::size_t>(g)]; }
};

// Ṽ ← diag(D) Ṽ + Eᵀ v (D null: nothing decays), each entry decayed and summed in one pass; also
// the linear readout's Ṽ.
template <class T, class Weights>
void add_values(Matrix<T>& values, const Weights& e, const T* dcum, const Eigen::Ref<const Matrix<T>>& v) {
  ProductArgs<T> update = product_args(e.transpose(), v, values);
  update.row_scale = dcum;
  product<true>(update);
}

// The memory advanced over a chunk: K̃ ← diag(D) K̃ + Eᵀ k and Ṽ ← diag(D) Ṽ + Eᵀ v, for E the
// tokens' weights at the chunk's end [c × n] and D what the chunk leaves of the memory before it
// (null: nothing decays). K̃ is updated as K̃ᵀ ← K̃ᵀ diag(D) + kᵀ E, the rows of its transpose being
// its contiguous columns; each entry is decayed and summed in one pass (kernel::product).
template <class T, class Weights>
void add_chunk(MemoryView<T> m, const Weights& e, const T* dcum, const Eigen::Ref<const Matrix<T>>& k,
               const Eigen::Ref<const Matrix<T>>& v) {
  ProductArgs<T> keys = product_args(k.transpose(), e, m.keys.transpose());
  keys.col_scale = dcum;
  product<true>(keys);
  add_values(m.values, e, dcum, v);
}

// Causal outputs for tokens t0 .. t0 + c − 1 of one chunk, continuing from the memory in `m`, then
// the memory advanced to the chunk's end. Decay and write rows [c × n] are already in `ws`.
//
// With E_t[i] = w_i ⊙ Π_{j=i+1..t} a_j (token i's weight in the memory at time t) and
// D_t = Π_{j≤t} a_j (what is left of the carried memory):
//   scores_t = D_t ⊙ (K̃_prev q_t) + Σ_{i≤t} E_t[i] (q_t·k_i)             key pass
//   out_t    = (p_t ⊙ D_t)ᵀ Ṽ_prev + Σ_{i≤t} (E_t[i]·p_t) v_i              value pass
// E is advanced by products only (no division, no log): exact for decays of 0 (ring buffers) and
// for any underflow. Nothing of size N × n × d is stored; the per-token work outside the products is
// O(C · n).
//
// `heads` query heads read the one memory (grouped-query heads sharing their key/value head's):
// query(g) and output(g) are head g's [c × d] queries and [c × dv] outputs. E, D and the memory
// update are computed once; each head's reads are exactly those of a memory of its own.
template <class T, class RangeOf, class QueryOf, class OutputOf>
void causal_chunk(MemoryView<T> m, ChunkWorkspace<T>& ws, Index c, bool has_decay, bool mask,
                  const RangeOf& range_of, T scale, Index heads, const QueryOf& query, const OutputOf& output,
                  const Eigen::Ref<const Matrix<T>>& k, const Eigen::Ref<const Matrix<T>>& v) {
  ABC_ASSERT(heads >= 1, "causal_chunk: the first head's pass advances the chunk's weights");
  const Index n = m.keys.rows();
  auto eff = ws.eff.topRows(c);
  for (Index g = 0; g < heads; ++g) {
    ReadScratch<T>& r = ws.read(g);
    const auto q = query(g);
    for (Index t = 0; t < c; ++t) {  // scale · q_t · k_i for i ≤ t: the lower triangle only
      T* gram = r.gram.row(t).data();
      rows_dot(k.data(), k.outerStride(), t + 1, k.cols(), q.row(t).data(), gram);
      for (Index i = 0; i <= t; ++i) gram[i] *= scale;
    }
    product<false>(product_args(q, m.keys.transpose(), r.prev.topRows(c)), scale);
    r.mix.topLeftCorner(c, c).setZero();
  }
  ws.dcum.setOnes();
  T* e = ws.eff.data();  // row i of E at e + i · n
  T* dcum = ws.dcum.data();
  T* scores = ws.scores.data();
  for (Index t = 0; t < c; ++t) {
    const T* a = has_decay ? ws.decay.row(t).data() : nullptr;
    const T* w = ws.write.row(t).data();
    mark_written<T>(has_decay, ws.decay.row(t), ws.write.row(t), m.written);
    for (Index g = 0; g < heads; ++g) {
      ReadScratch<T>& r = ws.read(g);
      // E_t and D_t advanced by the first head's pass, which every head then reads:
      // scores = Σ_{i≤t} (q_t·k_i) E_t[i] + D_t ⊙ (K̃_prev q_t).
      if (g == 0)
        chunk_scores<true>(e, n, t, a, w, r.gram.row(t).data(), dcum, r.prev.row(t).data(), scores);
      else
        chunk_scores<false>(e, n, t, a, w, r.gram.row(t).data(), dcum, r.prev.row(t).data(), scores);
      T* pd = r.pd.row(t).data();
      if (softmax_slots(scores, n, m.written.data(), mask, range_of(t))) {
        for (Index l = 0; l < n; ++l) pd[l] = scores[l] * dcum[l];
        rows_dot(e, n, t + 1, n, scores, r.mix.row(t).data());  // p_t · E_t[i]
      } else {
        std::fill(pd, pd + n, T(0));
      }
    }
  }
  for (Index g = 0; g < heads; ++g) {
    ReadScratch<T>& r = ws.read(g);
    auto out = output(g);
    product<false>(product_args(r.pd.topRows(c), m.values, out));
    product<true>(product_args(r.mix.topLeftCorner(c, c), v, out));
  }
  add_chunk(m, eff, has_decay ? ws.dcum.data() : nullptr, k, v);
}

// Rows per block of the triangular products of factored_chunk: rows i0 … i0 + 7 of a lower triangle
// reach only its first i0 + 8 columns, so the products skip most of the zeros above the diagonal.
inline constexpr Index triangle_rows = 8;

// causal_chunk for weights that factor over time, as a control's chunk_weights gives them: token i's
// weight in the memory at time t ≥ i is E_t[i] = u_i ⊙ r_t, and what is left of the memory before
// the chunk D_t = carry ⊙ r_t (u = ws.write, r = ws.decay [c × n], carry = ws.dcum [n]). Then
//   scores_t = r_t ⊙ (carry ⊙ (K̃_prev q_t) + Σ_{i≤t} (q_t·k_i) u_i)
//   out_t    = (p_t ⊙ r_t ⊙ carry)ᵀ Ṽ_prev + Σ_{i≤t} ((p_t ⊙ r_t)·u_i) v_i
// where causal_chunk advances every earlier token's weights at each token, so that each token's
// scores, softmax and reads wait on the one before. Here nothing does but the written marks: the
// sums over the chunk's tokens are triangular products (G U and M v, with G and M the lower
// triangles of q kᵀ and (P ⊙ R) Uᵀ), and the chunk's softmaxes run four rows at a time
// (softmax_rows). The memory is read and advanced as causal_chunk's; each of `heads` heads reads
// exactly what a memory of its own gives.
template <class T, class RangeOf, class QueryOf, class OutputOf>
void factored_chunk(MemoryView<T> m, ChunkWorkspace<T>& ws, Index c, bool mask, const RangeOf& range_of, T scale,
                    Index heads, const QueryOf& query, const OutputOf& output, const Eigen::Ref<const Matrix<T>>& k,
                    const Eigen::Ref<const Matrix<T>>& v) {
  const Index n = m.keys.rows();
  const auto u = ws.write.topRows(c);
  const auto r = ws.decay.topRows(c);
  const T* carry = ws.dcum.data();
  // Each head's scores before r_t: (scale · q K̃_prevᵀ) diag(carry) + G U, G = scale · q kᵀ (lower).
  for (Index g = 0; g < heads; ++g) {
    ReadScratch<T>& rs = ws.read(g);
    const auto q = query(g);
    auto gram = rs.gram.topLeftCorner(c, c);
    lower_dots(q.data(), q.outerStride(), k.data(), k.outerStride(), c, k.cols(), gram.data(), gram.outerStride());
    gram *= scale;
    auto prev = rs.prev.topRows(c);
    product<false>(product_args(q, m.keys.transpose(), prev), scale);
    for (Index i0 = 0; i0 < c; i0 += triangle_rows) {
      const Index rows = std::min(triangle_rows, c - i0), depth = i0 + rows;
      ProductArgs<T> sums = product_args(gram.block(i0, 0, rows, depth), u.topRows(depth), prev.middleRows(i0, rows));
      sums.col_scale = carry;
      product<true>(sums);
    }
  }
  // Token by token, only what depends on the order: the written marks (a slot is written once an
  // E_t entry in it is nonzero), and each head's scores scaled by r_t and masked as token t reads them.
  for (Index t = 0; t < c; ++t) {
    mark_written<T>(false, u.row(t), u.row(t), m.written);
    for (Index g = 0; g < heads; ++g) {
      T* scores = ws.read(g).prev.row(t).data();
      scale_rows(scores, n, 1, n, r.row(t).data());
      mask_slots(scores, n, m.written.data(), mask, range_of(t));
    }
  }
  for (Index g = 0; g < heads; ++g) {
    ReadScratch<T>& rs = ws.read(g);
    auto p = rs.prev.topRows(c);
    softmax_rows(p.data(), p.outerStride(), c, n, static_cast<bool*>(nullptr));  // a row reading nothing: 0
    auto pd = rs.pd.topRows(c);
    pd = p.cwiseProduct(r);
    auto mix = rs.mix.topLeftCorner(c, c);  // (p_t ⊙ r_t) · u_i for i ≤ t
    lower_dots(pd.data(), pd.outerStride(), u.data(), u.outerStride(), c, n, mix.data(), mix.outerStride());
    scale_rows(pd.data(), pd.outerStride(), c, n, carry);
    auto out = output(g);
    product<false>(product_args(pd, m.values, out));
    for (Index i0 = 0; i0 < c; i0 += triangle_rows) {
      const Index rows = std::min(triangle_rows, c - i0), depth = i0 + rows;
      product<true>(product_args(mix.block(i0, 0, rows, depth), v.topRows(depth), out.middleRows(i0, rows)));
    }
  }
  // The memory at the chunk's end: weights u_i ⊙ r_{c−1}, and the carried memory by carry ⊙ r_{c−1}.
  scale_rows(ws.write.data(), ws.write.outerStride(), c, n, r.row(c - 1).data());
  ws.dcum.array() *= r.row(c - 1).array();
  add_chunk(m, ws.write.topRows(c), ws.dcum.data(), k, v);
}

// Each token's weight at the end of a chunk of c tokens, w_i ⊙ Π_{j>i} a_j, into ws.eff by one
// backward sweep; ws.dcum is left holding Π_j a_j, what the chunk leaves of the memory before it.
// Products only: exact for decays of 0 and for any underflow.
template <class T>
void suffix_weights(ChunkWorkspace<T>& ws, Index c) {
  ws.dcum.setOnes();
  for (Index t = c - 1; t >= 0; --t) {
    ws.eff.row(t) = ws.write.row(t).cwiseProduct(ws.dcum);
    ws.dcum.array() *= ws.decay.row(t).array();
  }
}

// The memory advanced over one chunk without any read (non-causal memory build).
template <class T>
void advance_chunk(MemoryView<T> m, ChunkWorkspace<T>& ws, Index c, bool has_decay,
                   const Eigen::Ref<const Matrix<T>>& k, const Eigen::Ref<const Matrix<T>>& v) {
  for (Index t = 0; t < c; ++t) mark_written<T>(has_decay, ws.decay.row(t), ws.write.row(t), m.written);
  if (!has_decay) return add_chunk(m, ws.write.topRows(c), static_cast<const T*>(nullptr), k, v);
  suffix_weights(ws, c);
  add_chunk(m, ws.eff.topRows(c), ws.dcum.data(), k, v);
}

// Queries per block of read_all: a block's scores [rows × n] stay in cache between the two products.
inline constexpr Index read_block = 64;

// Row-wise read of a finished memory by many queries: two products and a row softmax per block of
// queries. `keys` is [n × d] in either storage order (a State's column-major K̃, or rows gathered by
// the caller).
template <class T, class Keys, class RangeOf>
void read_all(const Keys& keys, const Matrix<T>& values, const std::vector<std::uint8_t>& written,
              bool mask, const RangeOf& range_of, T scale, const Eigen::Ref<const Matrix<T>>& q, Eigen::Ref<Matrix<T>> out) {
  const Index n = keys.rows();
  Matrix<T> p(std::min(read_block, q.rows()), n);
  for (Index i0 = 0; i0 < q.rows(); i0 += read_block) {
    const Index rows = std::min(read_block, q.rows() - i0);
    auto pb = p.topRows(rows);
    if constexpr (Keys::IsRowMajor)
      pb.noalias() = scale * q.middleRows(i0, rows) * keys.transpose();  // Kᵀ's rows would be strided
    else
      product<false>(product_args(q.middleRows(i0, rows), keys.transpose(), pb), scale);
    for (Index i = 0; i < rows; ++i) mask_slots(pb.row(i).data(), n, written.data(), mask, range_of(i0 + i));
    softmax_rows(pb.data(), pb.outerStride(), rows, n, static_cast<bool*>(nullptr));  // a row reading nothing: 0
    product<false>(product_args(pb, values, out.middleRows(i0, rows)));
  }
}

// NOLINTEND(bugprone-easily-swappable-parameters)
}  // namespace kernel
ABC_NAMESPACE_END
