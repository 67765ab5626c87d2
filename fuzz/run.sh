#!/usr/bin/env bash
# abc: run every libFuzzer harness for a bounded time from its committed seed corpus.
#   fuzz/run.sh BUILD_DIR [SECONDS]     (default 45 s per fuzzer)
# New inputs go to a scratch corpus under BUILD_DIR; the committed corpus is only read. A crash
# leaves its reproducer (crash-*) in BUILD_DIR/fuzz-work/<name> and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS]}
secs=${2:-45}
for name in api state pool pool_omp select weights; do
  bin="$build/fuzz/fuzz_$name"
  seeds=${name%_omp}  # fuzz_pool_omp is fuzz_pool on threads: the same seeds
  if [ ! -x "$bin" ]; then
    echo "fuzz_$name: not built (no OpenMP for this compiler), skipped"
    continue
  fi
  # The weights-file reader is one small parser: a third of the time (5 s at least) reaches what
  # the full time would, and keeps the stage short.
  t=$secs
  [ "$name" = weights ] && t=$(( secs / 3 > 5 ? secs / 3 : 5 ))
  work="$build/fuzz-work/$name"
  mkdir -p "$work/corpus"
  log="$work/log.txt"
  echo "fuzz_$name: ${t} s from fuzz/corpus/$seeds"
  if ! (cd "$work" && ASAN_OPTIONS=handle_sigill=1 UBSAN_OPTIONS=print_stacktrace=1 "$OLDPWD/$bin" -max_total_time="$t" -print_final_stats=1 \
          -timeout=20 -rss_limit_mb=2048 corpus "$OLDPWD/fuzz/corpus/$seeds") >"$log" 2>&1; then
    tail -60 "$log"
    echo "fuzz_$name: FAILED (log: $log)"
    exit 1
  fi
  # The last status line (#runs ... cov: ... ft: ...) and the total executions.
  grep -E '^#[0-9]+' "$log" | tail -1
  grep -E 'stat::number_of_executed_units|Done [0-9]+ runs' "$log" || true
done
