// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The decode step's passes over the state: update + scores over K̃'s
// columns, update + weighted sum over Ṽ's rows.
#pragma once

#include <algorithm>
#include <type_traits>

#include "../types.hpp"
#include "bf16.hpp"
#include "scalar.hpp"
#include "simd.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {
// Kernels take (rows, cols) and parallel operands of one type by design; only the library calls
// them, through checked public forms.
// NOLINTBEGIN(bugprone-easily-swappable-parameters)

/// row ← a · row + w · x, returning (updated row) · q: one pass over the row. Rows of any length
/// and alignment; the tail past the last full batch takes the scalar path.
template <class T>
T update_dot(T* row, T a, T w, const T* x, const T* q, Index n) noexcept {
#ifdef ABC_NO_SIMD
  return scalar::update_dot(row, a, w, x, q, n);
#else
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const B av(a), wv(w);
  B acc(T(0));
  Index j = 0;
  for (; j + width <= n; j += width) {
    const B r = impl::fma(av, B::load_unaligned(row + j), wv * B::load_unaligned(x + j));
    r.store_unaligned(row + j);
    acc = impl::fma(r, B::load_unaligned(q + j), acc);
  }
  return impl::hsum(acc) + scalar::update_dot(row + j, a, w, x + j, q + j, n - j);
#endif
}

/// row ← a · row + w · x, then out += p · row: one pass over the row.
template <class T>
void update_axpy(T* row, T a, T w, const T* x, T p, T* out, Index n) noexcept {
#ifdef ABC_NO_SIMD
  scalar::update_axpy(row, a, w, x, p, out, n);
#else
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const B av(a), wv(w), pv(p);
  Index j = 0;
  for (; j + width <= n; j += width) {
    const B r = impl::fma(av, B::load_unaligned(row + j), wv * B::load_unaligned(x + j));
    r.store_unaligned(row + j);
    impl::fma(pv, r, B::load_unaligned(out + j)).store_unaligned(out + j);
  }
  scalar::update_axpy(row + j, a, w, x + j, p, out + j, n - j);
#endif
}

/// x · y over n entries.
template <class T>
T dot(const T* x, const T* y, Index n) noexcept {
#ifdef ABC_NO_SIMD
  return scalar::dot(x, y, n);
#else
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  B acc(T(0));
  Index j = 0;
  for (; j + width <= n; j += width) acc = impl::fma(B::load_unaligned(x + j), B::load_unaligned(y + j), acc);
  return impl::hsum(acc) + scalar::dot(x + j, y + j, n - j);
#endif
}

/// out += p · x over n entries.
template <class T>
void axpy(T p, const T* x, T* out, Index n) noexcept {
#ifdef ABC_NO_SIMD
  scalar::axpy(p, x, out, n);
#else
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const B pv(p);
  Index j = 0;
  for (; j + width <= n; j += width)
    impl::fma(pv, B::load_unaligned(x + j), B::load_unaligned(out + j)).store_unaligned(out + j);
  scalar::axpy(p, x + j, out + j, n - j);
#endif
}

/// row_i ← row_i ⊙ a over `count` rows of width n at stride ld.
template <class T>
void scale_rows(T* rows, Index ld, Index count, Index n, const T* a) noexcept {
#ifdef ABC_NO_SIMD
  scalar::scale_rows(rows, ld, count, n, a);
#else
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const Index full = n - n % width;
  for (Index i = 0; i < count; ++i) {
    T* row = rows + i * ld;
    for (Index j = 0; j < full; j += width) (B::load_unaligned(row + j) * B::load_unaligned(a + j)).store_unaligned(row + j);
    scalar::scale_rows(row + full, ld, 1, n - full, a + full);
  }
#endif
}

#ifndef ABC_NO_SIMD
namespace impl {
// M (1–4) rows of rows_dot, rows i … i + M − 1 of row_at: their sums in registers, reduced together
// by one hsum4 (padded with zero sums), since the reduction, not the multiply-adds, is most of a
// short dot. A row's sum does not depend on the rows beside it.
template <int M, class B, class T, class RowAt>
ABC_FORCE_INLINE void rows_dot_group(const RowAt row_at, Index i, Index n, const T* x, T* out) noexcept {
  constexpr Index width = Index(B::size);
  const Index full = n - n % width;
  const T* r[4];
  for (int k = 0; k < M; ++k) r[k] = row_at(i + k);
  B acc[4] = {B(T(0)), B(T(0)), B(T(0)), B(T(0))};
  for (Index j = 0; j < full; j += width) {
    const B xv = in_register(B::load_unaligned(x + j));
    for (int k = 0; k < M; ++k) acc[k] = impl::fma(B::load_unaligned(r[k] + j), xv, acc[k]);
  }
  // No tail: the sums go straight to out (a sum that starts at +0 is never −0, so the empty tail's
  // + 0 below would change no bit; the staging and the scalar loop showed in the causal chunk).
  if (M == 4 && full == n) {
    hsum4(acc[0], acc[1], acc[2], acc[3], out);
    return;
  }
  T sums[4];
  hsum4(acc[0], acc[1], acc[2], acc[3], sums);
  for (int k = 0; k < M; ++k) out[k] = sums[k] + scalar::dot(r[k] + full, x + full, n - full);
}
}  // namespace impl
#endif

