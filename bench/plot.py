#!/usr/bin/python3
"""abc bench: PNG plots from a bench_attention JSON run (Debian's python3-matplotlib).

    bench/plot.py bench/results/run2.json bench/plots      (Debian's /usr/bin/python3)

Writes, all medians from the one run:
  time_vs_n.png     time against N per control at n = 64: forward, forward_causal and step panels,
                    with softmax attention in the first two;
  peak.png          fraction of the measured FMA peak per kernel at N = 4096, n = 64;
  slots.png         time against the slot count n ∈ {16, 64, 256} at N = 4096, per control and form;
  state_bytes.png   decode state against N: flat for bounded controls, the KV cache for softmax;
  chunk.png         chunked causal time against the chunk size C (when the run has the sweep).
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchjson import load  # noqa: E402

# Up to 20 controls on one axis: 20 distinct colours, not the default cycle of 10.
plt.rcParams["axes.prop_cycle"] = plt.cycler(color=plt.get_cmap("tab20").colors)

FORMS = ("forward", "forward_causal", "step")


def family(kind):
    """bounded/mlp/step -> mlp; softmax/forward -> softmax; eigen_mlp/step -> eigen_mlp."""
    parts = kind.split("/")
    return parts[1] if parts[0] == "bounded" else parts[0]


def style(kind):
    if kind.startswith("softmax"):
        return dict(lw=2.8, color="black")
    if kind.startswith("eigen_mlp"):
        return dict(lw=1.5, ls="--", color="gray")
    return dict(lw=1.2)


def main(path, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    ctx, rows = load(path)
    kinds = sorted({k for (k, _, _) in rows if not k.startswith("chunk/")})
    units = {"forward": (1e3, "ms"), "forward_causal": (1e3, "ms"), "step": (1e6, "µs")}

    fig, axes = plt.subplots(1, 3, figsize=(17, 6))
    for ax, form in zip(axes, FORMS):
        scale, unit = units[form]
        for kind in kinds:
            if kind.split("/")[-1] != form:
                continue
            pts = sorted((n, r["seconds"]) for (k, n, s), r in rows.items() if k == kind and s == 64)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] * scale for p in pts], marker="o", label=family(kind),
                        **style(kind))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length N" + (" (position of the token)" if form == "step" else ""))
        ax.set_ylabel(f"{form} time, {unit} (median)")
        ax.set_title(form)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle("Time vs N (d = dv = 64, n = 64, float, one core)")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "time_vs_n.png"), dpi=100)

    fig, ax = plt.subplots(figsize=(9, 10))
    sel = sorted(((k, r["peak"]) for (k, n, s), r in rows.items()
                  if n == 4096 and s == 64 and not k.startswith("chunk/")), key=lambda x: x[1])
    ax.barh([k for k, _ in sel], [100 * v for _, v in sel])
    ax.axvline(45, color="red", lw=0.8, ls=":")
    ax.axvline(35, color="orange", lw=0.8, ls=":")
    ax.set_xlabel(f"% of the measured FMA peak ({float(ctx['fma_peak_gflops']):.0f} GFLOP/s, one core)")
    ax.set_title("Fraction of peak, N = 4096, n = 64\n(dotted: the 35 % step and 45 % forward targets)")
    ax.tick_params(axis="y", labelsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "peak.png"), dpi=100)

    fig, axes = plt.subplots(1, 3, figsize=(17, 6))
    for ax, form in zip(axes, FORMS):
        scale, unit = units[form]
        for kind in kinds:
            if kind.split("/")[-1] != form or not kind.startswith("bounded/"):
                continue
            pts = sorted((s, r["seconds"]) for (k, n, s), r in rows.items() if k == kind and n == 4096)
            if len(pts) > 1:
                ax.plot([p[0] for p in pts], [p[1] * scale for p in pts], marker="o", label=family(kind))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("memory slots n")
        ax.set_ylabel(f"{form} time, {unit} (median)")
        ax.set_title(f"{form}, N = 4096")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle("Time vs memory size n (d = dv = 64, float, one core)")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "slots.png"), dpi=100)

    fig, ax = plt.subplots(figsize=(8, 5))
    for kind in kinds:
        if not kind.endswith("forward_causal") or kind.startswith("eigen_mlp"):
            continue
        pts = sorted((n, r["state"]) for (k, n, s), r in rows.items() if k == kind and s == 64 and r["state"] > 0)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=family(kind), **style(kind))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("decode state, bytes")
    ax.set_title("State bytes vs N (n = 64): bounded controls stay flat, a KV cache grows")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "state_bytes.png"), dpi=100)

    chunk_kinds = sorted({k for (k, _, _) in rows if k.startswith("chunk/")})
    if chunk_kinds:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for kind in chunk_kinds:
            pts = sorted((s, r["seconds"]) for (k, n, s), r in rows.items() if k == kind)
            _, control, _, n = kind.split("/")
            ax.plot([p[0] for p in pts], [p[1] * 1e3 for p in pts], marker="o", label=f"{control}, n = {n}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("chunk size C (abc::Options::chunk)")
        ax.set_ylabel("forward_causal time, ms (median)")
        ax.set_yscale("log")
        ax.set_title("Chunked causal kernel vs chunk size (N = 4096)")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "chunk.png"), dpi=100)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
