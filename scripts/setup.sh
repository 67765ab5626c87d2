#!/usr/bin/env bash
# abc: install every Debian package the build, tests, benchmarks and examples need.
# Idempotent: packages already present are not touched, and nothing is printed for them.
set -euo pipefail

packages=(
  cmake g++ clang pkg-config            # compilers and build (pkg-config: a consumer test)
  libeigen3-dev libxsimd-dev xtl-dev    # the library's own dependencies
  catch2 libbenchmark-dev               # tests and benchmarks
  python3-numpy python3-matplotlib      # bench plots and interop checks
  libclang-rt-14-dev clang-tidy cppcheck  # sanitizers, libFuzzer, static analysis (scripts/test.sh)
  libomp-14-dev                         # OpenMP for clang, with Archer for ThreadSanitizer
  python3-torch                         # examples/pytorch_interop (reference written in PyTorch)
  doxygen                               # the API reference (the `docs` target, checked by scripts/test.sh)
)

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
