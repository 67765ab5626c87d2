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
 * Full batches from the start of the row, then the scalar tail (std::sin, std::cos): entry j takes
 * the same path wherever the row lies in memory, so a row alone gets the bits it gets in a block
 * of rows (a decode step's features equal the chunked kernel's). Eigen's array sin and cos peel
 * to the row's alignment instead, so their bits depend on the address.
 *
 * \param y [n], the arguments; \param n their count; \param scale the factor on both outputs
 * \param s [n] out (may alias y); \param c [n] out (aliasing neither y nor s)
 */
template <class T>
// One row's arguments and two outputs of one type, by design: only the feature map calls it.
// NOLINTNEXTLINE(bugprone-easily-swappable-parameters)
void sin_cos(const T* y, Index n, T scale, T* s, T* c) noexcept {
  Index j = 0;
#ifndef ABC_NO_SIMD
  using B = batch<T>;
  constexpr Index width = Index(B::size);
  const B sv(scale);
  for (; j + width <= n; j += width) {
    const auto sc = xsimd::sincos(B::load_unaligned(y + j));
    (sv * sc.second).store_unaligned(c + j);
    (sv * sc.first).store_unaligned(s + j);
  }
#endif
  for (; j < n; ++j) {
    const T a = y[j];
    c[j] = scale * std::cos(a);
    s[j] = scale * std::sin(a);
  }
}

}  // namespace kernel
ABC_NAMESPACE_END
