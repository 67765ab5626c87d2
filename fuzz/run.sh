#!/usr/bin/env bash
# abc: run every libFuzzer harness for a bounded time from its committed seed corpus.
#   fuzz/run.sh BUILD_DIR [SECONDS]     (default 45 s per fuzzer)
# New inputs go to a scratch corpus under BUILD_DIR; the committed corpus is only read. A crash
# leaves its reproducer (crash-*) in BUILD_DIR/fuzz-work/<name> and fails the script.
# The single-threaded harnesses run side by side, ABC_FUZZ_JOBS at a time (default: one per core),
# each for its full time; fuzz_pool_omp, whose pairs run on OpenMP threads, runs alone after them,
# so that its threads have the cores to themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS]}" && pwd)
secs=${2:-45}
jobs=${ABC_FUZZ_JOBS:-$(nproc)}
root=$PWD

# Runs harness $1 into its own log, its exit status into the file `status` next to it.
fuzz_one() {
  local name=$1 seeds=${1%_omp}  # fuzz_pool_omp is fuzz_pool on threads: the same seeds
  seeds=${seeds%_native}           # fuzz_api_native, fuzz_pool_native: built for this machine's ISA
  # The weights-file reader is one small parser: a third of the time (5 s at least) reaches what
  # the full time would, and keeps the stage short.
  local t=$secs
  [ "$name" = weights ] && t=$((secs / 3 > 5 ? secs / 3 : 5))
  local work="$build/fuzz-work/$name"
  mkdir -p "$work/corpus"
  echo "fuzz_$name: ${t} s from fuzz/corpus/$seeds"
  local rc=0
  (cd "$work" && ASAN_OPTIONS=handle_sigill=1 UBSAN_OPTIONS=print_stacktrace=1 "$build/fuzz/fuzz_$name" \
    -max_total_time="$t" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048 corpus "$root/fuzz/corpus/$seeds") \
    >"$work/log.txt" 2>&1 || rc=$?
  echo "$rc" >"$work/status"
}

# The harness's result: its last status line (#runs ... cov: ... ft: ...) and total executions, or
# the end of its log and a failure.
report() {
  local name=$1 log="$build/fuzz-work/$1/log.txt"
  local status
  status=$(cat "$build/fuzz-work/$1/status" 2>/dev/null || echo "no status")
  if [ "$status" != 0 ]; then
    tail -60 "$log"
    echo "fuzz_$name: FAILED (log: $log)"
    return 1
  fi
  echo "fuzz_$name:"
  grep -E '^#[0-9]+' "$log" | tail -1
  grep -E 'stat::number_of_executed_units|Done [0-9]+ runs' "$log" || true
}

names=()
for name in api api_native state pool pool_native select weights pool_omp; do
  if [ -x "$build/fuzz/fuzz_$name" ]; then
    names+=("$name")
  else
    echo "fuzz_$name: not built, skipped (fuzz_pool_omp: no OpenMP for this compiler)"
  fi
done

failed=0
running=0
for name in "${names[@]}"; do
  if [ "$name" = pool_omp ]; then  # alone: wait for the others first
    wait
    running=0
  fi
  while [ "$running" -ge "$jobs" ]; do wait -n || true; running=$((running - 1)); done
  rm -f "$build/fuzz-work/$name/status"
  fuzz_one "$name" &
  running=$((running + 1))
done
wait
# Each harness's report in a fixed order, whichever finished first.
for name in "${names[@]}"; do report "$name" || failed=1; done
exit "$failed"
