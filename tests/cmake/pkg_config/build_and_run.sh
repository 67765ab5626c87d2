#!/usr/bin/env bash
# abc consumer test: a program compiled with nothing but `pkg-config --cflags abc` from an install
# prefix (no CMake on the consumer's side), then run.
#   build_and_run.sh PREFIX CXX SOURCE WORK_DIR
set -euo pipefail
prefix=$1 cxx=$2 source=$3 work=$4
mkdir -p "$work"
export PKG_CONFIG_PATH="$prefix/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# shellcheck disable=SC2046  # the flags are words
"$cxx" -std=c++17 -O1 $(pkg-config --cflags abc) "$source" -o "$work/quickstart"
"$work/quickstart"
