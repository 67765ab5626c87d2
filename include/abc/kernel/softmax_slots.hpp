// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The softmax read over slots, with the empty-slot rule.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "exp_sum.hpp"
#include "../types.hpp"
#include "simd.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

// The slots a query may read: [lo, hi), and [lo2, hi2) when that second range is not empty. All of
// them unless the control restricts it (Dilated reads one of its ring buffers per query; GMAT's
// window rows read a band of the main tokens plus the memory slots, two ranges).
struct SlotRange {
  Index lo, hi;
  Index lo2 = 0, hi2 = 0;  // empty by default: one range, and no per-slot work for it
};

namespace impl {
#ifndef ABC_NO_SIMD
// One batch of scores with NaN → −∞. v == v, not v != v: xsimd 8.1's AVX and AVX-512 != is the
// ordered comparison, false for NaN, which left NaN in place and let a max replace a lane's larger
// entry by it.
template <class B>
ABC_FORCE_INLINE B clean_batch(const B& v) noexcept {
  return xsimd::select(v == v, v, B(-std::numeric_limits<typename B::value_type>::infinity()));
}
#endif

// NaN → −∞ in place over n entries, returning the largest entry (−∞ when there is none). A score
// that is not a number can only come from finite inputs overflowing (+∞ − ∞ in q·k): it takes no
// mass, rather than spreading NaN into the read. One pass instead of a select and a reduction.
template <class T>
T clean_max(T* x, Index n) noexcept {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  T m = ninf;
  Index l = 0;
#ifndef ABC_NO_SIMD
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  if (n >= width) {
    const B none(ninf);
    B mv = none;
    for (; l + width <= n; l += width) {
      const B c = clean_batch(B::load_unaligned(x + l));
      c.store_unaligned(x + l);
      mv = xsimd::max(mv, c);
    }
    m = impl::hmax(mv);
  }
#endif
  for (; l < n; ++l) {
    if (x[l] != x[l]) x[l] = ninf;
    m = std::max(m, x[l]);
  }
  return m;
}

#ifndef ABC_NO_SIMD
// softmax_slots' NaN check, max, exponentials and division for a row of NB full batches, the row
// held in registers throughout, where the general path stores the row after each of its three
// passes and loads it back: per token of a long call, those loads and stores are a part of the
// work worth saving (bench/README.md, round sixteen). The operations of clean_max (clean_batch),
// exp_sum (exp_shifted) and the division, in their order, so the same bits. Returns false, with
// the cleaned row stored and its max in m, when the max is ±∞.
template <int NB, class B, class T>
bool softmax_batches(T* x, T& m) noexcept {
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr Index width = Index(B::size);
  const B none(-inf);
  B v[NB];
  B mv = none;
  for (int i = 0; i < NB; ++i) {
    v[i] = clean_batch(B::load_unaligned(x + i * width));
    mv = xsimd::max(mv, v[i]);
  }
  m = impl::hmax(mv);
  if (m == -inf || m == inf) {
    for (int i = 0; i < NB; ++i) v[i].store_unaligned(x + i * width);
    return false;
  }
  B acc(T(0));
  for (int i = 0; i < NB; ++i) {
    v[i] = exp_shifted(v[i], m);
    acc += v[i];
  }
  const B sum(impl::hsum(acc));  // ≥ 1: the max entry contributes exp(0)
  for (int i = 0; i < NB; ++i) (v[i] / sum).store_unaligned(x + i * width);
  return true;
}

// softmax_batches where the row is one to four full batches (n = 64 floats with AVX-512); otherwise
// only the NaN check and max (clean_max). Returns true when the row is done.
template <class T>
bool softmax_in_registers(T* x, Index n, T& m) noexcept {
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  if (n < width || n % width != 0 || n > 4 * width) {
    m = clean_max(x, n);
    return false;
  }
  switch (n / width) {
    case 1: return softmax_batches<1, B>(x, m);
    case 2: return softmax_batches<2, B>(x, m);
    case 3: return softmax_batches<3, B>(x, m);
    default: return softmax_batches<4, B>(x, m);
  }
}
#endif
}  // namespace impl

// In place: logits → probabilities over the readable slots (those in `range`'s one or two ranges,
// and only written ones when `mask`); unreadable slots get exactly 0. The max is subtracted first,
// so every exponent is ≤ 0 and the sum is ≥ 1: the division can never be by zero. Returns false
// when no slot is readable, in which case p is all zero and the read is the zero vector (never NaN).
// It runs for every head of every decode step, so its loops read the count once and do not
// branch per slot (the written flags are bytes, which may alias the logits).
template <class T>
bool softmax_slots(T* logits, Index n, const std::uint8_t* written, bool mask, SlotRange range) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  if (range.hi2 > range.lo2) {
    // Two ranges (rare): one pass over every slot.
    for (Index l = 0; l < n; ++l) {
      const bool in = (l >= range.lo && l < range.hi) || (l >= range.lo2 && l < range.hi2);
      if (!in || (mask && !written[l])) logits[l] = -inf;
    }
  } else {
    std::fill(logits, logits + range.lo, -inf);
    std::fill(logits + range.hi, logits + n, -inf);
    if (mask)
      for (Index l = range.lo, hi = range.hi; l < hi; ++l) logits[l] = written[l] != 0 ? logits[l] : -inf;
  }
#ifdef ABC_NO_SIMD
  const T m = impl::clean_max(logits, n);
#else
  T m = T(0);
  if (impl::softmax_in_registers(logits, n, m)) return true;
#endif
  if (m == -inf) {
    std::fill(logits, logits + n, T(0));
    return false;
  }
  if (m == inf) {
    // Logits overflowed (keys and queries near the type's limit): the softmax limit shares the mass
    // equally among the infinite logits instead of producing inf − inf = NaN.
    T count = T(0);
    for (Index l = 0; l < n; ++l) count += logits[l] == inf ? T(1) : T(0);
    for (Index l = 0; l < n; ++l) logits[l] = logits[l] == inf ? T(1) / count : T(0);
    return true;
  }
  const T sum = exp_sum(logits, n, m);  // ≥ 1: the max entry contributes exp(0)
  for (Index l = 0; l < n; ++l) logits[l] /= sum;
  return true;
}

}  // namespace kernel
ABC_NAMESPACE_END
