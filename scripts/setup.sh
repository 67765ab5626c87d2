#!/usr/bin/env bash
# abc: install the Debian packages abc needs.
#   scripts/setup.sh           what building abc and running `compare` need (scripts/compare.sh)
#   scripts/setup.sh --tests   everything the tests, sanitizers, fuzzers, benchmarks, examples and
#                              docs need as well (scripts/test.sh)
# Idempotent: packages already present are not touched, and nothing is printed for them.
set -euo pipefail

packages=(
  cmake g++                             # compiler and build
  libeigen3-dev libxsimd-dev xtl-dev    # the library's own dependencies
)
case "${1:-}" in
  "") ;;
  --tests)
    packages+=(
      clang pkg-config                      # the sanitizer stages; a pkg-config consumer test
      catch2 libbenchmark-dev               # tests and benchmarks
      python3-numpy python3-matplotlib      # bench plots and interop checks
      libclang-rt-14-dev clang-tidy cppcheck  # sanitizers, libFuzzer, static analysis (scripts/test.sh)
      libomp-14-dev                         # OpenMP for clang, with Archer for ThreadSanitizer
      python3-torch                         # examples/pytorch_interop (reference written in PyTorch)
      pybind11-dev python3-dev              # the Python module abc_attention (python/, ABC_BUILD_PYTHON)
      doxygen                               # the API reference (the `docs` target, checked by scripts/test.sh)
    )
    ;;
  *)
    echo "abc setup: unknown option '$1', expected nothing or --tests" >&2
    exit 2
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "abc setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
