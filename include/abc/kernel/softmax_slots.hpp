// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. The softmax read over slots, with the empty-slot rule.
#pragma once

#include <cstdint>
#include <limits>

#include "exp_sum.hpp"
#include "../types.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

// The slots a query may read: [lo, hi), and [lo2, hi2) when that second range is not empty. All of
// them unless the control restricts it (Dilated reads one of its ring buffers per query; GMAT's
// window rows read a band of the main tokens plus the memory slots, two ranges).
struct SlotRange {
  Index lo, hi;
  Index lo2 = 0, hi2 = 0;  // empty by default: one range, and no per-slot work for it
};

// In place: logits → probabilities over the readable slots (those in `range`'s one or two ranges,
// and only written ones when `mask`); unreadable slots get exactly 0. The max is subtracted first,
// so every exponent is ≤ 0 and the sum is ≥ 1: the division can never be by zero. Returns false
// when no slot is readable, in which case p is all zero and the read is the zero vector (never NaN).
template <class T>
bool softmax_slots(T* logits, Index n, const std::uint8_t* written, bool mask, SlotRange range) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> a(logits, n);
  if (range.hi2 > range.lo2) {
    // Two ranges (rare): one pass over every slot.
    for (Index l = 0; l < n; ++l) {
      const bool in = (l >= range.lo && l < range.hi) || (l >= range.lo2 && l < range.hi2);
      if (!in || (mask && !written[l])) a[l] = -inf;
    }
  } else {
    a.head(range.lo).setConstant(-inf);
    a.tail(n - range.hi).setConstant(-inf);
    if (mask)
      for (Index l = range.lo; l < range.hi; ++l)
        if (!written[l]) a[l] = -inf;
  }
  // A score that is not a number can only come from finite inputs overflowing (+∞ − ∞ in q·k):
  // it takes no mass, rather than spreading NaN into the read.
  a = a.isNaN().select(Eigen::Array<T, Eigen::Dynamic, 1>::Constant(n, -inf), a);
  const T m = a.maxCoeff();
  if (m == -inf) {
    a.setZero();
    return false;
  }
  if (m == inf) {
    // Logits overflowed (keys and queries near the type's limit): the softmax limit shares the mass
    // equally among the infinite logits instead of producing inf − inf = NaN.
    a = (a == inf).template cast<T>();
    a /= a.sum();
    return true;
  }
  a /= exp_sum(logits, n, m);  // ≥ 1: the max entry contributes exp(0)
  return true;
}

}  // namespace kernel
ABC_NAMESPACE_END
