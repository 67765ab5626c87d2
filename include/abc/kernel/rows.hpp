// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Row kernels of the decode step: fused update + dot, update + axpy.
#pragma once

#include "../types.hpp"
#include "scalar.hpp"
#include "simd.hpp"

namespace abc {
namespace kernel {

#ifndef ABC_NO_SIMD
namespace detail {
// Horizontal sum: xsimd 8 calls it hadd, later versions reduce_add.
template <class B>
auto hsum(const B& b) noexcept {
#  if XSIMD_VERSION_MAJOR >= 9
  return xsimd::reduce_add(b);
#  else
  return xsimd::hadd(b);
#  endif
}
}  // namespace detail
#endif

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
  return detail::hsum(acc) + scalar::update_dot(row + j, a, w, x + j, q + j, n - j);
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
  return detail::hsum(acc) + scalar::dot(x + j, y + j, n - j);
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

}  // namespace kernel
}  // namespace abc
