#!/usr/bin/env bash
# abc: build and run the whole test suite through CTest. Installs what it needs first.
#   scripts/test.sh            (build directory: build/, or $ABC_BUILD_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=${ABC_BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" --output-on-failure -j"$jobs"
