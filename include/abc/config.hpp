// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Version macros, ABC_ASSERT, ABC_THROW, exception detection.
#pragma once

#include <cstdio>
#include <cstdlib>

// The project's one version: CMakeLists.txt reads these three lines (keep their form).
#define ABC_VERSION_MAJOR 0
#define ABC_VERSION_MINOR 1
#define ABC_VERSION_PATCH 0

// Exceptions are on unless the compiler says otherwise or the user forces them off, as {fmt} does.
#ifndef ABC_NO_EXCEPTIONS
#  if !(defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND))
#    define ABC_NO_EXCEPTIONS
#  endif
#endif

// ABC_THROW(ex): throws at the public boundary; with exceptions off it prints what() and aborts.
#ifndef ABC_THROW
#  ifdef ABC_NO_EXCEPTIONS
#    define ABC_THROW(ex)                                   \
       do {                                                 \
         std::fprintf(stderr, "abc: %s\n", (ex).what());    \
         std::abort();                                      \
       } while (false)
#  else
#    define ABC_THROW(ex) throw ex
#  endif
#endif

// ABC_ASSERT(cond, msg): internal invariants the public checks already guarantee. Debug only, and
// redefinable (tests define it to throw), so functions that use it are not noexcept.
#ifndef ABC_ASSERT
#  if defined(NDEBUG) || defined(ABC_NO_DEBUG)
#    define ABC_ASSERT(cond, msg) static_cast<void>(0)
#  else
#    define ABC_ASSERT(cond, msg)                                                          \
       do {                                                                                \
         if (!(cond)) {                                                                    \
           std::fprintf(stderr, "%s:%d: abc assertion failed: %s (%s)\n", __FILE__, __LINE__, \
                        #cond, msg);                                                       \
           std::abort();                                                                   \
         }                                                                                 \
       } while (false)
#  endif
#endif

// ABC_FORCE_INLINE: for the few small kernel helpers whose batches must stay in registers across the
// call (an out-of-line call spills every one of them to the stack).
#if defined(__GNUC__) || defined(__clang__)
#  define ABC_FORCE_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#  define ABC_FORCE_INLINE __forceinline
#else
#  define ABC_FORCE_INLINE inline
#endif

// ABC_INLINE_LAMBDA: the same for a lambda, written after its parameter list: a kernel's block, passed
// to a loop over blocks (kernel::impl::for_blocks), whose out-of-line body g++ would otherwise call.
#if defined(__GNUC__) || defined(__clang__)
#  define ABC_INLINE_LAMBDA __attribute__((always_inline))
#else
#  define ABC_INLINE_LAMBDA
#endif

// ABC_PREFETCH(p, write): a hint to fetch the cache line at p, to be read (write = 0) or written
// (write = 1), where the access pattern is one the hardware's prefetchers do not follow (rows a page
// or more apart); nothing on compilers without the builtin.
#if defined(__GNUC__) || defined(__clang__)
#  define ABC_PREFETCH(p, write) __builtin_prefetch(p, write)
#else
#  define ABC_PREFETCH(p, write) static_cast<void>(p)
#endif

// The instruction set this translation unit is compiled for, as xsimd's default architecture
// names it (kernel/simd.hpp), or scalar. Every abc entity lives in an inline namespace named after
// it (abc::isa_avx512bw::BoundedAttention, spelled abc::BoundedAttention), so translation units
// built with different -march flags instantiate different symbols: the linker cannot merge an
// AVX-512 copy of a kernel into a baseline translation unit, and one program may mix them
// (docs/simd.md). Only the flags' effect on xsimd's choice is named: flags that leave it unchanged
// give code that runs on the same CPUs.
#if !defined(ABC_NO_SIMD)
#  include <xsimd/config/xsimd_config.hpp>
#endif
#if defined(ABC_NO_SIMD)
#  define ABC_ISA scalar
#elif XSIMD_WITH_AVX512BW
#  define ABC_ISA avx512bw
#elif XSIMD_WITH_AVX512DQ
#  define ABC_ISA avx512dq
#elif XSIMD_WITH_AVX512CD
#  define ABC_ISA avx512cd
#elif XSIMD_WITH_AVX512F
#  define ABC_ISA avx512f
#elif XSIMD_WITH_FMA3_AVX2
#  define ABC_ISA fma3_avx2
#elif XSIMD_WITH_AVX2
#  define ABC_ISA avx2
#elif XSIMD_WITH_FMA3_AVX
#  define ABC_ISA fma3_avx
#elif XSIMD_WITH_AVX
#  define ABC_ISA avx
#elif XSIMD_WITH_FMA4
#  define ABC_ISA fma4
#elif XSIMD_WITH_FMA3_SSE
#  define ABC_ISA fma3_sse4_2
#elif XSIMD_WITH_SSE4_2
#  define ABC_ISA sse4_2
#elif XSIMD_WITH_SSE4_1
#  define ABC_ISA sse4_1
#elif XSIMD_WITH_SSSE3
#  define ABC_ISA ssse3
#elif XSIMD_WITH_SSE3
#  define ABC_ISA sse3
#elif XSIMD_WITH_SSE2
#  define ABC_ISA sse2
#elif XSIMD_WITH_NEON64
#  define ABC_ISA neon64
#elif XSIMD_WITH_NEON
#  define ABC_ISA neon
#else
#  define ABC_ISA scalar  // no instruction set xsimd knows: kernel/simd.hpp turns the SIMD kernels off
#endif

#define ABC_ISA_CAT_(a, b) a##b
#define ABC_ISA_CAT(a, b) ABC_ISA_CAT_(a, b)
#define ABC_ISA_STR_(a) #a
#define ABC_ISA_STR(a) ABC_ISA_STR_(a)
/// The inline namespace of this translation unit's instruction set (isa_avx512bw, isa_sse2, ...).
#define ABC_ISA_NAMESPACE ABC_ISA_CAT(isa_, ABC_ISA)
/// Opens and closes namespace abc with its instruction-set inline namespace.
#define ABC_NAMESPACE_BEGIN \
  namespace abc {           \
  inline namespace ABC_ISA_NAMESPACE {
#define ABC_NAMESPACE_END \
  }                       \
  }

// Eigen's heap alignment is part of its ABI: Eigen::internal::aligned_malloc and aligned_free are
// one symbol across a program, and a translation unit built for SSE2 (16-byte alignment, plain
// malloc) and one built for AVX-512 (64 bytes, an offset stored before the block) disagree on what
// a pointer is, so one frees what the other allocated wrongly. abc fixes both alignments at 64
// bytes, the widest any x86 build asks for, unless the program chose: the abc::abc CMake target and
// the pkg-config file define them on the command line, which also covers translation units that
// include Eigen before abc.
#if !defined(EIGEN_MAX_ALIGN_BYTES) && !defined(EIGEN_WORLD_VERSION)
#  define EIGEN_MAX_ALIGN_BYTES 64
#endif
#if !defined(EIGEN_MAX_STATIC_ALIGN_BYTES) && !defined(EIGEN_WORLD_VERSION)
#  define EIGEN_MAX_STATIC_ALIGN_BYTES 64
#endif
