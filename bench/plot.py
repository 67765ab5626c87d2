#!/usr/bin/python3
"""abc bench: PNG plots from a bench_attention JSON run (Debian's python3-matplotlib).

    bench/plot.py bench/results/run2.json bench/plots      (Debian's /usr/bin/python3)

Writes, all medians from the one run, d = dv = 64, float, one core:
  time_vs_n.png     time against N at n = 64: a column per form (forward, forward_causal, step),
                    a row per family of controls, at most five controls and softmax attention per
                    panel. On the step panels softmax is a KV-cache decoder at position N: measured
                    when the run has softmax/step, otherwise 2 × its forward_causal time / N (the
                    causal pass does the work of N steps at positions 1..N, which grows linearly).
  peak.png          fraction of the measured FMA peak at N = 4096, n = 64: a grid of control ×
                    form with the percentage in each cell, against the 60 % forward and 50 %
                    step targets.
  slots.png         time against the slot count n ∈ {16, 64, 256} at N = 4096, laid out as
                    time_vs_n.png.
  state_bytes.png   decode state against N: flat for bounded controls (controls with the same
                    state size share one line), growing for softmax's KV cache.
  chunk.png         chunked causal time against the chunk size C (when the run has the sweep).

A missing, unreadable or malformed file, or an output folder that cannot be written, is one line
on stderr and exit status 2.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchjson.py, from any directory
from benchjson import BadRun, Parser, fail, load  # noqa: E402

FORMS = ("forward", "forward_causal", "step")
UNITS = {"forward": (1e3, "ms"), "forward_causal": (1e3, "ms"), "step": (1e6, "µs")}

# Families of controls, one row of panels each: controls of a family behave alike, and five per
# panel keep every line readable. A control the list does not know goes to "other".
GROUPS = (
    ("ABC-MLP, learned and gated", ("mlp", "eigen_mlp", "linformer", "gated_window", "slot_gates", "gsa")),
    ("token stores (one slot per kept token)", ("window", "dilated", "global_tokens", "concat_global_window",
                                                "topk_eviction")),
    ("pooled, clustered and hashed", ("compressive", "cluster", "random_slot")),
    ("random feature attention (2D slots)", ("rfa_D32", "rfa_D64", "rfa_D256")),
)
PER_PANEL = 5
CHUNK_LABELS = {"softmax": "softmax (exact)", "mlp": "ABC-MLP", "rfa": "RFA, D = n/2"}

# Okabe–Ito colours (distinguishable with colour-blindness and in greyscale by their markers).
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9")
MARKERS = ("o", "s", "^", "D", "v", "P")
SOFTMAX = dict(color="black", lw=2.4, marker="x", ms=7)
LABELS = {"softmax": "softmax (exact)", "mlp": "ABC-MLP", "eigen_mlp": "ABC-MLP in plain Eigen",
          "gated_window": "gated window", "global_tokens": "global tokens", "concat_global_window": "global + window",
          "topk_eviction": "top-k eviction", "random_slot": "random slot", "dilated": "dilated r = 2",
          "rfa_D32": "RFA D = 32", "rfa_D64": "RFA D = 64", "rfa_D256": "RFA D = 256",
          "slot_gates": "GSA (slot gates)", "gsa": "GSA (slot gates)"}


def family(kind):
    """bounded/mlp/step -> mlp; softmax/forward -> softmax; eigen_mlp/step -> eigen_mlp."""
    parts = kind.split("/")
    return parts[1] if parts[0] == "bounded" else parts[0]


def panels(controls):
    """[(title, [control, ...]), ...]: the groups that have controls in the run, at most
    PER_PANEL controls each (a larger group is split)."""
    known = {c for _, members in GROUPS for c in members}
    groups = [(title, [c for c in members if c in controls]) for title, members in GROUPS]
    groups.append(("other", sorted(c for c in controls if c not in known)))
    out = []
    for title, members in groups:
        for i in range(0, len(members), PER_PANEL):
            out.append((title, members[i:i + PER_PANEL]))
    return out


def readable_axes(ax, xs, short_y):
    """x ticks at the measured values, in plain numbers; on a y axis of two decades or less, labels
    at 1, 2 and 5 of each decade too (a log axis otherwise labels only powers of ten)."""
    from matplotlib import ticker

    ax.set_xticks(xs, [str(x) for x in xs])
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    if short_y:
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())


def style(i):
    return dict(color=COLOURS[i % len(COLOURS)], marker=MARKERS[i % len(MARKERS)], lw=1.6, ms=5)


def series(rows, kind, x_of, select):
    pts = sorted((x_of(n, s), r["seconds"]) for (k, n, s), r in rows.items() if k == kind and select(n, s))
    return [p[0] for p in pts], [p[1] for p in pts]


def softmax_step(rows):
    """Softmax's decode step at position N: measured if the run has it, else derived from the
    causal pass (label says which)."""
    xs, ys = series(rows, "softmax/step", lambda n, s: n, lambda n, s: s == 64)
    if xs:
        return xs, ys, "softmax, KV cache"
    xs, ys = series(rows, "softmax/forward_causal", lambda n, s: n, lambda n, s: s == 64)
    return xs, [2 * t / n for n, t in zip(xs, ys)], "softmax, KV cache (2 × causal / N)"


def grid(plt, rows, controls, x_label, x_of, select, with_softmax, title, path):
    groups = panels(controls)
    if not groups:
        return False
    x_values = sorted({x_of(n, s) for (k, n, s) in rows if k.startswith(("bounded/", "eigen_mlp/")) and select(n, s)})
    fig, axes = plt.subplots(len(groups), 3, figsize=(15, 3.6 * len(groups)), sharex=True,
                             sharey="col", squeeze=False)
    for g, (group, members) in enumerate(groups):
        for c, form in enumerate(FORMS):
            ax = axes[g][c]
            scale, unit = UNITS[form]
            for i, control in enumerate(members):
                kind = f"{control}/{form}" if control == "eigen_mlp" else f"bounded/{control}/{form}"
                xs, ys = series(rows, kind, x_of, select)
                if len(xs) > 1:
                    ax.plot(xs, [y * scale for y in ys], label=LABELS.get(control, control), **style(i))
            if with_softmax:
                if form == "step":
                    xs, ys, label = softmax_step(rows)
                else:
                    xs, ys = series(rows, f"softmax/{form}", x_of, select)
                    label = "softmax (exact)"
                if xs:
                    ax.plot(xs, [y * scale for y in ys], label=label, **SOFTMAX)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            readable_axes(ax, x_values, short_y=not with_softmax)
            ax.grid(True, which="both", alpha=0.3)
            ax.set_ylabel(f"{form} time, {unit}")
            ax.set_title(f"{form}: {group}", fontsize=10)
            if g == len(groups) - 1:
                ax.set_xlabel(x_label)
            ax.legend(fontsize=7.5, loc="best")
    fig.suptitle(title, fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def peak_chart(plt, rows, ctx, path):
    """Fraction of peak at N = 4096, n = 64: a table of control × form, coloured by the value."""
    import numpy as np

    at = {(family(k), k.split("/")[-1]): r["peak"] for (k, n, s), r in rows.items()
          if n == 4096 and s == 64 and k.split("/")[-1] in FORMS and k.split("/")[0] in ("bounded", "softmax",
                                                                                        "eigen_mlp")}
    order = [c for _, members in GROUPS for c in members]
    controls = sorted({c for c, _ in at}, key=lambda c: (c == "softmax", order.index(c) if c in order else 99, c))
    if not controls:
        return False
    values = np.full((len(controls), len(FORMS)), np.nan)
    for i, c in enumerate(controls):
        for j, f in enumerate(FORMS):
            if (c, f) in at:
                values[i, j] = 100 * at[(c, f)]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(controls) + 2.2))
    im = ax.imshow(values, cmap="viridis", vmin=0, vmax=80, aspect="auto")
    targets = {"forward": 60, "step": 50}
    for i in range(len(controls)):
        for j, f in enumerate(FORMS):
            v = values[i, j]
            if np.isnan(v):
                ax.text(j, i, "–", ha="center", va="center", color="gray")
                continue
            met = f in targets and v >= targets[f]
            # one decimal where rounding would show the target without meeting it (34.9 %, not 35 %)
            shown = f"{v:.1f}" if f in targets and not met and round(v) >= targets[f] else f"{v:.0f}"
            ax.text(j, i, f"{shown} %" + (" ✓" if met else ""), ha="center", va="center",
                    color="black" if v > 45 else "white", fontsize=9, fontweight="bold" if met else "normal")
    ax.set_xticks(range(len(FORMS)), [f"{f}\n(target {targets[f]} %)" if f in targets else f for f in FORMS])
    ax.set_yticks(range(len(controls)), [LABELS.get(c, c) for c in controls])
    ax.tick_params(top=True, bottom=False, labeltop=True, labelbottom=False)
    fig.colorbar(im, ax=ax, label="% of peak", shrink=0.8)
    ax.set_title(f"Fraction of the measured FMA peak ({float(ctx.get('fma_peak_gflops', 0)):.0f} GFLOP/s, "
                 "one core)\nN = 4096, n = 64; ✓ meets the target; softmax has no step (KV cache)",
                 fontsize=10, pad=34)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def state_chart(plt, rows, path):
    """State bytes against N; controls with identical states share a line."""
    by_values = {}
    for kind in sorted({k for (k, _, _) in rows if k.endswith("/forward_causal")}):
        if kind.startswith(("eigen_mlp", "chunk/")):
            continue
        pts = tuple(sorted((n, r["state"]) for (k, n, s), r in rows.items()
                           if k == kind and s == 64 and r["state"] > 0))
        if pts:
            by_values.setdefault(pts, []).append(family(kind))
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (pts, members) in enumerate(sorted(by_values.items(), key=lambda kv: -kv[0][-1][1])):
        if members == ["softmax"]:
            label, st = "softmax: its KV cache", SOFTMAX
        else:
            names = ", ".join(LABELS.get(m, m) for m in members)
            label = (f"{len(members)} bounded controls at n = 64 ({pts[0][1]:,.0f} B)" if len(members) > 3
                     else f"{names} ({pts[0][1]:,.0f} B)")
            st = style(i)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **st)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("decode state, bytes")
    ax.set_title("Decode state vs N: bounded controls stay flat, a KV cache grows")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def chunk_chart(plt, rows, path):
    # chunk/<control>/<form>/<n>, by control and then n as a number
    chunk_kinds = sorted({k for (k, _, _) in rows if k.startswith("chunk/")},
                         key=lambda k: (k.split("/")[1], int(k.split("/")[3])))
    if not chunk_kinds:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    controls = sorted({k.split("/")[1] for k in chunk_kinds})
    slot_counts = sorted({int(k.split("/")[3]) for k in chunk_kinds})
    for kind in chunk_kinds:
        _, control, _, n = kind.split("/")
        xs, ys = series(rows, kind, lambda n_tok, s: s, lambda n_tok, s: True)
        ax.plot(xs, [y * 1e3 for y in ys], color=COLOURS[controls.index(control) % len(COLOURS)],
                marker=MARKERS[slot_counts.index(int(n)) % len(MARKERS)],
                ls=("-", "--", ":", "-.")[slot_counts.index(int(n)) % 4], lw=1.6,
                label=f"{CHUNK_LABELS.get(control, control)}, n = {n}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    readable_axes(ax, sorted({s for (k, _, s) in rows if k.startswith("chunk/")}), short_y=True)
    ax.set_xlabel("chunk size C (abc::Options::chunk)")
    ax.set_ylabel("forward_causal time, ms")
    ax.set_title("Chunked causal kernel vs chunk size (N = 4096)")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def plots(run, out_dir):
    ctx, rows = load(run)  # before matplotlib: a bad file is reported wherever matplotlib is missing
    if not rows:
        raise BadRun(f"{run}: no benchmark with sizes in its name (is it a bench_attention run?)")
    try:
        import matplotlib
    except ImportError:
        raise BadRun("needs matplotlib: apt-get install python3-matplotlib (scripts/setup.sh does) and run "
                     "it with /usr/bin/python3; a pyenv or venv python does not see Debian's packages") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise BadRun(f"{out_dir}: cannot create the output folder: {e.strerror or e}") from None
    if not os.access(out_dir, os.W_OK):
        raise BadRun(f"{out_dir}: the output folder is not writable")

    controls = {family(k) for (k, _, _) in rows if k.startswith(("bounded/", "eigen_mlp/"))}
    if not controls:
        raise BadRun(f"{run}: no bounded/ or eigen_mlp/ benchmarks (is it a bench_attention run?)")
    written = []
    if grid(plt, rows, controls, "sequence length N (for step: the position of the token)",
            lambda n, s: n, lambda n, s: s == 64, True,
            "Time vs N (d = dv = 64, n = 64, float, one core; medians)", os.path.join(out_dir, "time_vs_n.png")):
        written.append("time_vs_n.png")
    swept = {family(k) for (k, n, s) in rows if k.startswith("bounded/") and n == 4096 and s != 64}
    if grid(plt, rows, swept, "memory slots n", lambda n, s: s, lambda n, s: n == 4096, False,
            "Time vs memory slots n (N = 4096, d = dv = 64, float, one core; medians)",
            os.path.join(out_dir, "slots.png")):
        written.append("slots.png")
    if peak_chart(plt, rows, ctx, os.path.join(out_dir, "peak.png")):
        written.append("peak.png")
    state_chart(plt, rows, os.path.join(out_dir, "state_bytes.png"))
    written.append("state_bytes.png")
    if chunk_chart(plt, rows, os.path.join(out_dir, "chunk.png")):
        written.append("chunk.png")
    print(f"wrote {', '.join(written)} in {out_dir}")


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    p = Parser(prog="plot.py",
               description="Draw the PNG plots of bench/README.md from a bench_attention JSON run: "
                           "time_vs_n.png (time against N per form, softmax attention as the baseline), "
                           "slots.png (time against the slot count), peak.png (fraction of the measured "
                           "FMA peak, control × form), state_bytes.png (decode state against N) and "
                           "chunk.png (causal time against the chunk size). Medians only. Needs "
                           "matplotlib (Debian: python3-matplotlib, with /usr/bin/python3).",
               epilog="example: bench/plot.py bench/results/run2.json bench/plots")
    p.add_argument("run", help="JSON written by bench_attention with --benchmark_out=FILE "
                               "--benchmark_out_format=json")
    p.add_argument("out_dir", nargs="?", default=os.path.join(here, "plots"),
                   help="folder for the PNG files, created if missing (default: bench/plots)")
    args = p.parse_args(argv)
    try:
        plots(args.run, args.out_dir)
    except BadRun as e:
        fail(p.prog, e)
    except OSError as e:  # a PNG that cannot be written
        fail(p.prog, f"cannot write a plot: {e.strerror or e} ({e.filename or args.out_dir})")
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as e:
        fail(p.prog, f"{args.run}: unexpected contents ({type(e).__name__}: {e}); is it a bench_attention run?")


if __name__ == "__main__":
    main()
