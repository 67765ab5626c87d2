// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Row kernels of the decode step: fused update + dot, update + axpy.
#pragma once

#include <type_traits>
#include <utility>

#include "../types.hpp"
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
    const B r = xsimd::fma(av, B::load_unaligned(row + j), wv * B::load_unaligned(x + j));
    r.store_unaligned(row + j);
    acc = xsimd::fma(r, B::load_unaligned(q + j), acc);
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
    const B r = xsimd::fma(av, B::load_unaligned(row + j), wv * B::load_unaligned(x + j));
    r.store_unaligned(row + j);
    xsimd::fma(pv, r, B::load_unaligned(out + j)).store_unaligned(out + j);
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
  for (; j + width <= n; j += width) acc = xsimd::fma(B::load_unaligned(x + j), B::load_unaligned(y + j), acc);
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
    xsimd::fma(pv, B::load_unaligned(x + j), B::load_unaligned(out + j)).store_unaligned(out + j);
  scalar::axpy(p, x + j, out + j, n - j);
#endif
}

#ifndef ABC_NO_SIMD
namespace impl {
// Σ over the full batches of one row (updated first when Update), left as a batch.
template <bool Update, class B, class T>
B row_dot_partial(T* row, T a, T w, const T* x, const T* q, Index full) noexcept {
  constexpr Index width = Index(B::size);
  B acc(T(0));
  if constexpr (Update) {
    const B av(a), wv(w);
    for (Index j = 0; j < full; j += width) {
      const B r = xsimd::fma(av, B::load_unaligned(row + j), wv * B::load_unaligned(x + j));
      r.store_unaligned(row + j);
      acc = xsimd::fma(r, B::load_unaligned(q + j), acc);
    }
  } else {
    for (Index j = 0; j < full; j += width) acc = xsimd::fma(B::load_unaligned(row + j), B::load_unaligned(q + j), acc);
  }
  return acc;
}

// The sums of `width` batches at once, lane r holding Σ acc[r]: a transposed reduction, far cheaper
// than one horizontal sum per row. xsimd 8.1's AVX-512 float haddp returns lanes 2–3 with 4–5 (and
// 10–11 with 12–13) swapped; that swap is its own inverse, so feeding it the rows in the swapped
// order puts every sum in its lane (tests/kernel/test_rows.cpp checks each row's dot).
template <class B>
ABC_FORCE_INLINE B row_sums(B* acc) noexcept {
  using A = typename B::arch_type;
  using T = typename B::value_type;
  if constexpr (std::is_same<T, float>::value && std::is_base_of<xsimd::avx512f, A>::value &&
                XSIMD_VERSION_MAJOR < 9) {
    std::swap(acc[2], acc[4]);
    std::swap(acc[3], acc[5]);
    std::swap(acc[10], acc[12]);
    std::swap(acc[11], acc[13]);
  }
  return xsimd::haddp(acc);
}

// One row's dot with q (its K batches, updated first when Update), left as a batch.
template <int K, bool Update, class B, class T>
B row_dot_fixed(T* row, T a, T w, const B* xv, const B* qv) noexcept {
  constexpr Index width = Index(B::size);
  B acc(T(0));
  if constexpr (Update) {
    const B av(a), wv(w);
    for (int c = 0; c < K; ++c) {
      const B r = xsimd::fma(av, B::load_unaligned(row + c * width), wv * xv[c]);
      r.store_unaligned(row + c * width);
      acc = xsimd::fma(r, qv[c], acc);
    }
  } else {
    (void)a, (void)w, (void)xv;
    for (int c = 0; c < K; ++c) acc = xsimd::fma(B::load_unaligned(row + c * width), qv[c], acc);
  }
  return acc;
}

// rows_dot for rows of K full batches (and a scalar tail): q's and x's batches stay in registers,
// and a batch-width group of rows is reduced together.
template <int K, bool Update, class B, class T>
void dot_rows_fixed(T* rows, Index ld, Index n, Index d, const T* a, const T* w, const T* x, const T* q, T scale,
                    T* dots) noexcept {
  constexpr Index width = Index(B::size), full = K * width;
  B qv[K], xv[K];  // xv: used only when Update
  for (int c = 0; c < K; ++c) {
    qv[c] = B::load_unaligned(q + c * width);
    if constexpr (Update) xv[c] = B::load_unaligned(x + c * width);
  }
  const auto tail = [&](Index l) {
    T* row = rows + l * ld;
    return Update ? scalar::update_dot(row + full, a[l], w[l], x + full, q + full, d - full)
                  : scalar::dot(row + full, q + full, d - full);
  };
  const B sv(scale);
  const Index grouped = n - n % width;
  for (Index l = 0; l < grouped; l += width) {
    B acc[width];
    for (Index r = 0; r < width; ++r)
      acc[r] = row_dot_fixed<K, Update>(rows + (l + r) * ld, Update ? a[l + r] : T(1), Update ? w[l + r] : T(0), xv, qv);
    B sums = row_sums(acc);
    if (d > full) {
      alignas(B::arch_type::alignment()) T tails[width];
      for (Index r = 0; r < width; ++r) tails[r] = tail(l + r);
      sums += B::load_aligned(tails);
    }
    (sv * sums).store_unaligned(dots + l);
  }
  for (Index l = grouped; l < n; ++l)
    dots[l] = scale * (hsum(row_dot_fixed<K, Update>(rows + l * ld, Update ? a[l] : T(1), Update ? w[l] : T(0), xv, qv)) +
                       (d > full ? tail(l) : T(0)));
}

// Columns [j0, j0 + K·width) of out = Σ_l p_l · row_l: the K output batches (and x's) stay in
// registers across all n rows, so no row waits on the previous row's store of out.
template <int K, bool Update, class B, class T, class Row>
void axpy_columns(Row* rows, Index ld, Index n, const T* a, const T* w, const T* x, const T* p, T* out) noexcept {
  constexpr Index width = Index(B::size);
  B acc[K], xv[K];  // xv: x's columns, used only when Update
  for (int c = 0; c < K; ++c) {
    acc[c] = B(T(0));
    if constexpr (Update) xv[c] = B::load_unaligned(x + c * width);
  }
  for (Index l = 0; l < n; ++l) {
    Row* row = rows + l * ld;
    const B pv(p[l]);
    if constexpr (Update) {
      const B av(a[l]), wv(w[l]);
      for (int c = 0; c < K; ++c) {
        const B r = xsimd::fma(av, B::load_unaligned(row + c * width), wv * xv[c]);
        r.store_unaligned(row + c * width);
        acc[c] = xsimd::fma(pv, r, acc[c]);
      }
    } else if (p[l] != T(0)) {
      for (int c = 0; c < K; ++c) acc[c] = xsimd::fma(pv, B::load_unaligned(row + c * width), acc[c]);
    }
  }
  for (int c = 0; c < K; ++c) acc[c].store_unaligned(out + c * width);
}
}  // namespace impl
#endif

