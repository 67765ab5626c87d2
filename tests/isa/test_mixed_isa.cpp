// SPDX-License-Identifier: MIT
// Translation units of one program built for different instruction sets (mixed_part.cpp, twice),
// linked in both orders (two executables, ABC_MIXED_ORDER names which), under the sanitizer stages
// as well. Before abc put each instruction set in an inline namespace and fixed Eigen's alignment,
// this program either ran one copy's kernels for both (the linker kept one definition of each
// inline function) or freed an Eigen block with the other copy's aligned_free (AddressSanitizer:
// "attempting free on address which was not malloc()-ed").
#include <abc/abc.hpp>
#include <catch2/catch.hpp>

#include <cmath>

#include "isa/mixed_part.hpp"

TEST_CASE("two translation units built for different instruction sets run side by side", "[isa]") {
  const MixedResult base = mixed_part_baseline(), native = mixed_part_native();
  INFO("link order " ABC_MIXED_ORDER ": baseline " << base.isa << ", native " << native.isa);
  // Each ran its own kernels: the baseline copy the baseline's, the native copy this CPU's widest.
  CHECK(base.isa == abc::simd_arch());
  CHECK(native.isa == abc::cpu_simd_arch());
  REQUIRE(base.values.size() == native.values.size());
  REQUIRE(base.values.size() == std::size_t(37 * 16 * 2 + 37 * 4 * 16));
  CHECK(base.pool_bytes == native.pool_bytes);
  // The same results to float rounding (the copies sum in different orders, so not bit for bit).
  double worst = 0;
  for (std::size_t i = 0; i < base.values.size(); ++i) {
    REQUIRE(std::isfinite(base.values[i]));
    worst = std::fmax(worst, std::fabs(double(base.values[i]) - double(native.values[i])));
  }
  CHECK(worst < 1e-5);

  // A state saved by either copy loads here (this translation unit is a third build): the blob
  // names the control by its tag, not by a type spelled with an instruction-set namespace.
  const abc::BoundedAttention attn{abc::control::Mlp<float>{abc::Slots{8}, 16, abc::Seed{3}}};
  auto from_base = attn.make_state(16, 16), from_native = attn.make_state(16, 16);
  abc::load_state(attn, base.blob, from_base);
  abc::load_state(attn, native.blob, from_native);
  CHECK(from_native.position() == 37);
  CHECK((from_base.keys() - from_native.keys()).cwiseAbs().maxCoeff() < 1e-5f);
  CHECK(abc::save_state(attn, from_native) == native.blob);
}

TEST_CASE("simd_arch names this translation unit's kernels and the advice is said when it pays", "[isa]") {
  using abc::detail::isa_advice;
  using abc::detail::isa_rank;
  CHECK(std::string(abc::simd_arch()) == ABC_ISA_STR(ABC_ISA));
  // The CPU runs what this translation unit was compiled for (it is running it).
  CHECK(isa_rank(abc::simd_arch()) >= 0);
  CHECK(isa_rank(abc::simd_arch()) <= isa_rank(abc::cpu_simd_arch()));
  CHECK(isa_rank("sse2") < isa_rank("fma3_avx2"));
  CHECK(isa_rank("fma3_avx2") < isa_rank("avx512bw"));
  CHECK(isa_rank("mmx") == -1);
  CHECK(isa_advice("sse2", "avx512bw") ==
        "abc: the kernels were compiled for sse2 but this CPU runs avx512bw, which is several times faster: "
        "compile with -march=native (CMake: link abc::native) or build one translation unit per instruction set "
        "and dispatch (docs/simd.md). Define ABC_NO_ISA_WARNING to silence this.");
  CHECK(isa_advice("sse4_2", "fma3_avx2").find("compiled for sse4_2 but this CPU runs fma3_avx2") != std::string::npos);
  CHECK(isa_advice("sse2", "sse4_2").empty());         // no wider registers to gain
  CHECK(isa_advice("fma3_avx2", "avx512bw").empty());  // already 256-bit: a choice, not an accident
  CHECK(isa_advice("avx512bw", "avx512bw").empty());
  CHECK(isa_advice("scalar", "avx512bw").empty());     // ABC_NO_SIMD is asked for
}

namespace {
template <class Inner>
struct Wrapped {};  // a user type naming an abc type, as a control without a tag() might
}  // namespace

TEST_CASE("a control's compiler-spelled name does not depend on the instruction set", "[isa]") {
  // State kinds compare these names across shared libraries; the inline namespace is left out.
  const std::string name = abc::detail::compiler_name<Wrapped<abc::control::SlidingWindow<float>>>();
  // g++ spells the argument SlidingWindow<float>, clang++ SlidingWindow<> (the default left out).
  CHECK(name.find("Wrapped<abc::control::SlidingWindow<") != std::string::npos);
  CHECK(name.find("isa_") == std::string::npos);
}
