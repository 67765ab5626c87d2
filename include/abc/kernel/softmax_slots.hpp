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
// softmax_slots' NaN check, max, exponentials and division for R rows of NB full batches each
// (row r at x[r]), the rows held in registers throughout, where the general path stores a row after
// each of its three passes and loads it back: per token of a long call, those loads and stores are
// a part of the work worth saving (bench/README.md, round sixteen). With R > 1 the rows' operations
// are interleaved: each row's chain (the max's reduction, the exponentials, the sum's reduction, the
// division) is mostly latency, and R independent chains fill the pipes one leaves idle. Each row
// gets the operations of clean_max (clean_batch), exp_sum (exp_shifted) and the division, in their
// order, so the same bits however many rows go together. Returns false, with every row cleaned and
// stored and its max in m[r], when a row's max is ±∞ (the caller takes the general path for it).
template <int R, int NB, class B, class T>
bool softmax_group(T* const* x, T* m) noexcept {
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr Index width = Index(B::size);
  B v[R][NB];
  B mv[R];
  for (int r = 0; r < R; ++r) mv[r] = B(-inf);
  for (int i = 0; i < NB; ++i)
    for (int r = 0; r < R; ++r) {
      v[r][i] = clean_batch(B::load_unaligned(x[r] + i * width));
      mv[r] = xsimd::max(mv[r], v[r][i]);
    }
  bool finite = true;
  for (int r = 0; r < R; ++r) {
    m[r] = impl::hmax(mv[r]);
    finite = finite && m[r] != -inf && m[r] != inf;
  }
  if (!finite) {
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < NB; ++i) v[r][i].store_unaligned(x[r] + i * width);
    return false;
  }
  B acc[R];
  for (int r = 0; r < R; ++r) acc[r] = B(T(0));
  for (int i = 0; i < NB; ++i)
    for (int r = 0; r < R; ++r) {
      v[r][i] = exp_shifted(v[r][i], m[r]);
      acc[r] += v[r][i];
    }
  for (int r = 0; r < R; ++r) {
    const B sum(impl::hsum(acc[r]));  // ≥ 1: the max entry contributes exp(0)
    for (int i = 0; i < NB; ++i) (v[r][i] / sum).store_unaligned(x[r] + i * width);
  }
  return true;
}

// softmax_group for one row of one to four full batches (n = 64 floats with AVX-512); otherwise
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
    case 1: return softmax_group<1, 1, B>(&x, &m);
    case 2: return softmax_group<1, 2, B>(&x, &m);
    case 3: return softmax_group<1, 3, B>(&x, &m);
    default: return softmax_group<1, 4, B>(&x, &m);
  }
}

#endif
}  // namespace impl

/// The slots a query may not read set to −∞ in place: those outside `range`'s one or two ranges,
/// and, when `mask`, the slots not written. The first half of softmax_slots. It runs for every head
/// of every decode step, so its loops read the count once and do not branch per slot (the written
/// flags are bytes, which may alias the logits). `range` is taken by reference: by value, its four
/// indices went to the call as one 32-byte copy read back right after the four 8-byte stores that
/// built it, which the store buffer cannot forward (a stall on every call).
template <class T>
void mask_slots(T* logits, Index n, const std::uint8_t* written, bool mask, const SlotRange& range) noexcept {
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
}

/// The second half of softmax_slots: logits (−∞ where a slot may not be read) → probabilities in
/// place. Returns false, the row all zero, when no slot is readable.
template <class T>
bool softmax_masked(T* logits, Index n) noexcept {
  constexpr T inf = std::numeric_limits<T>::infinity();
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

/// softmax_masked over `count` rows (row i at rows + i · ld), already masked: ok[i] is row i's
/// result (`ok` may be null: a row with no readable slot is all zero either way). Rows of one to
/// four full batches go four at a time through one interleaved pass (impl::softmax_group), the
/// same bits as a row at a time; a long call's reads (the non-causal read, the causal chunk) have
/// many rows to give it, a decode step one per head.
template <class T>
void softmax_rows(T* rows, Index ld, Index count, Index n, bool* ok) noexcept {
  Index i = 0;
#ifndef ABC_NO_SIMD
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const auto groups = [&](auto batches) {
    constexpr int NB = decltype(batches)::value;
    for (; i + 4 <= count; i += 4) {
      T* const x[4] = {rows + i * ld, rows + (i + 1) * ld, rows + (i + 2) * ld, rows + (i + 3) * ld};
      T top[4];
      const bool all = impl::softmax_group<4, NB, B>(x, top);
      for (Index r = i; r < i + 4; ++r) {
        const bool read = all || softmax_masked(rows + r * ld, n);
        if (ok) ok[r] = read;
      }
    }
  };
  if (n % width == 0) switch (n / width) {
      case 1: groups(std::integral_constant<int, 1>{}); break;
      case 2: groups(std::integral_constant<int, 2>{}); break;
      case 3: groups(std::integral_constant<int, 3>{}); break;
      case 4: groups(std::integral_constant<int, 4>{}); break;
      default: break;
    }
#endif
  for (; i < count; ++i) {
    const bool read = softmax_masked(rows + i * ld, n);
    if (ok) ok[i] = read;
  }
}

// In place: logits → probabilities over the readable slots (those in `range`'s one or two ranges,
// and only written ones when `mask`); unreadable slots get exactly 0. The max is subtracted first,
// so every exponent is ≤ 0 and the sum is ≥ 1: the division can never be by zero. Returns false
// when no slot is readable, in which case p is all zero and the read is the zero vector (never NaN).
template <class T>
bool softmax_slots(T* logits, Index n, const std::uint8_t* written, bool mask, const SlotRange& range) {
  mask_slots(logits, n, written, mask, range);
  return softmax_masked(logits, n);
}

}  // namespace kernel
ABC_NAMESPACE_END
