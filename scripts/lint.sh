#!/usr/bin/env bash
# abc: static analysis of the headers in include/abc: clang-tidy (configuration: .clang-tidy) over a
# translation unit that includes <abc/abc.hpp>, and cppcheck over the same. Fails on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
tu=$(mktemp --suffix=.cpp)
trap 'rm -f "$tu"' EXIT
printf '#include <abc/abc.hpp>\nint main() { return 0; }\n' >"$tu"
echo "clang-tidy: include/abc"
clang-tidy --quiet "$tu" -- -std=c++17 -Iinclude -isystem /usr/include/eigen3 -DNDEBUG
echo "cppcheck: include/abc"
# Eigen and xsimd are not given to cppcheck (their macros confuse it and their findings are not ours);
# missingIncludeSystem: those headers are then, by design, not found.
cppcheck --quiet --error-exitcode=1 --language=c++ --std=c++17 --enable=warning,performance,portability \
  --inline-suppr --suppress=missingIncludeSystem -Iinclude "$tu" include/abc
