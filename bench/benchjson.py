"""abc bench: the medians of a bench_attention JSON run, keyed for report.py and plot.py.

load(path) returns (context, rows): rows[(kind, N, second)] for every median, where kind is the
name without its numbers (bounded/mlp/forward), N the first number and second the slot count n
(64 when absent), or for the chunk sweep (chunk/<control>/<form>/<N>/<n>/<C>) the chunk size C
with n moved into the kind (chunk/mlp/forward_causal/64).
"""
import json


def load(path):
    with open(path) as f:
        run = json.load(f)
    rows = {}
    for b in run["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        parts = b["run_name"].split("/")          # e.g. bounded/mlp/forward/4096/64
        nums = []
        while parts and parts[-1].isdigit():
            nums.insert(0, int(parts.pop()))
        n_tok, second = nums[0], (nums[1] if len(nums) > 1 else 64)
        if len(nums) > 2:                         # chunk/<control>/<form>/<N>/<n>/<C>
            parts.append(str(second))             # kind chunk/mlp/forward_causal/64, keyed by C
            second = nums[2]
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        rows[("/".join(parts), n_tok, second)] = {
            "seconds": b["cpu_time"] * unit,
            "tokens_per_s": b.get("tokens_per_s", 0.0),
            "gflops": b.get("FLOPS", 0.0) / 1e9,
            "peak": b.get("peak_frac", 0.0),
            "state": b.get("state_bytes", 0.0),
        }
    return run["context"], rows