/// out_i = row_at(i) · x over `count` rows of width n, wherever each row is (row_at(i) points at
/// row i): four rows at a time, so that four sums are in flight, x's batches are loaded once for
/// the four, and one reduction ends them.
template <class T, class RowAt>
void rows_dot_at(const RowAt row_at, Index count, Index n, const T* x, T* out) noexcept {
#ifdef ABC_NO_SIMD
  scalar::rows_dot_at(row_at, count, n, x, out);
#else
  using B = batch<T>;
  Index i = 0;
  for (; i + 4 <= count; i += 4) impl::rows_dot_group<4, B>(row_at, i, n, x, out + i);
  switch (count - i) {
    case 3: impl::rows_dot_group<3, B>(row_at, i, n, x, out + i); break;
    case 2: impl::rows_dot_group<2, B>(row_at, i, n, x, out + i); break;
    case 1: impl::rows_dot_group<1, B>(row_at, i, n, x, out + i); break;
    default: break;
  }
#endif
}

/// out_i = row_i · x over `count` rows of width n at stride ld.
template <class T>
void rows_dot(const T* rows, Index ld, Index count, Index n, const T* x, T* out) noexcept {
  kernel::rows_dot_at(StridedRows<const T>{rows, ld}, count, n, x, out);
}

#ifndef ABC_NO_SIMD
namespace impl {
// Rows t0 … t0 + 3 of X against rows i0 … i0 + CB − 1 of Y: the 4 · CB sums in registers, each
// pair of rows' batches loaded once for the block (and held in a register for the multiply-adds
// that use it), the sums reduced together (hsum16; hsum4 for 4 × 2). Rows past the last are read
// as the last (valid memory; the caller stores only real entries).
template <int CB, class B, class T>
ABC_FORCE_INLINE void lower_dots_block(const T* x, Index ldx, const T* y, Index ldy, Index t0, Index i0, Index c,
                                       Index n, T* sums) noexcept {
  constexpr Index width = Index(B::size);
  const Index full = n - n % width;
  const T* xr[4];
  const T* yr[CB];
  for (int r = 0; r < 4; ++r) xr[r] = x + std::min(t0 + r, c - 1) * ldx;
  for (int q = 0; q < CB; ++q) yr[q] = y + std::min(i0 + q, c - 1) * ldy;
  B acc[4][CB];
  for (int r = 0; r < 4; ++r)
    for (int q = 0; q < CB; ++q) acc[r][q] = B(T(0));
  for (Index j = 0; j < full; j += width) {
    B yv[CB];
    for (int q = 0; q < CB; ++q) yv[q] = in_register(B::load_unaligned(yr[q] + j));
    for (int r = 0; r < 4; ++r) {
      const B xv = in_register(B::load_unaligned(xr[r] + j));
      for (int q = 0; q < CB; ++q) acc[r][q] = impl::fma(xv, yv[q], acc[r][q]);
    }
  }
  if constexpr (CB == 4) {
    hsum16(&acc[0][0], sums);  // sums[4r + q] for acc[r][q]
    if (full < n)
      for (int r = 0; r < 4; ++r)
        for (int q = 0; q < 4; ++q) sums[r * 4 + q] += scalar::dot(xr[r] + full, yr[q] + full, n - full);
    return;
  }
  const B zero(T(0));
  for (int r = 0; r < 4; ++r) {
    T* out = sums + r * 4;
    hsum4(acc[r][0], acc[r][1], zero, zero, out);
    if (full < n)
      for (int q = 0; q < CB; ++q) out[q] += scalar::dot(xr[r] + full, yr[q] + full, n - full);
  }
}
}  // namespace impl
#endif

/// The lower triangle of X Yᵀ for c rows of each (width n; row t of X at x + t · ldx, row i of Y at
/// y + i · ldy): out(t, i) = x_t · y_i for i ≤ t, and 0 above the diagonal (row t at out + t · ldo).
/// Blocks of 4 × 4 dots (4 × 2 with 16-register ISAs), so each batch loaded feeds four or two
/// multiply-adds and one reduction ends the block's sums: a causal chunk's q · k and p · u triangles.
template <class T>
void lower_dots(const T* x, Index ldx, const T* y, Index ldy, Index c, Index n, T* out, Index ldo) noexcept {
#ifdef ABC_NO_SIMD
  for (Index t = 0; t < c; ++t) {
    T* row = out + t * ldo;
    for (Index i = 0; i <= t; ++i) row[i] = scalar::dot(x + t * ldx, y + i * ldy, n);
    std::fill(row + t + 1, row + c, T(0));
  }
#else
  using B = batch<T>;
  constexpr int CB = sizeof(B) >= 64 ? 4 : 2;  // AVX-512: 32 vector registers
  T sums[16];
  for (Index t0 = 0; t0 < c; t0 += 4) {
    const Index rows = std::min<Index>(4, c - t0);
    for (Index i0 = 0; i0 < t0 + rows; i0 += CB) {
      impl::lower_dots_block<CB, B>(x, ldx, y, ldy, t0, i0, c, n, sums);
      // Each block's sums copied whole, and the entries above the diagonal zeroed after: choosing
      // entry by entry compiled to a masked load of the sums just stored, which waits for the store.
      const Index cols = std::min<Index>(CB, c - i0);
      for (Index r = 0; r < rows; ++r) {
        T* row = out + (t0 + r) * ldo + i0;
        if (cols == CB)
          for (int q = 0; q < CB; ++q) row[q] = sums[r * 4 + q];
        else
          for (Index q = 0; q < cols; ++q) row[q] = sums[r * 4 + q];
      }
    }
    for (Index r = 0; r < rows; ++r) {  // above the diagonal
      const Index t = t0 + r;
      std::fill(out + t * ldo + t + 1, out + t * ldo + c, T(0));
    }
  }
#endif
}

