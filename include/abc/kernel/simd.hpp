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
}  // namespace impl
#endif

}  // namespace kernel
ABC_NAMESPACE_END
