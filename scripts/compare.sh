#!/usr/bin/env bash
# abc: the main job. Builds and runs `compare`: every control on one workload, as a table of time,
# speed-up over exact softmax attention, state bytes and error against exact attention.
#   scripts/compare.sh [compare options, see build/bench/compare --help]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=${ABC_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target compare -j"$(nproc)" >/dev/null
"$build/bench/compare" "$@"