#ifndef ABC_NO_SIMD
namespace impl {
// Slots [j, j + K·width) of chunk_scores: the sums, decays and D stay in registers while the rows
// stream past, each row loaded (and, with Update, scaled and stored) once.
template <int K, bool Update, class B, class T>
ABC_FORCE_INLINE void chunk_scores_block(T* e, Index n, Index t, const T* a, const T* w, const T* g, T* dcum,
                                         const T* prev, T* out, Index j) noexcept {
  constexpr Index width = Index(B::size);
  B acc[K], av[K];
  for (int c = 0; c < K; ++c) {
    acc[c] = B(T(0));
    if (Update && a) av[c] = B::load_unaligned(a + j + c * width);
  }
  for (Index i = 0; i < t; ++i) {
    T* row = e + i * n + j;
    const B gv(g[i]);
    for (int c = 0; c < K; ++c) {
      B r = B::load_unaligned(row + c * width);
      if (Update && a) {
        r = r * av[c];
        r.store_unaligned(row + c * width);
      }
      acc[c] = impl::fma(gv, r, acc[c]);
    }
  }
  T* last = e + t * n + j;
  const B gt(g[t]);
  for (int c = 0; c < K; ++c) {
    B r;
    if constexpr (Update) {
      r = B::load_unaligned(w + j + c * width);
      r.store_unaligned(last + c * width);
    } else {
      r = B::load_unaligned(last + c * width);
    }
    acc[c] = impl::fma(gt, r, acc[c]);
    B d = B::load_unaligned(dcum + j + c * width);
    if (Update && a) {
      d = d * av[c];
      d.store_unaligned(dcum + j + c * width);
    }
    impl::fma(d, B::load_unaligned(prev + j + c * width), acc[c]).store_unaligned(out + j + c * width);
  }
}
}  // namespace impl
#endif

/// Token t of a causal chunk over its weight rows E (row i at e + i · n, n slots): with Update,
/// E[i] ← a ⊙ E[i] for i < t (a null: nothing decays), E[t] ← w and D ← a ⊙ D, the token's share of
/// the chunk's weights advanced in place; then out = Σ_{i≤t} g_i E[i] + D ⊙ prev, the token's scores
/// from its products with the chunk's keys (g) and with the carried memory (prev). One pass over
/// the rows; without Update (the other query heads of a group) the rows are only read. The same
/// bits either way, and on the scalar path.
template <bool Update, class T>
void chunk_scores(T* e, Index n, Index t, const T* a, const T* w, const T* g, T* dcum, const T* prev,
                  T* out) noexcept {
#ifdef ABC_NO_SIMD
  scalar::chunk_scores<Update>(e, n, t, a, w, g, dcum, prev, out);
#else
  using B = batch<T>;
  const Index j = impl::for_blocks<4, B>(0, n, [&](auto tag, auto k, Index at) ABC_INLINE_LAMBDA {
    impl::chunk_scores_block<decltype(k)::value, Update, typename decltype(tag)::type>(e, n, t, a, w, g, dcum, prev,
                                                                                      out, at);
  });
  scalar::chunk_scores<Update>(e, n, t, a, w, g, dcum, prev, out, j);  // the last few slots
#endif
}

/// What a decode step's pass does to the state as it reads it: nothing (`read`), the dense update
/// a_l · entry + w_l · x_j (`update`), or the decay of a sparse schedule (`decay`): a_l · entry, and
/// the update only in the slots with a write (w_l ≠ 0), so a slot with no write costs one multiply
/// per entry, not two. `decay` differs from `update` at most in the sign of a zero entry (a_l · entry
/// against a_l · entry + 0 · x_j). `overwrite`: one slot's entries replaced by weight · x_j (a ring
/// buffer's write, given as a OneWrite), every other entry only read.
enum class Pass { read, update, decay, overwrite };

/// The slot a Pass::overwrite replaces (counted from the pass's first slot; none when outside the
/// pass's slots) and the weight of its new row.
template <class T>
struct OneWrite {
  Index slot = -1;
  T weight = T(0);
  /// The same write, counted from slot `first`.
  OneWrite from(Index first) const noexcept { return {slot - first, weight}; }
};

/// The row of slot `one.slot` of an n × d column-major block (column j at cols + j · ld) set to
/// weight · x, where it is one of the block's n slots.
template <class T, class S>
void overwrite_row(S* cols, Index ld, Index n, Index d, const OneWrite<T>& one, const T* x) noexcept {
  if (one.slot < 0 || one.slot >= n) return;
  for (Index j = 0; j < d; ++j) store_elem(cols + one.slot + j * ld, one.weight * x[j]);
}

