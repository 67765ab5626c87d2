// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Whether the xsimd kernels are on, and the batch type they use.
#pragma once

#include <cstddef>
#include <type_traits>

#include "../config.hpp"
#include "../types.hpp"

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
// The architecture of this target's batches of `Bytes` bytes, with its multiply-add where the target
// has one (impl::fma calls it for SSE batches); void where there are none.
template <std::size_t Bytes>
struct arch_of_bytes {
  using type = void;
};
#  if XSIMD_WITH_FMA3_AVX2
template <>
struct arch_of_bytes<32> {
  using type = xsimd::fma3<xsimd::avx2>;
};
#  elif XSIMD_WITH_AVX
template <>
struct arch_of_bytes<32> {
  using type = xsimd::avx;
};
#  endif
#  if XSIMD_WITH_SSE2
template <>
struct arch_of_bytes<16> {
  using type = xsimd::sse2;
};
#  endif

// The batch of T of half B's width on the same target (AVX-512 → AVX2, AVX → SSE); void where
// none is narrower (SSE, NEON). A kernel's entries past its last full batch take these before the
// scalar path: up to 15 floats with AVX-512, which the scalar path would otherwise take at a
// sixteenth of the rate.
template <class B, class A = typename arch_of_bytes<sizeof(typename B::value_type) * B::size / 2>::type>
struct half_batch {
  using type = xsimd::batch<typename B::value_type, A>;
};
template <class B>
struct half_batch<B, void> {
  using type = void;
};
template <class B>
using half_batch_t = typename half_batch<B>::type;

// A batch type passed as a value, to a generic lambda.
template <class B>
struct batch_tag {
  using type = B;
};

// f(batch_tag<B>{}, l) for the batches of B that fit in [l, n), then for those of each narrower
// width (half_batch_t; after full batches, at most one of each); returns where the scalar path takes
// over (l itself for B = void). Which width an entry gets depends on l and n alone, so every call
// over the same range computes an entry alike.
template <class B, class F>
ABC_FORCE_INLINE Index for_batches(Index l, Index n, const F& f) {
  if constexpr (std::is_void<B>::value) {
    (void)n, (void)f;
    return l;
  } else {
    for (; l + Index(B::size) <= n; l += Index(B::size)) f(batch_tag<B>{}, l);
    return for_batches<half_batch_t<B>>(l, n, f);
  }
}

// g(std::integral_constant<int, r>{}) for a count r in [1, M], known only at run time.
template <int M, class G>
ABC_FORCE_INLINE void with_count(Index r, const G& g) {
  if constexpr (M > 0) {
    if (r == M) return g(std::integral_constant<int, M>{});
    with_count<M - 1>(r, g);
  }
}

// f(batch_tag<B>{}, std::integral_constant<int, K>{}, l) for the blocks of K batches of B that fit
// in [l, n); then once for the r < K full batches left, as a block of r; then, as for_batches, at
// most one batch of each narrower width, each a block of 1. Returns where the scalar path takes
// over. A pass whose block keeps its batches' sums in registers while it streams the other
// dimension goes over that dimension once per block: a remainder of r batches as one block costs
// one pass, where r single batches cost r (each bound by its own chain of multiply-adds). Every
// batch of a block gets the arithmetic it would get alone, so how the batches are grouped changes
// no entry's bits.
template <int K, class B, class F>
ABC_FORCE_INLINE Index for_blocks(Index l, Index n, const F& f) {
  constexpr Index width = Index(B::size);
  for (; l + K * width <= n; l += K * width) f(batch_tag<B>{}, std::integral_constant<int, K>{}, l);
  const Index r = (n - l) / width;
  with_count<K - 1>(r, [&](auto k) { f(batch_tag<B>{}, k, l); });
  return for_batches<half_batch_t<B>>(l + r * width, n, [&](auto tag, Index at) {
    f(tag, std::integral_constant<int, 1>{}, at);
  });
}

