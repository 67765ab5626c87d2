#!/usr/bin/env bash
# abc: build and run the whole test suite through CTest. Installs what it needs first.
#   scripts/test.sh            (main build directory: build/, or $ABC_BUILD_DIR)
#
# Stages (each in its own build directory, each building only what it needs; all with
# -DABC_WERROR=ON, so the library and its tests build warning-free with both g++ and clang++):
#   1. build/         g++ Release: tests, examples, benches, the Python module; the whole CTest suite
#   2. build-asan/    clang++ AddressSanitizer + UndefinedBehaviorSanitizer (RelWithDebInfo,
#                     -fno-sanitize-recover=all: a finding fails): the tests, run (not the examples,
#                     which call the library as the tests do; not the self-contained header check:
#                     stages 1 and 4 compile it)
#   3. build-tsan/    clang++ ThreadSanitizer with ABC_WITH_OPENMP=ON (LLVM's libomp, its Archer
#                     tool giving TSan OpenMP's synchronisation): the multi-head and pool tests, run
#   4. build-nosimd/  clang++ -O1 with ABC_NO_SIMD=ON (scalar kernels): tests, run
#   5. build-fuzz/    clang++ libFuzzer harnesses (fuzz/), each run for a bounded time
#   6. scripts/lint.sh  clang-tidy and cppcheck on include/abc; Doxygen builds docs/ warning-free
# Stages 2–6 can be skipped with ABC_TEST_QUICK=1 (stage 1 only). Each stage line gives the clock
# time and the seconds since the start, so a CI log shows where its time goes.
# Stages 2, 3 and 5 (RelWithDebInfo) keep -O2 but emit line tables only (-gline-tables-only): all
# that the sanitizers' and libFuzzer's stack traces read (file:line), at a third less compile time
# than full debug info. The test sources are compiled in unity groups (tests/CMakeLists.txt), and
# stage 1 builds the Python module at -O1 (python/CMakeLists.txt says why that tests the same).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
build=${ABC_BUILD_DIR:-build}
jobs=$(nproc)
stage() { printf '\n==== abc test: %s (%s, %ss in) ====\n' "$*" "$(date +%T)" "$SECONDS"; }

stage "1/6 Release (g++), full suite"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DABC_WERROR=ON -DABC_PYTHON_OPTIMIZE=-O1
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" --output-on-failure -j"$jobs"

[ "${ABC_TEST_QUICK:-0}" = 1 ] && exit 0

# The consumer and compile-fail tests check CMake packaging and diagnostics, not the kernels, and
# do not depend on the build's flags: stage 1 runs them, the other runs skip them.
skip='^(consumer|compile_fail)\.'
# Stages that build only some test executables also skip the <name>_NOT_BUILT placeholder that
# CTest's test discovery registers for each executable not built there.
# The Python module is built and tested in stage 1 only: a sanitized module would not load into an
# uninstrumented python3, and its build is the longest of the lean stages.
lean=(-DABC_BUILD_BENCHMARKS=OFF -DABC_INSTALL=OFF -DABC_BUILD_PYTHON=OFF)
# RelWithDebInfo's -O2 and NDEBUG, with line tables instead of full debug info.
lines=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG")

stage "2/6 AddressSanitizer + UndefinedBehaviorSanitizer (clang++)"
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# The self-contained header check proves nothing flag-dependent: stage 1 (g++) and stage 4 (clang,
# NO_SIMD, whose includes differ) compile it, with -Werror; here it would only repeat stage 1's.
cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++ -DABC_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "${lean[@]}" "${lines[@]}" -DABC_CHECK_HEADERS=OFF -DABC_BUILD_EXAMPLES=OFF -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="$san"
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -E "$skip"

stage "3/6 ThreadSanitizer + OpenMP (clang++, libomp + Archer)"
# Only abc_mha_tests runs (pairs on threads); 4 threads on CI's 2 cores interleave them the more.
# Archer ships with libomp-14-dev; without it TSan cannot see OpenMP's barriers and reports noise.
tsan="-fsanitize=thread -fno-omit-frame-pointer"
archer=$(ls /usr/lib/llvm-*/lib/libarcher.so 2>/dev/null | head -1)
[ -n "$archer" ] || { echo "libarcher.so not found (package libomp-14-dev)"; exit 1; }
cmake -S . -B build-tsan -DCMAKE_CXX_COMPILER=clang++ -DABC_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "${lean[@]}" \
  "${lines[@]}" -DABC_BUILD_EXAMPLES=OFF -DABC_WITH_OPENMP=ON -DCMAKE_CXX_FLAGS="$tsan" -DCMAKE_EXE_LINKER_FLAGS="$tsan"
cmake --build build-tsan -j"$jobs" --target abc_mha_tests
OMP_NUM_THREADS=4 OMP_TOOL_LIBRARIES="$archer" \
  TSAN_OPTIONS="halt_on_error=1 abort_on_error=1 ignore_noninstrumented_modules=1" \
  ctest --test-dir build-tsan --output-on-failure -j1 -E "$skip|_NOT_BUILT"

stage "4/6 scalar kernels (ABC_NO_SIMD=ON, clang++ -O1)"
# clang++ -O1: the scalar path's results, not its speed, are under test, and this is the
# cheapest build of abc_tests (the longest compile of the run on CI's two cores). Not g++ -O1:
# its flow analysis is coarser there and reports Eigen copies as maybe-uninitialized.
cmake -S . -B build-nosimd -DCMAKE_CXX_COMPILER=clang++ -DABC_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DABC_NO_SIMD=ON "${lean[@]}" -DABC_BUILD_EXAMPLES=OFF
# Everything this configuration has (abc_tests with the header check, abc_alloc_tests,
# abc_mha_tests), as one make goal: a list of --target goals is built one after another.
cmake --build build-nosimd -j"$jobs"
ctest --test-dir build-nosimd --output-on-failure -j"$jobs" -E "$skip|_NOT_BUILT"

stage "5/6 fuzzers (libFuzzer + ASan + UBSan), bounded runs"
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DABC_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DABC_BUILD_TESTS=OFF -DABC_BUILD_EXAMPLES=OFF "${lean[@]}" "${lines[@]}" -DABC_BUILD_FUZZERS=ON
cmake --build build-fuzz -j"$jobs"
bash fuzz/run.sh build-fuzz "${ABC_FUZZ_SECONDS:-30}"

stage "6/6 lint (clang-tidy, cppcheck) and the API reference (Doxygen, warnings fail)"
bash scripts/lint.sh
cmake --build "$build" --target docs
stage "all stages passed"
