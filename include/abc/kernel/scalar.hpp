// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Scalar kernels: the ABC_NO_SIMD path and the oracle of the SIMD ones.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "../types.hpp"
#include "bf16.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {
// Kernels take (rows, cols) and parallel operands of one type by design; only the library calls
// them, through checked public forms.
// NOLINTBEGIN(bugprone-easily-swappable-parameters)

/// The rows of a row kernel's `_at` form: row l at base + l · ld (the plain forms are these).
template <class S>
struct StridedRows {
  S* base;
  Index ld;
  S* operator()(Index l) const noexcept { return base + l * ld; }
};

namespace scalar {

// a · b + c, fused where the target has fused multiply-add (as the SIMD kernels' impl::fma) and
// as two roundings where it has not: never left to the compiler's contraction, which fuses or not
// depending on the code around it, so that a kernel gives the same bits for a memory in T and one
// in bfloat16 (kernel/bf16.hpp).
template <class T>
ABC_FORCE_INLINE T mul_add(T a, T b, T c) noexcept {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return std::fma(a, b, c);
#else
  const T ab = a * b;
  return ab + c;
#endif
}

// One token of the per-slot online log-sum-exp (see kernel::online_normalise), slots [0, n).
template <class T>
void online_normalise(const T* lam, T* m, T* z, T* decay, T* write, Index n, bool prefix) noexcept {
  constexpr T inf = std::numeric_limits<T>::infinity();
  for (Index l = 0; l < n; ++l) {
    const T m_new = std::max(m[l], lam[l]);
    const T keep = m[l] == -inf ? T(0) : std::exp(m[l] - m_new);
    const T add = lam[l] == -inf ? T(0) : std::exp(lam[l] - m_new);
    const T z_new = mul_add(keep, z[l], add);  // as the SIMD path, fused wherever it is inlined
    if (z_new > T(0)) {
      decay[l] = prefix ? keep * z[l] / z_new : T(1);
      write[l] = add / z_new;
      m[l] = m_new;
    } else {
      decay[l] = T(1);
      write[l] = T(0);
    }
    z[l] = z_new;
  }
}

// log of the smallest normal number, (min_exponent − 1) · log 2: exp_sum's flush-to-zero bound.
template <class T>
constexpr T log_min_normal() noexcept {
  return T((std::numeric_limits<T>::min_exponent - 1) * 0.69314718055994530942);
}

// x ← exp(x − shift) over n entries, returning their sum; exponents below log of the smallest
// normal (and −∞) give exactly 0, as the SIMD path's exp does (see kernel::exp_sum).
template <class T>
T exp_sum(T* x, Index n, T shift) noexcept {
  constexpr T lo = log_min_normal<T>();
  T sum = T(0);
  for (Index l = 0; l < n; ++l) {
    const T e = x[l] - shift;
    x[l] = e >= lo ? std::exp(e) : T(0);
    sum += x[l];
  }
  return sum;
}

// A per-slot forget gate from its logits (see kernel::forget_gate), slots [0, n): log f =
// −softplus(−s)/τ, decay = f, write = 1 − f. NaN logits count as 0, infinite ones as the largest
// finite value; exponentials below the smallest normal number are 0, as on the SIMD path.
template <class T>
void forget_gate(const T* logit, T tau, T* decay, T* write, Index n) noexcept {
  constexpr T big = std::numeric_limits<T>::max(), tiny = std::numeric_limits<T>::min();
  constexpr T lo = log_min_normal<T>();
  for (Index l = 0; l < n; ++l) {
    const T s = std::isnan(logit[l]) ? T(0) : std::min(std::max(logit[l], -big), big);
    const T e = -std::abs(s);
    const T softplus = std::max(-s, T(0)) + (e >= lo ? std::log1p(std::exp(e)) : T(0));
    T lf = -softplus / tau;
    if (lf > -tiny) lf = T(0);
    decay[l] = lf >= lo ? std::exp(lf) : T(0);
    write[l] = lf >= lo ? T(0) - std::expm1(lf) : T(1);  // 0 − expm1(0) is +0, not −0
  }
}

// row ← a · row + w · x, and returns row · q (the updated row), over n entries.
template <class T>
T update_dot(T* row, T a, T w, const T* x, const T* q, Index n) noexcept {
  T acc = T(0);
  for (Index j = 0; j < n; ++j) {
    row[j] = mul_add(a, row[j], w * x[j]);
    acc = mul_add(row[j], q[j], acc);
  }
  return acc;
}

// row ← a · row + w · x, then out += p · row, over n entries (row held in T or in bfloat16: the
// sum reads the updated entry before it is stored).
template <class T, class S>
void update_axpy(S* row, T a, T w, const T* x, T p, T* out, Index n) noexcept {
  for (Index j = 0; j < n; ++j) {
    const T r = mul_add(a, load_elem(row + j), w * x[j]);
    store_elem(row + j, r);
    out[j] = mul_add(p, r, out[j]);
  }
}

// Σ x_j · 0 over n entries: ±0 when every entry is finite, NaN otherwise (see kernel::finite_residue).
template <class T>
T finite_residue(const T* x, Index n) noexcept {
  T acc = T(0);
  for (Index j = 0; j < n; ++j) acc += x[j] * T(0);
  return acc;
}

// x · y over n entries, one multiply-add chain in order (fused explicitly where the target has FMA,
// so that its bits do not depend on where the compiler inlines it: the SIMD dots end in it).
template <class T>
T dot(const T* x, const T* y, Index n) noexcept {
  T acc = T(0);
  for (Index j = 0; j < n; ++j) acc = mul_add(x[j], y[j], acc);
  return acc;
}

// out += p · x
template <class T, class S>
void axpy(T p, const S* x, T* out, Index n) noexcept {
  for (Index j = 0; j < n; ++j) out[j] = mul_add(p, load_elem(x + j), out[j]);
}

// row_i ← row_i ⊙ a over `count` rows of width n at stride ld.
template <class T>
void scale_rows(T* rows, Index ld, Index count, Index n, const T* a) noexcept {
  for (Index i = 0; i < count; ++i)
    for (Index j = 0; j < n; ++j) rows[i * ld + j] *= a[j];
}

// out_i = row_at(i) · x over `count` rows of width n.
template <class T, class RowAt>
void rows_dot_at(const RowAt row_at, Index count, Index n, const T* x, T* out) noexcept {
  for (Index i = 0; i < count; ++i) out[i] = dot(row_at(i), x, n);
}

// out_i = row_i · x over `count` rows of width n at stride ld.
template <class T>
void rows_dot(const T* rows, Index ld, Index count, Index n, const T* x, T* out) noexcept {
  scalar::rows_dot_at(StridedRows<const T>{rows, ld}, count, n, x, out);
}

// Token t of a causal chunk, over the chunk's weight rows E (row i at e + i · n, n slots): with
// Update, E[i] ← a ⊙ E[i] for i < t (a null: nothing decays), E[t] ← w and D ← a ⊙ D; then
// out = Σ_{i≤t} g_i E[i] + D ⊙ prev, the sum a chain of multiply-adds over i in order, from 0, kept in
// out while the rows are walked in memory order. Slots [first, n).
template <bool Update, class T>
void chunk_scores(T* e, Index n, Index t, const T* a, const T* w, const T* g, T* dcum, const T* prev, T* out,
                  Index first = 0) noexcept {
  for (Index j = first; j < n; ++j) out[j] = T(0);
  for (Index i = 0; i <= t; ++i) {
    T* row = e + i * n;
    for (Index j = first; j < n; ++j) {
      T r = row[j];
      if (Update && i < t && a) row[j] = r = r * a[j];
      if (Update && i == t) row[j] = r = w[j];
      out[j] = mul_add(g[i], r, out[j]);
    }
  }
  for (Index j = first; j < n; ++j) {
    if (Update && a) dcum[j] *= a[j];
    out[j] = mul_add(dcum[j], prev[j], out[j]);
  }
}

// columns_dot (below) for `heads` queries (q[g], dots[g]): the first query's pass updates the
// entries (Update), and every query reads each entry as updated in T, before it is stored (rounded,
// in a bfloat16 memory): what columns_dot gives each query on the memory widened to T.
template <bool Update, class T, class S>
void columns_dot_heads(S* cols, Index ld, Index n, Index d, const T* a, const T* w, const T* x, Index heads,
                       const T* const* q, T scale, T* const* dots) noexcept {
  for (Index g = 0; g < heads; ++g)
    for (Index l = 0; l < n; ++l) dots[g][l] = T(0);
  for (Index j = 0; j < d; ++j) {
    S* col = cols + j * ld;
    for (Index l = 0; l < n; ++l) {
      T e = load_elem(col + l);
      if constexpr (Update) {
        e = mul_add(a[l], e, w[l] * x[j]);
        store_elem(col + l, e);
      }
      for (Index g = 0; g < heads; ++g) dots[g][l] = mul_add(e, q[g][j], dots[g][l]);
    }
  }
  for (Index g = 0; g < heads; ++g)
    for (Index l = 0; l < n; ++l) dots[g][l] *= scale;
}

// Over an n × d column-major block (column j at cols + j · ld): entry (l, j) ← a_l · entry + w_l · x_j
// when Update, then dots_l = scale · Σ_j entry(l, j) · q_j. Column by column, so memory is walked in
// order (a slot at a time would stride by ld, a cache line per entry once n is large); each dot
// still sums over j in order, in dots_l.
template <bool Update, class T, class S>
void columns_dot(S* cols, Index ld, Index n, Index d, const T* a, const T* w, const T* x, const T* q, T scale,
                 T* dots) noexcept {
  columns_dot_heads<Update>(cols, ld, n, d, a, w, x, 1, &q, scale, &dots);
}

// rows_axpy for `heads` heads (p[g], out[g]): the first head's pass updates the rows (Update) and
// takes every row; the other heads, and every head without Update, take the rows they weigh
// (p[g]_l ≠ 0), each entry as updated in T, before it is stored: what rows_axpy<Update> for the
// first head and rows_axpy<false> for the others give on the memory widened to T.
template <bool Update, class T, class S>
void rows_axpy_heads(S* rows, Index ld, Index n, Index dv, const T* a, const T* w, const T* x, Index heads,
                     const T* const* p, T* const* out) noexcept {
  for (Index g = 0; g < heads; ++g)
    for (Index j = 0; j < dv; ++j) out[g][j] = T(0);
  for (Index l = 0; l < n; ++l) {
    bool any = Update;
    for (Index g = 0; g < heads; ++g) any = any || p[g][l] != T(0);
    if (!any) continue;
    S* row = rows + l * ld;
    for (Index j = 0; j < dv; ++j) {
      T e = load_elem(row + j);
      if constexpr (Update) {
        e = mul_add(a[l], e, w[l] * x[j]);
        store_elem(row + j, e);
      }
      for (Index g = 0; g < heads; ++g)
        if ((Update && g == 0) || p[g][l] != T(0)) out[g][j] = mul_add(p[g][l], e, out[g][j]);
    }
  }
}

// out = Σ_l p_l · row_at(l)[j0 …] over n rows, dv entries from column j0 of each (overwritten);
// rows with p_l = 0 are not read.
template <class T, class RowAt>
void weighted_rows_at(const RowAt row_at, Index j0, Index n, Index dv, const T* p, T* out) noexcept {
  for (Index j = 0; j < dv; ++j) out[j] = T(0);
  for (Index l = 0; l < n; ++l)
    if (p[l] != T(0)) axpy(p[l], row_at(l) + j0, out, dv);
}

// out = Σ_l p_l · row_l over n rows of width dv at stride ld (overwritten); rows with p_l = 0 are
// not read.
template <class T, class S>
void weighted_rows(const S* rows, Index ld, Index n, Index dv, const T* p, T* out) noexcept {
  scalar::weighted_rows_at(StridedRows<const S>{rows, ld}, 0, n, dv, p, out);
}

// out = Σ_l p_l · row_l over n rows of width dv at stride ld, from column j0 (overwritten), each
// entry in two sums, the even rows' and the odd rows', added at the end: kernel::weighted_rows_interleaved's
// order, which its SIMD path gives every lane.
template <class T, class S>
void weighted_rows_interleaved(const S* rows, Index ld, Index j0, Index n, Index dv, const T* p, T* out) noexcept {
  for (Index j = j0; j < j0 + dv; ++j) {
    T even = T(0), odd = T(0);
    Index l = 0;
    for (; l + 2 <= n; l += 2) {
      even = mul_add(p[l], T(rows[l * ld + j]), even);
      odd = mul_add(p[l + 1], T(rows[(l + 1) * ld + j]), odd);
    }
    if (l < n) even = mul_add(p[l], T(rows[l * ld + j]), even);
    out[j - j0] = even + odd;
  }
}

// Over n rows of width dv at stride ld: row_l ← a_l · row_l + w_l · x when Update, and
// out = Σ_l p_l · row_l (overwritten). Without Update, rows with p_l = 0 are not read.
template <bool Update, class T, class S>
void rows_axpy(S* rows, Index ld, Index n, Index dv, const T* a, const T* w, const T* x, const T* p,
               T* out) noexcept {
  if constexpr (!Update) {
    (void)a, (void)w, (void)x;
    weighted_rows(static_cast<const S*>(rows), ld, n, dv, p, out);
  } else {
    for (Index j = 0; j < dv; ++j) out[j] = T(0);
    for (Index l = 0; l < n; ++l) update_axpy(rows + l * ld, a[l], w[l], x, p[l], out, dv);
  }
}

}  // namespace scalar
// NOLINTEND(bugprone-easily-swappable-parameters)
}  // namespace kernel
ABC_NAMESPACE_END
