// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. bfloat16 storage of a float memory: the codec, scalar and SIMD.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "../types.hpp"
#include "simd.hpp"

#if !defined(ABC_NO_SIMD) && (defined(__AVX2__) || defined(__AVX512F__))
#  include <immintrin.h>
#endif

ABC_NAMESPACE_BEGIN
namespace kernel {

/// A bfloat16 number as stored: the upper 16 bits of a float's IEEE pattern.
using bf16 = std::uint16_t;

namespace impl {
// The largest finite bfloat16, 0x7F7F0000 as a float: where encoding saturates.
inline constexpr float bf16_max = 3.38953139e38f;
}  // namespace impl

/// The float a bfloat16 stands for: exact (every bfloat16 is a float).
inline float from_bf16(bf16 h) noexcept {
  const std::uint32_t bits = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// A finite float rounded to the nearest bfloat16, ties to even, saturating at ±bf16_max instead of
/// rounding to infinity (a finite memory stays finite). Subnormal floats round to subnormal
/// bfloat16s like any other (the AVX-512-BF16 conversion instructions flush them to zero, which is
/// why they are not used). Only the library's finite memories are encoded: NaN is not handled.
inline bf16 to_bf16(float f) noexcept {
  f = f > impl::bf16_max ? impl::bf16_max : (f < -impl::bf16_max ? -impl::bf16_max : f);
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<bf16>(bits >> 16);
}

#ifndef ABC_NO_SIMD
namespace impl {
// A batch of floats from as many bfloat16s (exact), and back (rounded as to_bf16). Full-width
// x86 paths for AVX-512F and AVX2 batches; any other target goes through a small buffer.
template <class B>
ABC_FORCE_INLINE B load_bf16(const bf16* p) noexcept {
  static_assert(std::is_same<typename B::value_type, float>::value, "bfloat16 storage holds floats");
#  if defined(__AVX512F__)
  if constexpr (B::size == 16) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return B(_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
  }
#  endif
#  if defined(__AVX2__)
  if constexpr (B::size == 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return B(_mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }
#  endif
  alignas(B::arch_type::alignment()) float lanes[B::size];
  for (std::size_t i = 0; i < B::size; ++i) lanes[i] = from_bf16(p[i]);
  return B::load_aligned(lanes);
}

template <class B>
ABC_FORCE_INLINE void store_bf16(bf16* p, B x) noexcept {
  const B top(bf16_max);
  x = xsimd::min(xsimd::max(x, -top), top);
#  if defined(__AVX512F__)
  if constexpr (B::size == 16) {
#    if defined(__AVX512BF16__) && defined(__AVX512DQ__)
    // One instruction where the CPU has it. It rounds to nearest even like the integer path, but
    // flushes subnormal inputs to zero: a batch holding one (rare: a memory entry below 2^-126)
    // takes the integer path, so the result is the same bits either way.
    if (_mm512_fpclass_ps_mask(x, 0x20) == 0) {
      const __m256bh h = _mm512_cvtneps_pbh(x);
      std::memcpy(p, &h, sizeof h);
      return;
    }
#    endif
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i up = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(up));
    return;
  }
#  endif
#  if defined(__AVX2__)
  if constexpr (B::size == 8) {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i up = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
    // Each 128-bit lane packs its four 16-bit results twice; 64-bit words 0 and 2 hold the eight.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(up, up), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
    return;
  }
#  endif
  alignas(B::arch_type::alignment()) float lanes[B::size];
  x.store_aligned(lanes);
  for (std::size_t i = 0; i < B::size; ++i) p[i] = to_bf16(lanes[i]);
}
}  // namespace impl
#endif

// The kernels' element access: a memory held in T is read and written as it is; a bfloat16 one
// is widened on the way in and rounded on the way out, so that the arithmetic between is the same.
template <class T>
ABC_FORCE_INLINE T load_elem(const T* p) noexcept { return *p; }
ABC_FORCE_INLINE float load_elem(const bf16* p) noexcept { return from_bf16(*p); }
template <class T>
ABC_FORCE_INLINE void store_elem(T* p, T x) noexcept { *p = x; }
ABC_FORCE_INLINE void store_elem(bf16* p, float x) noexcept { *p = to_bf16(x); }

#ifndef ABC_NO_SIMD
template <class B>
ABC_FORCE_INLINE B load_batch(const typename B::value_type* p) noexcept { return B::load_unaligned(p); }
template <class B>
ABC_FORCE_INLINE B load_batch(const bf16* p) noexcept { return impl::load_bf16<B>(p); }
template <class B>
ABC_FORCE_INLINE void store_batch(typename B::value_type* p, const B& x) noexcept { x.store_unaligned(p); }
template <class B>
ABC_FORCE_INLINE void store_batch(bf16* p, const B& x) noexcept { impl::store_bf16(p, x); }
#endif

/// n floats rounded to bfloat16 (as to_bf16), and n bfloat16s widened to floats.
inline void encode_bf16(const float* x, bf16* out, Index n) noexcept {
  Index i = 0;
#ifndef ABC_NO_SIMD
  using B = batch<float>;
  for (; i + Index(B::size) <= n; i += Index(B::size)) impl::store_bf16(out + i, B::load_unaligned(x + i));
#endif
  for (; i < n; ++i) out[i] = to_bf16(x[i]);
}

inline void decode_bf16(const bf16* h, float* out, Index n) noexcept {
  Index i = 0;
#ifndef ABC_NO_SIMD
  using B = batch<float>;
  for (; i + Index(B::size) <= n; i += Index(B::size)) impl::load_bf16<B>(h + i).store_unaligned(out + i);
#endif
  for (; i < n; ++i) out[i] = from_bf16(h[i]);
}

}  // namespace kernel
ABC_NAMESPACE_END
