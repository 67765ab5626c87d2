// SPDX-License-Identifier: MIT
// compare's main in a build that carries compare once per instruction set (bench/CMakeLists.txt):
// it runs the widest copy this CPU runs, or the one --isa names. Compiled for the baseline target,
// like every program that must start on any x86-64 CPU; the copies' symbols are apart because abc
// puts each instruction set in an inline namespace of its own (docs/simd.md).
#include <abc/simd_arch.hpp>

#include <cstdio>
#include <cstring>
#include <string>

// One declaration per copy the build made (ABC_COMPARE_<ISA> from bench/CMakeLists.txt).
#ifdef ABC_COMPARE_AVX512BW
int compare_main_avx512bw(int argc, char** argv);
#endif
#ifdef ABC_COMPARE_FMA3_AVX2
int compare_main_fma3_avx2(int argc, char** argv);
#endif
int compare_main_sse2(int argc, char** argv);

namespace {

struct Copy {
  const char* isa;
  int (*main)(int, char**);
};

// Widest first.
constexpr Copy kCopies[] = {
#ifdef ABC_COMPARE_AVX512BW
    {"avx512bw", compare_main_avx512bw},
#endif
#ifdef ABC_COMPARE_FMA3_AVX2
    {"fma3_avx2", compare_main_fma3_avx2},
#endif
    {"sse2", compare_main_sse2},
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "compare: %s\n", what.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  const char* cpu = abc::cpu_simd_arch();
  const auto runs_here = [&](const Copy& c) {
    return abc::detail::isa_rank(c.isa) <= abc::detail::isa_rank(cpu);
  };
  const char* want = nullptr;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--isa") == 0) want = argv[i + 1];
  std::string carried;
  for (const Copy& c : kCopies) {
    carried += carried.empty() ? "" : ", ";
    carried += c.isa;
    if (want == nullptr ? runs_here(c) : std::strcmp(want, c.isa) == 0) {
      if (!runs_here(c)) fail(std::string("--isa ") + want + ": this CPU runs at most " + cpu);
      return c.main(argc, argv);
    }
  }
  if (want != nullptr) fail(std::string("--isa wants one of ") + carried + ", got '" + want + "'");
  fail(std::string("this CPU (") + cpu + ") runs none of the copies built: " + carried);
}
