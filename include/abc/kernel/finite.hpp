// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The vector pass behind every finite-input check.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "../types.hpp"
#include "scalar.hpp"
#include "simd.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

/// Σ x_ij · 0 over `count` rows of their own lengths (row i: n[i] entries at x[i]): ±0 when every
/// entry is finite, NaN otherwise (∞ · 0 and NaN · 0 are NaN, and NaN absorbs the sum). One
/// multiply-add per vector and no branch in the loop, so the checks every call runs on its inputs
/// cost a small fraction of a decode step; the vectors of every row go into the same four
/// accumulators (as many as keep the multiply-adds' latency covered at one load per cycle) and are
/// tested once, since a row of one head is short and a test per row would cost more than its loads.
template <class T, class RowAt, class LengthOf>
T finite_residue_at(const RowAt& x, const LengthOf& n, Index count) noexcept {
#ifdef ABC_NO_SIMD
  T acc = T(0);
  for (Index i = 0; i < count; ++i) acc += scalar::finite_residue(x(i), n(i));
  return acc;
#else
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const B zero(T(0));
  B a0 = zero, a1 = zero, a2 = zero, a3 = zero;
  T tail = T(0);
  for (Index i = 0; i < count; ++i) {
    const T* r = x(i);
    const Index cols = n(i);
    Index j = 0;
    for (; j + 4 * width <= cols; j += 4 * width) {
      a0 = impl::fma(B::load_unaligned(r + j), zero, a0);
      a1 = impl::fma(B::load_unaligned(r + j + width), zero, a1);
      a2 = impl::fma(B::load_unaligned(r + j + 2 * width), zero, a2);
      a3 = impl::fma(B::load_unaligned(r + j + 3 * width), zero, a3);
    }
    for (; j + width <= cols; j += width) a0 = impl::fma(B::load_unaligned(r + j), zero, a0);
    tail += scalar::finite_residue(r + j, cols - j);
  }
  // Only whether a lane holds NaN matters, which an unordered compare and a mask test tell: a
  // horizontal sum's chain of shuffles cost more than a short row's loads. (Not acc != acc: xsimd
  // compares ordered on AVX2 and AVX-512, where NaN != NaN is false.)
  const B acc = (a0 + a1) + (a2 + a3);
  return (xsimd::any(xsimd::isnan(acc)) ? std::numeric_limits<T>::quiet_NaN() : T(0)) + tail;
#endif
}

/// finite_residue_at over `rows` rows of `cols` entries, row i at x + i · stride.
template <class T>
T finite_residue_rows(const T* x, Index rows, Index cols, Index stride) noexcept {
  return finite_residue_at<T>([x, stride](Index i) { return x + i * stride; }, [cols](Index) { return cols; }, rows);
}

/// finite_residue_at over `count` rows, row i of n[i] entries at x[i]: the rows of a decode step (its
/// query, key, value and control input), checked in one pass and one test.
template <class T>
T finite_residue_each(const T* const* x, const Index* n, Index count) noexcept {
  return finite_residue_at<T>([x](Index i) { return x[i]; }, [n](Index i) { return n[i]; }, count);
}

/// max_j |x_j| over n entries (0 for none), or NaN when an entry is not finite: the scale of a
/// row, in one vectorised pass (Eigen 3.4's maxCoeff is a scalar loop).
template <class T>
T max_magnitude(const T* x, Index n) noexcept {
  T m = T(0), residue = T(0);
  Index j = 0;
#ifndef ABC_NO_SIMD
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  if (n >= width) {
    B mv(T(0)), rv(T(0));
    for (; j + width <= n; j += width) {
      const B v = B::load_unaligned(x + j);
      mv = xsimd::max(mv, xsimd::abs(v));
      rv = impl::fma(v, B(T(0)), rv);
    }
    m = impl::hmax(mv);
    residue = impl::hsum(rv);
  }
#endif
  for (; j < n; ++j) {
    m = std::max(m, std::abs(x[j]));
    residue += x[j] * T(0);
  }
  return residue == T(0) ? m : std::numeric_limits<T>::quiet_NaN();
}

/// x_j ← −∞ where x_j is NaN, else x_j clamped to [−max, max], over n entries: logits made finite,
/// or −∞ (no mass) where a product met +∞ − ∞. Comparisons and selects only, so the SIMD and
/// scalar paths give the same bits (±0 kept).
template <class T>
void saturate(T* x, Index n) noexcept {
  constexpr T big = std::numeric_limits<T>::max(), ninf = -std::numeric_limits<T>::infinity();
  Index j = 0;
#ifndef ABC_NO_SIMD
  using B = batch<T>;
  for (; j + Index(B::size) <= n; j += Index(B::size)) {
    const B v = B::load_unaligned(x + j);
    xsimd::select(xsimd::isnan(v), B(ninf), xsimd::min(xsimd::max(v, B(-big)), B(big))).store_unaligned(x + j);
  }
#endif
  for (; j < n; ++j) x[j] = std::isnan(x[j]) ? ninf : std::min(std::max(x[j], -big), big);
}

/// finite_residue_rows over one row of n entries.
template <class T>
T finite_residue(const T* x, Index n) noexcept {
  return finite_residue_rows(x, 1, n, n);
}

}  // namespace kernel
ABC_NAMESPACE_END