#ifndef ABC_NO_SIMD
namespace impl {
// Slots [0, K·width) of columns_pass: the slots' scores, decays and writes stay in registers while
// the d columns stream past, two at a time so that each accumulator's chain of multiply-adds is half
// as long (the pass is otherwise bound by their latency, not by its loads). Pass::overwrite blends
// the new entry into the batch that holds the slot and stores that batch: the new row stored alone
// beforehand would be d single-entry stores that these batch loads cannot be forwarded from (each
// would wait for its store to reach the cache). Inlined into columns_pass: g++ called the updating
// pass's block out of line, which made ABC-MLP's step slower (bench/README.md, round twenty-one).
template <int K, Pass P, class B, class T, class S>
ABC_FORCE_INLINE void dot_columns(S* cols, Index ld, Index d, const T* a, const T* w, const T* x, const T* q,
                                  T scale, T* dots, const OneWrite<T>& one = {}) noexcept {
  constexpr Index width = Index(B::size);
  constexpr bool update = P == Pass::update || P == Pass::decay;
  constexpr bool overwrite = P == Pass::overwrite;
  if constexpr (overwrite)
    if (one.slot < 0 || one.slot >= K * width) return dot_columns<K, Pass::read, B>(cols, ld, d, a, w, x, q, scale, dots);
  const Index hit = overwrite ? one.slot / width : -1;  // the batch holding the overwritten slot
  const auto in_slot = impl::lane_indices<B>() == B(T(overwrite ? one.slot % width : 0));
  const B weight(one.weight);
  B acc[K], acc2[K], av[K], wv[K];  // av, wv: used only when updating
  bool wrote[K];                    // Pass::decay: whether batch c holds a slot with a write
  for (int c = 0; c < K; ++c) {
    acc[c] = acc2[c] = B(T(0));
    if constexpr (update) {
      av[c] = B::load_unaligned(a + c * width);
      wv[c] = B::load_unaligned(w + c * width);
      wrote[c] = P == Pass::update || xsimd::any(wv[c] != B(T(0)));
    }
  }
  const auto column = [&](S* col, T qj, T xj, B* sum) {
    const B qb(qj);
    if constexpr (update) {
      const B xb(xj);
      for (int c = 0; c < K; ++c) {
        const B old = load_batch<B>(col + c * width);
        const B r = wrote[c] ? impl::fma(av[c], old, wv[c] * xb) : av[c] * old;
        store_batch(col + c * width, r);
        sum[c] = impl::fma(r, qb, sum[c]);
      }
    } else {
      for (int c = 0; c < K; ++c) {
        B e = load_batch<B>(col + c * width);
        if constexpr (overwrite)
          if (c == hit) {
            e = xsimd::select(in_slot, weight * B(xj), e);
            store_batch(col + c * width, e);
          }
        sum[c] = impl::fma(e, qb, sum[c]);
      }
    }
  };
  constexpr bool uses_x = P != Pass::read;
  Index j = 0;
  for (; j + 2 <= d; j += 2) {
    column(cols + j * ld, q[j], uses_x ? x[j] : T(0), acc);
    column(cols + (j + 1) * ld, q[j + 1], uses_x ? x[j + 1] : T(0), acc2);
  }
  if (j < d) column(cols + j * ld, q[j], uses_x ? x[j] : T(0), acc);
  const B sv(scale);
  for (int c = 0; c < K; ++c) (sv * (acc[c] + acc2[c])).store_unaligned(dots + c * width);
}

// Columns [j0, j0 + K·width) of out = Σ_l p_l · row_l: the K output batches (and x's) stay in
// registers across all n rows, so no row waits on the previous row's store of out.
template <int K, Pass P, class B, class T, class RowAt>
void axpy_columns(const RowAt row_at, Index j0, Index n, const T* a, const T* w, const T* x, const T* p,
                  T* out) noexcept {
  constexpr Index width = Index(B::size);
  B acc[K], xv[K];  // xv: x's columns, used only when updating
  for (int c = 0; c < K; ++c) {
    acc[c] = B(T(0));
    if constexpr (P != Pass::read) xv[c] = B::load_unaligned(x + c * width);
  }
  for (Index l = 0; l < n; ++l) {
    auto* const row = row_at(l) + j0;
    const B pv(p[l]);
    if constexpr (P != Pass::read) {
      const B av(a[l]);
      if (P == Pass::update || w[l] != T(0)) {
        const B wv(w[l]);
        for (int c = 0; c < K; ++c) {
          const B r = impl::fma(av, load_batch<B>(row + c * width), wv * xv[c]);
          store_batch(row + c * width, r);
          acc[c] = impl::fma(pv, r, acc[c]);
        }
      } else {
        for (int c = 0; c < K; ++c) {
          const B r = av * load_batch<B>(row + c * width);
          store_batch(row + c * width, r);
          acc[c] = impl::fma(pv, r, acc[c]);
        }
      }
    } else if (p[l] != T(0)) {
      for (int c = 0; c < K; ++c) acc[c] = impl::fma(pv, load_batch<B>(row + c * width), acc[c]);
    }
  }
  for (int c = 0; c < K; ++c) acc[c].store_unaligned(out + c * width);
}

// Whether any of x's n entries is zero (of either sign): a batch compare per width entries, one
// test at the end.
template <class T>
bool any_zero(const T* x, Index n) noexcept {
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  Index l = 0;
  if (n >= width) {
    auto zero = B::load_unaligned(x) == B(T(0));
    for (l = width; l + width <= n; l += width) zero = zero || B::load_unaligned(x + l) == B(T(0));
    if (xsimd::any(zero)) return true;
  }
  for (; l < n; ++l)
    if (x[l] == T(0)) return true;
  return false;
}

// Columns [j0, j0 + K·width) of out = Σ_l p_l · row_l for a read-only pass over Ṽ, in two sets of
// sums: even rows in `sum`, odd rows in `sum2`, added at the end. A read is one multiply-add per
// batch and row, so with one set it waits on the chain of n dependent multiply-adds of each sum,
// not on its loads; two halve the chain. Rows with p_l = 0 are not read, unless `Dense`: then no
// row tests its weight (a read whose weights impl::any_zero found nonzero, or a product that reads
// every row, weighted_rows_interleaved), which saves a load, compare and branch per row.
template <int K, bool Dense, class B, class T, class S>
void read_columns(const S* rows, Index ld, Index j0, Index n, const T* p, T* out) noexcept {
  constexpr Index width = Index(B::size);
  B sum[K], sum2[K];  // two named arrays, not one of two: g++ then keeps both in registers
  for (int c = 0; c < K; ++c) sum[c] = sum2[c] = B(T(0));
  const auto add_row = [&](Index l, B* acc) {
    if (!Dense && p[l] == T(0)) return;
    const S* row = rows + l * ld + j0;
    const B pv(p[l]);
    for (int c = 0; c < K; ++c) acc[c] = impl::fma(pv, load_batch<B>(row + c * width), acc[c]);
  };
  Index l = 0;
  for (; l + 2 <= n; l += 2) {
    add_row(l, sum);
    add_row(l + 1, sum2);
  }
  if (l < n) add_row(l, sum);  // an odd count's last row
  for (int c = 0; c < K; ++c) (sum[c] + sum2[c]).store_unaligned(out + c * width);
}
}  // namespace impl
#endif

