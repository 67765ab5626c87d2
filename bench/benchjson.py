#!/usr/bin/python3
"""abc bench: the medians of a bench_attention JSON run, keyed for report.py and plot.py.

load(path) returns (context, rows): rows[(kind, N, second)] for every median, where kind is the
name without its numbers (bounded/mlp/forward), N the first number and second the slot count n
(64 when absent), or for the chunk sweep (chunk/<control>/<form>/<N>/<n>/<C>) the chunk size C
with n moved into the kind (chunk/mlp/forward_causal/64). A benchmark whose name has no numbers
is left out.

Every problem with the file (missing, unreadable, not JSON, not a Google Benchmark run) raises
BadRun with a one-line message naming the file; the scripts print it and exit with status 2.

Run as a script, it lists the medians it reads (a check that a run parses):

    bench/benchjson.py bench/results/run2.json
"""
import argparse
import json
import sys

UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class BadRun(Exception):
    """A benchmark JSON file that cannot be used; str() is one line naming the file."""


def read_run(path):
    """The parsed JSON of a Google Benchmark run, checked for the parts the scripts read."""
    try:
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
    except OSError as e:
        raise BadRun(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise BadRun(f"{path}: not a text file (expected Google Benchmark JSON)") from None
    except json.JSONDecodeError as e:
        raise BadRun(f"{path}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    if not isinstance(run, dict) or not isinstance(run.get("benchmarks"), list):
        raise BadRun(f"{path}: not a Google Benchmark JSON run (no 'benchmarks' list; "
                     "write one with --benchmark_out=FILE --benchmark_out_format=json)")
    if not isinstance(run.get("context"), dict):
        raise BadRun(f"{path}: not a Google Benchmark JSON run (no 'context' object)")
    for i, b in enumerate(run["benchmarks"]):
        if not isinstance(b, dict):
            raise BadRun(f"{path}: benchmarks[{i}] is not an object")
        for key in ("run_name", "time_unit", "cpu_time"):
            if key not in b:
                raise BadRun(f"{path}: benchmarks[{i}] ({b.get('name', '?')}) has no '{key}'")
        if b["time_unit"] not in UNITS:
            raise BadRun(f"{path}: benchmarks[{i}] ({b['run_name']}) has time unit "
                         f"{b['time_unit']!r}, not one of {', '.join(UNITS)}")
        if not isinstance(b["cpu_time"], (int, float)):
            raise BadRun(f"{path}: benchmarks[{i}] ({b['run_name']}) has a cpu_time that is not a number")
    return run


def seconds(b):
    """A benchmark entry's CPU time in seconds."""
    return b["cpu_time"] * UNITS[b["time_unit"]]


def load(path):
    run = read_run(path)
    rows = {}
    for b in run["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        parts = str(b["run_name"]).split("/")     # e.g. bounded/mlp/forward/4096/64
        nums = []
        while parts and parts[-1].isdigit():
            nums.insert(0, int(parts.pop()))
        if not nums:
            continue
        n_tok, second = nums[0], (nums[1] if len(nums) > 1 else 64)
        if len(nums) > 2:                         # chunk/<control>/<form>/<N>/<n>/<C>
            parts.append(str(second))             # kind chunk/mlp/forward_causal/64, keyed by C
            second = nums[2]
        rows[("/".join(parts), n_tok, second)] = {
            "seconds": seconds(b),
            "tokens_per_s": b.get("tokens_per_s", 0.0),
            "gflops": b.get("FLOPS", 0.0) / 1e9,
            "peak": b.get("peak_frac", 0.0),
            "state": b.get("state_bytes", 0.0),
        }
    return run["context"], rows


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line on stderr (status 2) instead of usage + error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def fail(prog, message):
    """One line on stderr and exit status 2: the scripts' answer to a bad input."""
    print(f"{prog}: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv=None):
    p = Parser(prog="benchjson.py",
               description="List the medians of a bench_attention JSON run as report.py and plot.py "
                           "read them: one line per (kind, N, n or chunk size).")
    p.add_argument("run", help="a Google Benchmark JSON file (bench/results/run2.json)")
    args = p.parse_args(argv)
    try:
        ctx, rows = load(args.run)
    except BadRun as e:
        fail(p.prog, e)
    print(f"{len(rows)} medians; FMA peak {ctx.get('fma_peak_gflops', '?')} GFLOP/s")
    for (kind, n_tok, second), r in sorted(rows.items()):
        print(f"{kind:45s} N={n_tok:<6d} {second:<4d} {r['seconds']:.3e} s  {100 * r['peak']:.0f} % of peak")


if __name__ == "__main__":
    main()
