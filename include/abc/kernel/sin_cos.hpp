// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. kernel::sin_cos, the sines and cosines of a random-feature row.
#pragma once

#include <cmath>

#include "../types.hpp"
#include "simd.hpp"

ABC_NAMESPACE_BEGIN
namespace kernel {

/**
 * \brief s_j = scale · sin(y_j) and c_j = scale · cos(y_j) over n entries, both from one reduction
 * of each argument. `s` may be `y` (the sines replace the arguments).
 *
 * Full batches from the start of the row (a batch with an argument past 64π, ±∞ or NaN lane by
 * lane in scalar), then the scalar tail (std::sin, std::cos): entry j takes the same path wherever
 * the row lies in memory, so a row alone gets the bits it gets in a block of rows (a decode step's
 * features equal the chunked kernel's). Eigen's array sin and cos peel to the row's alignment
 * instead, so their bits depend on the address.
 *
 * \param y [n], the arguments; \param n their count; \param scale the factor on both outputs
 * \param s [n] out (may alias y); \param c [n] out (aliasing neither y nor s)
 */
template <class T>
// One row's arguments and two outputs of one type, by design: only the feature map calls it.
// NOLINTNEXTLINE(bugprone-easily-swappable-parameters)
void sin_cos(const T* y, Index n, T scale, T* s, T* c) noexcept {
  const auto scalar = [&](Index from, Index to) {  // entries [from, to) with std::sin and std::cos
    for (Index i = from; i < to; ++i) {
      const T a = y[i];
      c[i] = scale * std::cos(a);
      s[i] = scale * std::sin(a);
    }
  };
  Index j = 0;
#ifndef ABC_NO_SIMD
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const B sv(scale);
  const B medium = xsimd::constants::mediumpi<B>();
  for (; j + width <= n; j += width) {
    const B a = B::load_unaligned(y + j);
    // xsimd reduces arguments past 64π (and ±∞, NaN) with its port of fdlibm's __ieee754_rem_pio2,
    // which shifts a negative int left (undefined behaviour; UBSan, found by fuzz_api): such a
    // batch takes the scalar path, lane by lane. Whether it does depends on the batch's own
    // entries only, so a row's bits still do not depend on where it lies.
    if (xsimd::all(xsimd::abs(a) <= medium)) {
      const auto sc = xsimd::sincos(a);
      (sv * sc.second).store_unaligned(c + j);
      (sv * sc.first).store_unaligned(s + j);
    } else {
      scalar(j, j + width);
    }
  }
#endif
  scalar(j, n);
}

}  // namespace kernel
ABC_NAMESPACE_END