/// out = Σ_l p_l · row_at(l) over n read-only rows of width dv, wherever each row is (overwritten):
/// the vector–matrix product pᵀR, the output held in registers a column block at a time (the
/// columns past the last full batch as columns_pass's slots). Rows with p_l = 0 are not read.
template <class T, class RowAt>
void weighted_rows_at(const RowAt row_at, Index n, Index dv, const T* p, T* out) noexcept {
#ifdef ABC_NO_SIMD
  scalar::weighted_rows_at(row_at, 0, n, dv, p, out);
#else
  using B = batch<T>;
  const T* none = nullptr;  // no update: no decays, writes or input
  const Index j = impl::for_blocks<4, B>(0, dv, [&](auto tag, auto k, Index at) ABC_INLINE_LAMBDA {
    impl::axpy_columns<decltype(k)::value, Pass::read, typename decltype(tag)::type>(row_at, at, n, none, none, none,
                                                                                    p, out + at);
  });
  if (j < dv) scalar::weighted_rows_at(row_at, j, n, dv - j, p, out + j);
#endif
}

/// out = Σ_l p_l · row_l over n read-only rows of width dv at stride ld (overwritten): weighted_rows_at
/// over rows at a fixed stride.
template <class T, class S>
void weighted_rows(const S* rows, Index ld, Index n, Index dv, const T* p, T* out) noexcept {
  kernel::weighted_rows_at(StridedRows<const S>{rows, ld}, n, dv, p, out);
}

/// out = Σ_l p_l · row_l over n read-only rows of width dv at stride ld (overwritten), each entry
/// summed in two sets, the even rows' and the odd rows', added at the end: the chain of dependent
/// multiply-adds behind each entry is half weighted_rows's, which bounds a short product (a decode
/// step's logits x W_φᵀ over a memory of 16 or 32 slots waits on that chain, not on its loads).
/// Every row is read (a zero weight adds an exact zero), and each entry gets the same arithmetic
/// whatever dv and wherever its column falls (a block, a narrower batch or the scalar path), so a
/// column's result does not depend on the columns beside it. Not the order of weighted_rows or of
/// an updating pass.
template <class T, class S>
void weighted_rows_interleaved(const S* rows, Index ld, Index n, Index dv, const T* p, T* out) noexcept {
  Index j = 0;
#ifndef ABC_NO_SIMD
  using B = batch<T>;
  j = impl::for_blocks<4, B>(0, dv, [&](auto tag, auto k, Index at) ABC_INLINE_LAMBDA {
    impl::read_columns<decltype(k)::value, true, typename decltype(tag)::type>(rows, ld, at, n, p, out + at);
  });
#endif
  scalar::weighted_rows_interleaved(rows, ld, j, n, dv - j, p, out + j);
}

/// The read of a decode step over K̃, stored column-major (a State's layout: column j of the n × d
/// block at cols + j · ld): entry (l, j) updated as P says (see Pass), then
/// dots_l = scale · Σ_j entry(l, j) · q_j. One pass over the columns; blocks of 4 batches of slots
/// (64 floats with AVX-512), then one of the 1 to 3 batches left, keep their sums, decays and writes
/// in registers, so no slot's score needs a horizontal sum. The slots past the last full batch take
/// a batch of each narrower width that fits (impl::half_batch), and the last few the scalar path
/// (which updates `decay` slots as `update` does, and takes an overwritten row written beforehand:
/// its single loads are forwarded from single stores). `one` is Pass::overwrite's write; a, w are
/// not read.
template <Pass P, class T, class S>
void columns_pass(S* cols, Index ld, Index n, Index d, const T* a, const T* w, const T* x, const T* q, T scale,
                  T* dots, const OneWrite<T>& one = {}) noexcept {
  constexpr bool update = P == Pass::update || P == Pass::decay;
  constexpr bool overwrite = P == Pass::overwrite;
#ifdef ABC_NO_SIMD
  if constexpr (overwrite) overwrite_row(cols, ld, n, d, one, x);
  scalar::columns_dot<update>(cols, ld, n, d, a, w, x, q, scale, dots);
#else
  using B = batch<T>;
  const auto at_slot = [&](const T* p, Index l) { return overwrite ? p : p + l; };  // (overwrite: a, w may be null)
  const Index l = impl::for_blocks<4, B>(0, n, [&](auto tag, auto k, Index at) ABC_INLINE_LAMBDA {
    impl::dot_columns<decltype(k)::value, P, typename decltype(tag)::type>(
        cols + at, ld, d, at_slot(a, at), at_slot(w, at), x, q, scale, dots + at, one.from(at));
  });
  if (l < n) {
    if constexpr (overwrite) overwrite_row(cols + l, ld, n - l, d, one.from(l), x);
    scalar::columns_dot<update>(cols + l, ld, n - l, d, at_slot(a, l), at_slot(w, l), x, q, scale, dots + l);
  }
#endif
}

