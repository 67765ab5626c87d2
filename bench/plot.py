#!/usr/bin/python3
"""abc bench: PNG plots from a bench_attention JSON run (Debian's python3-matplotlib).

    bench/plot.py bench/results/run2.json bench/plots      (Debian's /usr/bin/python3)

Writes time_vs_n.png (causal time against N per control at n = 64, and softmax), peak.png
(fraction of the measured FMA peak per kernel at N = 4096, n = 64) and state_bytes.png (decode
state against N: flat for bounded controls, the KV cache for softmax).
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path) as f:
        run = json.load(f)
    rows = {}
    for b in run["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        parts = b["run_name"].split("/")
        nums = []
        while parts and parts[-1].isdigit():
            nums.insert(0, int(parts.pop()))
        n_tok, slots = nums[0], (nums[1] if len(nums) > 1 else 64)
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        rows[("/".join(parts), n_tok, slots)] = dict(seconds=b["cpu_time"] * unit, peak=b.get("peak_frac", 0.0),
                                                     state=b.get("state_bytes", 0.0))
    return run["context"], rows


def main(path, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    ctx, rows = load(path)
    kinds = sorted({k for (k, _, _) in rows})

    fig, ax = plt.subplots(figsize=(8, 5.5))
    for kind in kinds:
        if not kind.endswith("forward_causal"):
            continue
        pts = sorted((n, r["seconds"]) for (k, n, s), r in rows.items() if k == kind and s == 64)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] * 1e3 for p in pts], marker="o",
                    label=kind.replace("/forward_causal", ""), lw=2.5 if kind.startswith("softmax") else 1.2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("causal forward time, ms (median)")
    ax.set_title("Causal attention time vs N (d = 64, n = 64, float, one core)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "time_vs_n.png"), dpi=110)

    fig, ax = plt.subplots(figsize=(9, 6))
    sel = sorted(((k, r["peak"]) for (k, n, s), r in rows.items() if n == 4096 and s == 64), key=lambda x: x[1])
    ax.barh([k for k, _ in sel], [100 * v for _, v in sel])
    ax.set_xlabel(f"% of the measured FMA peak ({float(ctx['fma_peak_gflops']):.0f} GFLOP/s, one core)")
    ax.set_title("Fraction of peak at N = 4096, n = 64")
    ax.tick_params(axis="y", labelsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "peak.png"), dpi=110)

    fig, ax = plt.subplots(figsize=(8, 5))
    for kind in kinds:
        if not kind.endswith("forward_causal"):
            continue
        pts = sorted((n, r["state"]) for (k, n, s), r in rows.items() if k == kind and s == 64 and r["state"] > 0)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=kind.replace("/forward_causal", ""))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("decode state, bytes")
    ax.set_title("State bytes vs N: bounded controls stay flat, a KV cache grows")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "state_bytes.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