/// out = Σ_l p_l · row_l over n read-only rows of width dv at stride ld (overwritten): the
/// vector–matrix product pᵀR, the output held in registers a column block at a time. Rows with
/// p_l = 0 are not read.
template <class T>
void weighted_rows(const T* rows, Index ld, Index n, Index dv, const T* p, T* out) noexcept {
#ifdef ABC_NO_SIMD
  scalar::weighted_rows(rows, ld, n, dv, p, out);
#else
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const T* none = nullptr;  // no update: no decays, writes or input
  Index j = 0;
  for (; j + 4 * width <= dv; j += 4 * width)
    impl::axpy_columns<4, false, B>(rows + j, ld, n, none, none, none, p, out + j);
  for (; j + width <= dv; j += width) impl::axpy_columns<1, false, B>(rows + j, ld, n, none, none, none, p, out + j);
  if (j < dv) scalar::weighted_rows(rows + j, ld, n, dv - j, p, out + j);
#endif
}

/// The read of a decode step over K̃: for each of the n rows of width d at stride ld,
/// row_l ← a_l · row_l + w_l · x when Update, then dots_l = scale · (row_l · q). One pass over the
/// rows. Rows of up to 4 batches (d ≤ 64 floats with AVX-512) keep q and x in registers across
/// all rows, and their dots are reduced a batch-width group of rows at a time.
template <bool Update, class T>
void rows_dot(T* rows, Index ld, Index n, Index d, const T* a, const T* w, const T* x, const T* q, T scale,
              T* dots) noexcept {
#ifdef ABC_NO_SIMD
  scalar::rows_dot<Update>(rows, ld, n, d, a, w, x, q, scale, dots);
#else
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const Index full = d - d % width;
  switch (full / width) {
    case 1: return impl::dot_rows_fixed<1, Update, B>(rows, ld, n, d, a, w, x, q, scale, dots);
    case 2: return impl::dot_rows_fixed<2, Update, B>(rows, ld, n, d, a, w, x, q, scale, dots);
    case 3: return impl::dot_rows_fixed<3, Update, B>(rows, ld, n, d, a, w, x, q, scale, dots);
    case 4: return impl::dot_rows_fixed<4, Update, B>(rows, ld, n, d, a, w, x, q, scale, dots);
    default: break;
  }
  for (Index l = 0; l < n; ++l) {
    T* row = rows + l * ld;
    if constexpr (Update) {
      const B acc = impl::row_dot_partial<true, B>(row, a[l], w[l], x, q, full);
      dots[l] = scale * (impl::hsum(acc) + scalar::update_dot(row + full, a[l], w[l], x + full, q + full, d - full));
    } else {
      const B acc = impl::row_dot_partial<false, B>(row, T(1), T(0), x, q, full);
      dots[l] = scale * (impl::hsum(acc) + scalar::dot(row + full, q + full, d - full));
    }
  }
#endif
}

/// The readout of a decode step over Ṽ: for each of the n rows of width dv at stride ld,
/// row_l ← a_l · row_l + w_l · x when Update, and out = Σ_l p_l · row_l (overwritten). One pass
/// over the rows, the output held in registers a column block at a time. Without Update, rows
/// with p_l = 0 are not read (an empty or fully masked slot costs nothing), and a, w and x are not
/// read either.
template <bool Update, class T>
void rows_axpy(T* rows, Index ld, Index n, Index dv, const T* a, const T* w, const T* x, const T* p,
               T* out) noexcept {
  if constexpr (!Update) {
    (void)a, (void)w, (void)x;
    weighted_rows(static_cast<const T*>(rows), ld, n, dv, p, out);
  } else {
#ifdef ABC_NO_SIMD
    scalar::rows_axpy<Update>(rows, ld, n, dv, a, w, x, p, out);
#else
    using B = batch<T>;
    constexpr Index width = Index(B::size);
    Index j = 0;
    for (; j + 4 * width <= dv; j += 4 * width)
      impl::axpy_columns<4, true, B>(rows + j, ld, n, a, w, x + j, p, out + j);
    for (; j + width <= dv; j += width) impl::axpy_columns<1, true, B>(rows + j, ld, n, a, w, x + j, p, out + j);
    if (j < dv) scalar::rows_axpy<true>(rows + j, ld, n, dv - j, a, w, x + j, p, out + j);
#endif
  }
}

// NOLINTEND(bugprone-easily-swappable-parameters)
}  // namespace kernel
ABC_NAMESPACE_END
