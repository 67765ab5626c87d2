// SPDX-License-Identifier: MIT
// abc: bounded-memory attention. Which instruction set the kernels were compiled for, which one the
// CPU has, and the one-time advice when they differ by more than a SIMD width.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

#include "config.hpp"

ABC_NAMESPACE_BEGIN

/// The instruction set this translation unit's kernels were compiled for, as the -march / -m
/// flags made xsimd choose it: "avx512bw", "fma3_avx2", "sse2", "neon64", ... or "scalar"
/// (ABC_NO_SIMD, or no instruction set xsimd knows). It is the name of abc's inline namespace in
/// this translation unit without its `isa_` prefix, so translation units built with different
/// flags each answer for themselves.
constexpr const char* simd_arch() noexcept { return ABC_ISA_STR(ABC_ISA); }

/// The widest instruction set the running CPU (and its operating system) supports, in the names of
/// simd_arch(). On x86 with GCC or Clang it asks the CPU once; elsewhere it answers simd_arch().
inline const char* cpu_simd_arch() noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  static const char* const best = [] {
    __builtin_cpu_init();
    const bool f = __builtin_cpu_supports("avx512f"), cd = __builtin_cpu_supports("avx512cd"),
               dq = __builtin_cpu_supports("avx512dq"), bw = __builtin_cpu_supports("avx512bw"),
               fma = __builtin_cpu_supports("fma");
    // xsimd's order of preference (its default_arch), widest first.
    if (f && cd && dq && bw) return "avx512bw";
    if (f && cd && dq) return "avx512dq";
    if (f && cd) return "avx512cd";
    if (f) return "avx512f";
    if (__builtin_cpu_supports("avx2")) return fma ? "fma3_avx2" : "avx2";
    if (__builtin_cpu_supports("avx")) return fma ? "fma3_avx" : "avx";
    if (__builtin_cpu_supports("fma4")) return "fma4";
    if (__builtin_cpu_supports("sse4.2")) return fma ? "fma3_sse4_2" : "sse4_2";
    if (__builtin_cpu_supports("sse4.1")) return "sse4_1";
    if (__builtin_cpu_supports("ssse3")) return "ssse3";
    if (__builtin_cpu_supports("sse3")) return "sse3";
    if (__builtin_cpu_supports("sse2")) return "sse2";
    return "scalar";
  }();
  return best;
#else
  return simd_arch();
#endif
}

namespace detail {

// An instruction set's place in xsimd's order of preference (x86; a CPU that runs one runs those
// before it), 0 for scalar, -1 for a name it does not know. neon and neon64 rank above scalar only.
inline int isa_rank(const char* arch) noexcept {
  static const char* const order[] = {"scalar", "sse2",      "sse3",     "ssse3",    "sse4_1",   "sse4_2",
                                      "fma3_sse4_2", "fma4", "avx",      "fma3_avx", "avx2",     "fma3_avx2",
                                      "avx512f", "avx512cd", "avx512dq", "avx512bw"};
  for (int i = 0; i < int(sizeof(order) / sizeof(order[0])); ++i)
    if (std::strcmp(arch, order[i]) == 0) return i;
  if (std::strcmp(arch, "neon") == 0) return 1;
  if (std::strcmp(arch, "neon64") == 0) return 2;
  return -1;
}

// The SIMD register width in bytes of an instruction set named as simd_arch() names it; 0 for
// scalar and for a name it does not know.
inline int simd_width(const char* arch) noexcept {
  if (std::strncmp(arch, "avx512", 6) == 0) return 64;
  if (std::strstr(arch, "avx") != nullptr) return 32;
  if (std::strncmp(arch, "sse", 3) == 0 || std::strcmp(arch, "ssse3") == 0 || std::strstr(arch, "sse4") != nullptr ||
      std::strcmp(arch, "fma4") == 0 || std::strncmp(arch, "neon", 4) == 0)
    return 16;
  return 0;
}

// What abc says once when kernels compiled for 16-byte SIMD run on a CPU with 32- or 64-byte SIMD
// (the default x86-64 build on any recent CPU); empty when there is nothing to say. A scalar build
// is a choice (ABC_NO_SIMD) and is not second-guessed.
inline std::string isa_advice(const char* built, const char* cpu) {
  const int b = simd_width(built), c = simd_width(cpu);
  if (b != 16 || c <= b) return {};
  return std::string("abc: the kernels were compiled for ") + built + " but this CPU runs " + cpu +
         ", which is several times faster: compile with -march=native (CMake: link abc::native) or build one "
         "translation unit per instruction set and dispatch (docs/simd.md). Define ABC_NO_ISA_WARNING to "
         "silence this.";
}

// Prints isa_advice once per program and instruction set, on the first operator built.
inline void advise_isa_once() {
#ifndef ABC_NO_ISA_WARNING
  static const bool said = [] {
    const std::string advice = isa_advice(simd_arch(), cpu_simd_arch());
    if (!advice.empty()) std::fprintf(stderr, "%s\n", advice.c_str());
    return true;
  }();
  static_cast<void>(said);
#endif
}

}  // namespace detail
ABC_NAMESPACE_END
