// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Whether the xsimd kernels are on, and the batch type they use.
#pragma once

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