/// columns_pass with the dense update (Update) or none.
template <bool Update, class T, class S>
void columns_dot(S* cols, Index ld, Index n, Index d, const T* a, const T* w, const T* x, const T* q, T scale,
                 T* dots) noexcept {
  columns_pass<Update ? Pass::update : Pass::read>(cols, ld, n, d, a, w, x, q, scale, dots);
}

/// The readout of a decode step over Ṽ: for each of the n rows of width dv at stride ld, row_l
/// updated as P says (see Pass), and out = Σ_l p_l · row_l (overwritten). One pass over the rows,
/// the output held in registers a column block at a time; the columns past the last full batch as
/// columns_pass's slots. With Pass::read, rows with p_l = 0 are not read (an empty or fully masked
/// slot costs nothing), a, w and x are not read either, and the sums go by two sets (even and odd
/// rows, impl::read_columns), so an updating pass and a read add the rows in different orders.
template <Pass P, class T, class S>
void rows_pass(S* rows, Index ld, Index n, Index dv, const T* a, const T* w, const T* x, const T* p,
               T* out) noexcept {
  if constexpr (P == Pass::read) {
    (void)a, (void)w, (void)x;
#ifdef ABC_NO_SIMD
    scalar::weighted_rows(static_cast<const S*>(rows), ld, n, dv, p, out);
#else
    // Two sets of sums (impl::read_columns): not the order of weighted_rows or of an updating pass.
    using B = batch<T>;
    const auto read = [&](auto dense) {
      constexpr bool D = decltype(dense)::value;
      return impl::for_blocks<4, B>(0, dv, [&](auto tag, auto k, Index at) ABC_INLINE_LAMBDA {
        impl::read_columns<decltype(k)::value, D, typename decltype(tag)::type>(rows, ld, at, n, p, out + at);
      });
    };
    const Index j = impl::any_zero(p, n) ? read(std::false_type{}) : read(std::true_type{});
    if (j < dv) scalar::weighted_rows(static_cast<const S*>(rows) + j, ld, n, dv - j, p, out + j);
#endif
  } else {
#ifdef ABC_NO_SIMD
    scalar::rows_axpy<true>(rows, ld, n, dv, a, w, x, p, out);
#else
    using B = batch<T>;
    const StridedRows<S> row_at{rows, ld};
    const Index j = impl::for_blocks<4, B>(0, dv, [&](auto tag, auto k, Index at) ABC_INLINE_LAMBDA {
      impl::axpy_columns<decltype(k)::value, P, typename decltype(tag)::type>(row_at, at, n, a, w, x + at, p, out + at);
    });
    if (j < dv) scalar::rows_axpy<true>(rows + j, ld, n, dv - j, a, w, x + j, p, out + j);
#endif
  }
}

/// rows_pass with the dense update (Update) or none.
template <bool Update, class T, class S>
void rows_axpy(S* rows, Index ld, Index n, Index dv, const T* a, const T* w, const T* x, const T* p,
               T* out) noexcept {
  rows_pass<Update ? Pass::update : Pass::read>(rows, ld, n, dv, a, w, x, p, out);
}

/// The most query heads columns_pass_heads and rows_pass_heads serve in one pass over a memory
/// stored in another type than T (the registers hold four heads' sums).
inline constexpr Index max_shared_heads = 4;