// x · y + z rounded once, for every kernel. xsimd 8.1 has no multiply-add of its own for AVX-512,
// nor for SSE or AVX batches on a target with FMA (its fma3 architectures are other types, and a
// build with AVX has no fma3<sse4_2>): its generic fallback computes x * y + z, which g++
// contracts into one instruction and clang (which contracts only within one expression) leaves as
// two, rounded twice and at half the rate. There the instruction is called itself; elsewhere
// xsimd's fma is the instruction (or, without FMA, the two operations the scalar path does too).
template <class B>
ABC_FORCE_INLINE B fma(const B& x, const B& y, const B& z) noexcept {
  using T = typename B::value_type;
  constexpr bool f32 = std::is_same<T, float>::value, f64 = std::is_same<T, double>::value;
  (void)f32, (void)f64;
#  if defined(__AVX512F__)
  constexpr bool zmm = std::is_base_of<xsimd::avx512f, typename B::arch_type>::value;
  if constexpr (zmm && f32) return B(_mm512_fmadd_ps(x, y, z));
  if constexpr (zmm && f64) return B(_mm512_fmadd_pd(x, y, z));
#  endif
#  if defined(__FMA__)
  constexpr std::size_t bytes = sizeof(T) * B::size;
  constexpr bool ymm = std::is_base_of<xsimd::avx, typename B::arch_type>::value && bytes == 32;
  constexpr bool xmm = std::is_base_of<xsimd::sse2, typename B::arch_type>::value && bytes == 16;
  if constexpr (ymm && f32) return B(_mm256_fmadd_ps(x, y, z));
  if constexpr (ymm && f64) return B(_mm256_fmadd_pd(x, y, z));
  if constexpr (xmm && f32) return B(_mm_fmadd_ps(x, y, z));
  if constexpr (xmm && f64) return B(_mm_fmadd_pd(x, y, z));
#  endif
  return xsimd::fma(x, y, z);
}

// A batch the compiler must hold in a register: without this, GCC folds the load of a batch that
// several multiply-adds read into each of them as a memory operand (one load per use instead of
// one), and the loads, not the multiply-adds, bound the loop (a product tile, a block of dots).
template <class B>
ABC_FORCE_INLINE B in_register(B x) noexcept {
#  if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  auto r = static_cast<typename B::register_type>(x);
#    ifdef __AVX512F__
  asm("" : "+v"(r));  // any of the 32 registers
#    else
  asm("" : "+x"(r));
#    endif
  return B(r);
#  else
  return x;
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

// The horizontal sums of sixteen batches, b[k]'s into out[k]. For AVX-512 float batches, one tree
// of shuffles and additions that halves the lanes of all sixteen sums together (fifteen additions
// in place of hsum4's four reductions of four; each sum added in another order than hsum's); for
// other batches, four hsum4s.
template <class B, class T>
ABC_FORCE_INLINE void hsum16(const B* b, T* out) noexcept {
#  if defined(__AVX512F__)
  if constexpr (std::is_same<T, float>::value && B::size == 16) {
    // Fed in the 4 × 4 transposed order (b[4r + q] at 4q + r), the tree's lanes come out in b's.
    __m512 x[16];
    for (int r = 0; r < 4; ++r)
      for (int q = 0; q < 4; ++q) x[4 * q + r] = b[4 * r + q];
    __m512 y[8];  // 256-bit halves added: two sums' 8 partial lanes per register
    for (int k = 0; k < 8; ++k)
      y[k] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 z[4];  // 128-bit quarters added: four sums' 4 lanes per register
    for (int k = 0; k < 4; ++k)
      z[k] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    __m512 w[2];  // pairs within each 128-bit lane: eight sums' 2 lanes per register
    for (int k = 0; k < 2; ++k)
      w[k] = _mm512_add_ps(_mm512_shuffle_ps(z[2 * k], z[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(z[2 * k], z[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1))));
    return;
  }
#  endif
  for (int k = 0; k < 16; k += 4) hsum4(b[k], b[k + 1], b[k + 2], b[k + 3], out + k);
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

// Lanes 0, 1, …, size − 1 of a batch of T.
template <class B>
ABC_FORCE_INLINE B lane_indices() noexcept {
  using T = typename B::value_type;
  static_assert(B::size <= 16, "a batch of at most 16 lanes");
  alignas(64) static constexpr T index[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return B::load_aligned(index);
}
}  // namespace impl
#endif

}  // namespace kernel
ABC_NAMESPACE_END
