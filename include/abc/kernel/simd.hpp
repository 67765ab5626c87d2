// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Whether the xsimd kernels are on, and the batch type they use.
#pragma once

#include <type_traits>

#include "../config.hpp"

// ABC_NO_SIMD, or a target where xsimd finds no SIMD instruction set, selects the scalar kernels
// (kernel/scalar.hpp), which are also the oracle of the SIMD kernels' tests.
#ifndef ABC_NO_SIMD
#  include <xsimd/xsimd.hpp>
#  if !XSIMD_WITH_SSE2 && !XSIMD_WITH_NEON && !XSIMD_WITH_NEON64
#    define ABC_NO_SIMD
#  endif
#endif

ABC_NAMESPACE_BEGIN
namespace kernel {

#ifdef ABC_NO_SIMD
inline constexpr bool simd_enabled = false;
#else
inline constexpr bool simd_enabled = true;
/// The widest batch of T the build targets (xsimd::default_arch, set by -march / -m flags).
template <class T>
using batch = xsimd::batch<T>;

namespace impl {
// x · y + z rounded once, for every kernel. xsimd 8.1 has no AVX-512 multiply-add of its own: its
// generic fallback computes x * y + z, which g++ contracts into one instruction and clang (which
// contracts only within one expression) leaves as two, rounded twice and at half the rate. There
// the instruction is called itself; elsewhere xsimd's fma is the instruction.
template <class B>
ABC_FORCE_INLINE B fma(const B& x, const B& y, const B& z) noexcept {
#  if defined(__AVX512F__)
  using A = typename B::arch_type;
  using T = typename B::value_type;
  if constexpr (std::is_base_of<xsimd::avx512f, A>::value && std::is_same<T, float>::value)
    return B(_mm512_fmadd_ps(x, y, z));
  else if constexpr (std::is_base_of<xsimd::avx512f, A>::value && std::is_same<T, double>::value)
    return B(_mm512_fmadd_pd(x, y, z));
  else
    return xsimd::fma(x, y, z);
#  else
  return xsimd::fma(x, y, z);
#  endif
}

// Horizontal sum: xsimd 8 calls it hadd, later versions reduce_add.
template <class B>
auto hsum(const B& b) noexcept {
#  if XSIMD_VERSION_MAJOR >= 9
  return xsimd::reduce_add(b);
#  else
  return xsimd::hadd(b);
#  endif
}

// The horizontal sums of four batches into out[0..3], each added in the order hsum adds it (so
// bit for bit four hsums), with the float batches of AVX and AVX-512 reduced together: a short dot
// product is mostly its reduction, and four reductions share their shuffles and additions.
// hsum of 8 floats z is ((z0 + z4) + (z1 + z5)) + ((z2 + z6) + (z3 + z7)); of 16 floats a, the
// same over z_i = a_i + a_{i+8}.
template <class B, class T>
ABC_FORCE_INLINE void hsum4(const B& b0, const B& b1, const B& b2, const B& b3, T* out) noexcept {
#  if defined(__AVX2__)
#    if defined(__AVX512F__)
  constexpr bool avx_float = std::is_same<T, float>::value && (B::size == 8 || B::size == 16);
#    else
  constexpr bool avx_float = std::is_same<T, float>::value && B::size == 8;
#    endif
#  else
  constexpr bool avx_float = false;
#  endif
  if constexpr (avx_float) {
#  if defined(__AVX2__)
    const auto half = [](const B& b) -> __m256 {
      if constexpr (B::size == 8) {
        return b;
      } else {
#    if defined(__AVX512F__)
        return _mm256_add_ps(_mm512_extractf32x8_ps(b, 1), _mm512_extractf32x8_ps(b, 0));
#    endif
      }
    };
    const __m256 z0 = half(b0), z1 = half(b1), z2 = half(b2), z3 = half(b3);
    // t = [z0 lanes 0..3 + 4..7 | z1 lanes 0..3 + 4..7], and the same for z2, z3.
    const __m256 t01 = _mm256_add_ps(_mm256_permute2f128_ps(z0, z1, 0x20), _mm256_permute2f128_ps(z0, z1, 0x31));
    const __m256 t23 = _mm256_add_ps(_mm256_permute2f128_ps(z2, z3, 0x20), _mm256_permute2f128_ps(z2, z3, 0x31));
    // hadd pairs neighbours within each 128-bit half; twice, lanes (s0, s2, s0, s2 | s1, s3, s1, s3).
    const __m256 pairs = _mm256_hadd_ps(t01, t23);
    const __m256 h = _mm256_hadd_ps(pairs, pairs);
    const __m256 s = _mm256_permutevar8x32_ps(h, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
    _mm_storeu_ps(out, _mm256_castps256_ps128(s));
#  endif
  } else {
    out[0] = hsum(b0);
    out[1] = hsum(b1);
    out[2] = hsum(b2);
    out[3] = hsum(b3);
  }
}

// The largest lane of a batch without NaN (max is exact, so the order does not change it): with
// AVX-512 a tree of shuffles, instead of a chain of 16 dependent maxima.
template <class B>
ABC_FORCE_INLINE auto hmax(const B& b) noexcept {
  using T = typename B::value_type;
#  if defined(__AVX512F__)
  constexpr bool avx512_float = B::size == 16 && std::is_same<T, float>::value;
#  else
  constexpr bool avx512_float = false;
#  endif
  if constexpr (avx512_float) {
#  if defined(__AVX512F__)
    return _mm512_reduce_max_ps(b);
#  endif
  } else {
    alignas(B::arch_type::alignment()) T lanes[B::size];
    b.store_aligned(lanes);
    T m = lanes[0];
    for (std::size_t r = 1; r < B::size; ++r) m = m > lanes[r] ? m : lanes[r];
    return m;
  }
}
}  // namespace impl
#endif

}  // namespace kernel
ABC_NAMESPACE_END