#ifndef ABC_NO_SIMD
namespace impl {
// dot_columns for H queries (q[g], dots[g] + at): every query's sums take the updated column from
// the same register, each in the order dot_columns would add them.
template <int K, int H, Pass P, class B, class T, class S>
void dot_columns_heads(S* cols, Index ld, Index d, const T* a, const T* w, const T* x, const T* const* q, T scale,
                       T* const* dots, Index at) noexcept {
  constexpr Index width = Index(B::size);
  constexpr bool update = P != Pass::read;
  B acc[H][K], acc2[H][K], av[K], wv[K];  // av, wv: used only when updating
  bool wrote[K];                          // Pass::decay: whether batch c holds a slot with a write
  // The queries' pointers in locals: the state's stores (through types that may alias anything)
  // would otherwise make the compiler reload them from the caller's array at every column.
  const T* qs[H];
  for (int g = 0; g < H; ++g) qs[g] = q[g];
  for (int c = 0; c < K; ++c) {
    for (int g = 0; g < H; ++g) acc[g][c] = acc2[g][c] = B(T(0));
    if constexpr (update) {
      av[c] = B::load_unaligned(a + c * width);
      wv[c] = B::load_unaligned(w + c * width);
      wrote[c] = P == Pass::update || xsimd::any(wv[c] != B(T(0)));
    }
  }
  const auto column = [&](S* col, Index j, B (*sum)[K]) {
    B qb[H];
    for (int g = 0; g < H; ++g) qb[g] = B(qs[g][j]);
    if constexpr (update) {
      const B xb(x[j]);
      for (int c = 0; c < K; ++c) {
        const B old = load_batch<B>(col + c * width);
        const B r = wrote[c] ? impl::fma(av[c], old, wv[c] * xb) : av[c] * old;
        store_batch(col + c * width, r);
        for (int g = 0; g < H; ++g) sum[g][c] = impl::fma(r, qb[g], sum[g][c]);
      }
    } else {
      for (int c = 0; c < K; ++c) {
        const B r = load_batch<B>(col + c * width);
        for (int g = 0; g < H; ++g) sum[g][c] = impl::fma(r, qb[g], sum[g][c]);
      }
    }
  };
  Index j = 0;
  for (; j + 2 <= d; j += 2) {
    column(cols + j * ld, j, acc);
    column(cols + (j + 1) * ld, j + 1, acc2);
  }
  if (j < d) column(cols + j * ld, j, acc);
  const B sv(scale);
  for (int g = 0; g < H; ++g)
    for (int c = 0; c < K; ++c) (sv * (acc[g][c] + acc2[g][c])).store_unaligned(dots[g] + at + c * width);
}

// axpy_columns for H heads (p[g], out[g] + at): each row's batches are updated and stored, then
// summed by every head from the same registers. The first head of an updating pass takes every
// row; the others, as a read, only the rows they weigh (p[g]_l ≠ 0); each head's sums in the order
// axpy_columns would add them.
template <int K, int H, Pass P, class B, class T, class Row>
void axpy_columns_heads(Row* rows, Index ld, Index n, const T* a, const T* w, const T* x, const T* const* p,
                        T* const* out, Index at) noexcept {
  constexpr Index width = Index(B::size);
  B acc[H][K], xv[K];  // xv: x's columns, used only when updating
  const T* ps[H];       // in locals, as dot_columns_heads' queries
  for (int g = 0; g < H; ++g) ps[g] = p[g];
  for (int c = 0; c < K; ++c) {
    for (int g = 0; g < H; ++g) acc[g][c] = B(T(0));
    if constexpr (P != Pass::read) xv[c] = B::load_unaligned(x + c * width);
  }
  for (Index l = 0; l < n; ++l) {
    Row* row = rows + l * ld;
    bool take[H];
    bool any = P != Pass::read;
    for (int g = 0; g < H; ++g) {
      take[g] = (g == 0 && P != Pass::read) || ps[g][l] != T(0);
      any = any || take[g];
    }
    if (!any) continue;
    B r[K];
    if constexpr (P != Pass::read) {
      const B av(a[l]);
      if (P == Pass::update || w[l] != T(0)) {
        const B wv(w[l]);
        for (int c = 0; c < K; ++c) {
          r[c] = impl::fma(av, load_batch<B>(row + c * width), wv * xv[c]);
          store_batch(row + c * width, r[c]);
        }
      } else {
        for (int c = 0; c < K; ++c) {
          r[c] = av * load_batch<B>(row + c * width);
          store_batch(row + c * width, r[c]);
        }
      }
    } else {
      for (int c = 0; c < K; ++c) r[c] = load_batch<B>(row + c * width);
    }
    for (int g = 0; g < H; ++g)
      if (take[g]) {
        const B pv(ps[g][l]);
        for (int c = 0; c < K; ++c) acc[g][c] = impl::fma(pv, r[c], acc[g][c]);
      }
  }
  for (int g = 0; g < H; ++g)
    for (int c = 0; c < K; ++c) acc[g][c].store_unaligned(out[g] + at + c * width);
}

// The batches of slots (K̃) or of columns (Ṽ) one block of a pass for 2–4 heads keeps in
// registers: as many as the sums of the heads (two sets each over K̃), the block's decays and
// writes (or x's batches) and the loaded rows leave room for in the register file (32 vector
// registers with AVX-512, 16 with SSE and AVX), so that nothing spills.
template <class B>
constexpr int block_batches(int heads, bool columns) noexcept {
  const bool wide = sizeof(B) >= 64;
  if (columns) return wide ? (heads == 2 ? 4 : 2) : (heads == 2 ? 2 : 1);
  return wide ? 4 : (heads == 2 ? 2 : 1);
}

// columns_pass_heads for H queries (q[g], dots[g]): blocks of K batches of slots (block_batches),
// then one of the full batches left, then narrower batches and the scalar path, as columns_pass.
template <int H, Pass P, class T, class S>
void columns_pass_group(S* cols, Index ld, Index n, Index d, const T* a, const T* w, const T* x, const T* const* q,
                        T scale, T* const* dots) noexcept {
  using B = batch<T>;
  constexpr int K = block_batches<B>(H, true);
  const Index l = for_blocks<K, B>(0, n, [&](auto tag, auto k, Index at) ABC_INLINE_LAMBDA {
    dot_columns_heads<decltype(k)::value, H, P, typename decltype(tag)::type>(cols + at, ld, d, a + at, w + at, x, q,
                                                                              scale, dots, at);
  });
  if (l == n) return;
  T* tail[H];
  for (int g = 0; g < H; ++g) tail[g] = dots[g] + l;
  scalar::columns_dot_heads<P != Pass::read>(cols + l, ld, n - l, d, a + l, w + l, x, H, q, scale, tail);
}

// rows_pass_heads for H heads (p[g], out[g]): blocks of K batches of columns (block_batches), then
// one of the full batches left, then narrower batches and the scalar path, as rows_pass.
template <int H, Pass P, class T, class Row>
void rows_pass_group(Row* rows, Index ld, Index n, Index dv, const T* a, const T* w, const T* x, const T* const* p,
                     T* const* out) noexcept {
  using B = batch<T>;
  constexpr int K = block_batches<B>(H, false);
  // Only an updating pass reads x: a read passes none, which no offset may be added to.
  const auto x_at = [x](Index at) { return P == Pass::read ? x : x + at; };
  const Index j = for_blocks<K, B>(0, dv, [&](auto tag, auto k, Index at) ABC_INLINE_LAMBDA {
    axpy_columns_heads<decltype(k)::value, H, P, typename decltype(tag)::type>(rows + at, ld, n, a, w, x_at(at), p,
                                                                               out, at);
  });
  if (j == dv) return;
  T* tail[H];
  for (int g = 0; g < H; ++g) tail[g] = out[g] + j;
  scalar::rows_axpy_heads<P != Pass::read>(rows + j, ld, n, dv - j, a, w, x_at(j), H, p, tail);
}

// f(std::integral_constant<int, h>{}) for 2 ≤ h ≤ 4.
template <class F>
void with_heads(Index h, const F& f) {
  switch (h) {
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    default: f(std::integral_constant<int, 4>{}); break;
  }
}
}  // namespace impl
#endif

