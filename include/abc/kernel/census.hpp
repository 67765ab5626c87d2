// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. How a list of scores falls about a value: the counting pass of a
// top-k selection that starts from a guess of its K-th score.
#pragma once

#include <algorithm>
#include <limits>

#include "../types.hpp"
#include "simd.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

/// How many scores lie above, at and below a value θ (a NaN score is none of these), and the
/// nearest scores above and below it (±∞ when there is none).
template <class T>
struct Census {
  Index above = 0, at = 0, below = 0;
  T up = std::numeric_limits<T>::infinity(), down = -std::numeric_limits<T>::infinity();
};

/// Adds x[0 … n) to `c`, a census about θ: a vector pass, so that a selection which checks a guess
/// of its K-th score costs a fraction of a partial sort.
template <class T>
void add_census(const T* x, Index n, T theta, Census<T>& c) noexcept {
  Index j = 0;
#ifndef ABC_NO_SIMD
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  // The counts are kept in lanes of T, exact up to 2^(digits) per lane: blocks of at most that
  // many batches are added into the Index counts.
  constexpr Index block = Index(1) << (std::numeric_limits<T>::digits - 1);
  const B th(theta), one(T(1)), zero(T(0));
  const B inf(std::numeric_limits<T>::infinity()), minus_inf(-std::numeric_limits<T>::infinity());
  B up = inf, down = minus_inf;
  while (j + width <= n) {
    B above = zero, at = zero, below = zero;
    const Index end = j + std::min((n - j) / width, block) * width;
    for (; j < end; j += width) {
      const B v = B::load_unaligned(x + j);
      const auto gt = v > th, lt = v < th;
      above += xsimd::select(gt, one, zero);
      at += xsimd::select(v == th, one, zero);
      below += xsimd::select(lt, one, zero);
      up = xsimd::min(up, xsimd::select(gt, v, inf));
      down = xsimd::max(down, xsimd::select(lt, v, minus_inf));
    }
    alignas(B::arch_type::alignment()) T lanes[3][B::size];
    above.store_aligned(lanes[0]);
    at.store_aligned(lanes[1]);
    below.store_aligned(lanes[2]);
    for (std::size_t r = 0; r < B::size; ++r) {
      c.above += Index(lanes[0][r]);
      c.at += Index(lanes[1][r]);
      c.below += Index(lanes[2][r]);
    }
  }
  alignas(B::arch_type::alignment()) T lanes[2][B::size];
  up.store_aligned(lanes[0]);
  down.store_aligned(lanes[1]);
  for (std::size_t r = 0; r < B::size; ++r) {
    c.up = std::min(c.up, lanes[0][r]);
    c.down = std::max(c.down, lanes[1][r]);
  }
#endif
  for (; j < n; ++j) {
    const T v = x[j];
    c.above += v > theta;
    c.at += v == theta;
    c.below += v < theta;
    if (v > theta) c.up = std::min(c.up, v);
    if (v < theta) c.down = std::max(c.down, v);
  }
}

}  // namespace kernel
ABC_NAMESPACE_END
