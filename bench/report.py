#!/usr/bin/python3
"""abc bench: turn a Google Benchmark JSON run of bench_attention into the Markdown tables of
bench/README.md (medians only), with each kernel's fraction of the measured FMA peak and its
speed-up over exact softmax attention of the same form and N from the same run.

    bench/report.py bench/results/run1.json > table.md
"""
import json
import sys


def main(path):
    with open(path) as f:
        run = json.load(f)
    ctx = run["context"]
    rows = {}
    for b in run["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        parts = b["run_name"].split("/")          # e.g. bounded/mlp/forward/4096/64
        nums = []
        while parts and parts[-1].isdigit():
            nums.insert(0, int(parts.pop()))
        n_tok, slots = nums[0], (nums[1] if len(nums) > 1 else 64)
        if slots != 64:                           # the README table is at n = 64; plots show the sweep
            continue
        kind = "/".join(parts)
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        rows[(kind, n_tok)] = {
            "seconds": b["cpu_time"] * unit,
            "tokens_per_s": b.get("tokens_per_s", 0.0),
            "gflops": b.get("FLOPS", 0.0) / 1e9,
            "peak": b.get("peak_frac", 0.0),
            "state": b.get("state_bytes", 0.0),
        }
    print(f"Machine: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs at "
          f"{ctx.get('mhz_per_cpu', '?')} MHz; measured FMA peak {float(ctx['fma_peak_gflops']):.1f} "
          f"GFLOP/s (one core, {ctx.get('simd', '?')}); date {ctx.get('date', '?')}.")
    print()
    print("| kernel | N | median | tokens/s | GFLOP/s | of peak | state bytes | vs softmax |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (kind, n_tok), r in sorted(rows.items(), key=lambda kv: (kv[0][0].startswith("softmax"), kv[0])):
        form = kind.split("/")[-1]
        base = rows.get((f"softmax/{form}", n_tok)) if form != "step" else None
        speed = f"{base['seconds'] / r['seconds']:.1f}×" if base and not kind.startswith("softmax") else ""
        t = r["seconds"]
        shown = f"{t * 1e9:.0f} ns" if t < 1e-5 else (f"{t * 1e6:.0f} µs" if t < 1e-2 else f"{t * 1e3:.1f} ms")
        print(f"| {kind} | {n_tok} | {shown} | {r['tokens_per_s']:.3g} | {r['gflops']:.1f} | "
              f"{100 * r['peak']:.0f} % | {r['state']:.0f} | {speed} |")


if __name__ == "__main__":
    main(sys.argv[1])