/// columns_pass for the `heads` queries that read one memory (a group of GQA): the first query's
/// pass updates K̃ as P says, and every query h forms dots(h) = scale · K̃ q(h) over the updated
/// entries, in the order a pass of its own would add them. A memory in T is read again by each
/// further query (from cache: one pass shared by the queries measured no faster); a memory
/// stored in another type (bfloat16, at most `max_shared_heads` queries) is passed over once, every
/// query reading the entries as updated in T before they are rounded and stored: what the call
/// gives on the memory widened to T. q(h) and dots(h) give each query's d entries and n dots.
template <Pass P, class T, class S, class QueryOf, class DotsOf>
void columns_pass_heads(S* cols, Index ld, Index n, Index d, const T* a, const T* w, const T* x, Index heads,
                        const QueryOf& q, T scale, const DotsOf& dots, const OneWrite<T>& one = {}) noexcept {
  if constexpr (std::is_same<S, T>::value) {
    columns_pass<P>(cols, ld, n, d, a, w, x, q(0), scale, dots(0), one);
    for (Index g = 1; g < heads; ++g) columns_pass<Pass::read>(cols, ld, n, d, a, w, x, q(g), scale, dots(g));
  } else {
    static_assert(P != Pass::overwrite, "a memory stored in another type takes no one-slot overwrite");
    (void)one;
    ABC_ASSERT(heads >= 1 && heads <= max_shared_heads, "a memory stored in another type is read by at most four queries");
    if (heads == 1) return columns_pass<P>(cols, ld, n, d, a, w, x, q(0), scale, dots(0));
    const T* qs[max_shared_heads];
    T* ds[max_shared_heads];
    for (Index g = 0; g < heads; ++g) qs[g] = q(g), ds[g] = dots(g);
#ifdef ABC_NO_SIMD
    scalar::columns_dot_heads<P != Pass::read>(cols, ld, n, d, a, w, x, heads, qs, scale, ds);
#else
    impl::with_heads(heads, [&](auto h) {
      impl::columns_pass_group<decltype(h)::value, P>(cols, ld, n, d, a, w, x, qs, scale, ds);
    });
#endif
  }
}

/// rows_pass for the `heads` heads that read one memory: the first head's pass updates Ṽ as P
/// says, and every head h forms out(h) = Σ_l p(h)_l · row_l over the updated rows, in the order a
/// pass of its own would add them (the other heads skip the rows they weigh 0). With Pass::read
/// every head takes a read pass of its own. Otherwise, as columns_pass_heads, a memory in T is read
/// again by each other head (weighted_rows: the updating pass's order), and one stored in another
/// type (at most `max_shared_heads` heads) is passed over once, every head reading the entries as
/// updated in T. p(h) and out(h) give each head's n weights and dv outputs.
template <Pass P, class T, class S, class WeightsOf, class OutOf>
void rows_pass_heads(S* rows, Index ld, Index n, Index dv, const T* a, const T* w, const T* x, Index heads,
                     const WeightsOf& p, const OutOf& out) noexcept {
  if constexpr (P == Pass::read) {
    // Every head only reads (the memory was written before the pass): each takes a read pass of
    // its own, in a memory's own type or widened batch by batch.
    for (Index g = 0; g < heads; ++g) rows_pass<Pass::read>(rows, ld, n, dv, a, w, x, p(g), out(g));
  } else if constexpr (std::is_same<S, T>::value) {
    // The other heads read the rows the first head's pass updated, summing them in its order.
    rows_pass<P>(rows, ld, n, dv, a, w, x, p(0), out(0));
    for (Index g = 1; g < heads; ++g) weighted_rows(static_cast<const S*>(rows), ld, n, dv, p(g), out(g));
  } else {
    ABC_ASSERT(heads >= 1 && heads <= max_shared_heads, "a memory stored in another type is read by at most four heads");
    if (heads == 1) return rows_pass<P>(rows, ld, n, dv, a, w, x, p(0), out(0));
    const T* ps[max_shared_heads];
    T* os[max_shared_heads];
    for (Index g = 0; g < heads; ++g) ps[g] = p(g), os[g] = out(g);
#ifdef ABC_NO_SIMD
    scalar::rows_axpy_heads<P != Pass::read>(rows, ld, n, dv, a, w, x, heads, ps, os);
#else
    impl::with_heads(heads, [&](auto h) { impl::rows_pass_group<decltype(h)::value, P>(rows, ld, n, dv, a, w, x, ps, os); });
#endif
  }
}

// NOLINTEND(bugprone-easily-swappable-parameters)
}  // namespace kernel
ABC_NAMESPACE_END
