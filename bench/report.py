#!/usr/bin/python3
"""abc bench: turn a Google Benchmark JSON run of bench_attention into the Markdown tables of
bench/README.md (medians only):

  1. every kernel at n = 64 and each N: time, tokens/s, GFLOP/s, fraction of the measured FMA
     peak, state bytes and the speed-up over exact softmax attention of the same form and N;
  2. the slot sweep at N = 4096: time and fraction of peak at n = 16, 64, 256;
  3. the chunk-size sweep of the chunked causal kernel;
  4. the library against the plain-Eigen ABC-MLP of the same run.

    bench/report.py bench/results/run2.json > tables.md

A bench_kernels run (bench/results/run2_kernels.json) gives the SIMD-against-scalar table instead.
A missing, unreadable or malformed file is one line on stderr and exit status 2.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchjson.py, from any directory
from benchjson import BadRun, Parser, fail, load, read_run, seconds  # noqa: E402


def shown(t):
    return f"{t * 1e9:.0f} ns" if t < 1e-5 else (f"{t * 1e6:.0f} µs" if t < 1e-2 else f"{t * 1e3:.1f} ms")


def kernels(run):
    """bench_kernels: the SIMD kernels against the scalar ones, median times and their ratio."""
    med = {}
    for b in run["benchmarks"]:
        if b.get("aggregate_name", "median") == "median":
            med[b["run_name"]] = (seconds(b), b.get("FLOPS", 0.0) / 1e9)
    print("| kernel | shape | SIMD | scalar | ratio | SIMD GFLOP/s |")
    print("|---|---|---:|---:|---:|---:|")
    for name, (t, gf) in sorted(med.items()):
        kind, path, *shape = name.split("/")
        if path != "simd":
            continue
        scalar = med.get("/".join([kind, "scalar", *shape]))
        if scalar:
            flops = f"{gf:.1f}" if gf else ""
            print(f"| {kind} | {' × '.join(shape)} | {shown(t)} | {shown(scalar[0])} | {scalar[0] / t:.2f}× | {flops} |")
    for name, (t, gf) in sorted(med.items()):
        kind, path, *shape = name.split("/")
        simd = med.get("/".join([kind, "simd", *shape]))
        if path == "eigen" and simd and kind == "product":
            print(f"\nproduct {' × '.join(shape)}: Eigen {shown(t)} ({gf:.1f} GFLOP/s), "
                  f"kernel::product {shown(simd[0])} ({simd[1]:.1f} GFLOP/s), {t / simd[0]:.2f}×")
    per_row = {n: v for n, v in med.items() if "/simd_per_row/" in n}
    for name, (t, _) in sorted(per_row.items()):
        simd = med.get(name.replace("simd_per_row", "simd"))
        if simd:
            print(f"\nstep_rows {name.split('/', 2)[2]}: one call per row {shown(t)}, whole blocks "
                  f"{shown(simd[0])} ({t / simd[0]:.2f}×)")


def tables(path):
    run = read_run(path)
    if "fma_peak_gflops" not in run["context"]:
        return kernels(run)
    ctx, rows = load(path)
    print(f"Machine: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs at "
          f"{ctx.get('mhz_per_cpu', '?')} MHz; measured FMA peak {float(ctx['fma_peak_gflops']):.1f} "
          f"GFLOP/s (one core, {ctx.get('simd', '?')}); memory bandwidth (STREAM triad, one core) "
          f"{float(ctx.get('memory_bandwidth_gbs', 0)):.1f} GB/s; date {ctx.get('date', '?')}.")
    print()
    print("### Every kernel at n = 64, d = dv = 64")
    print()
    print("| kernel | N | median | tokens/s | GFLOP/s | of peak | state bytes | vs softmax |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    main_rows = {(k, n): r for (k, n, s), r in rows.items() if s == 64 and not k.startswith("chunk/")}
    for (kind, n_tok), r in sorted(main_rows.items(), key=lambda kv: (kv[0][0].startswith("softmax"), kv[0])):
        form = kind.split("/")[-1]
        base = main_rows.get((f"softmax/{form}", n_tok)) if form != "step" else None
        speed = f"{base['seconds'] / r['seconds']:.1f}×" if base and not kind.startswith("softmax") else ""
        print(f"| {kind} | {n_tok} | {shown(r['seconds'])} | {r['tokens_per_s']:.3g} | {r['gflops']:.1f} | "
              f"{100 * r['peak']:.0f} % | {r['state']:.0f} | {speed} |")

    print()
    print("### Slot sweep at N = 4096 (median, and fraction of peak)")
    print()
    print("| kernel | n = 16 | n = 64 | n = 256 |")
    print("|---|---:|---:|---:|")
    for kind in sorted({k for (k, n, s) in rows if k.startswith("bounded/") and n == 4096 and s == 16}):
        cells = []
        for s in (16, 64, 256):
            r = rows.get((kind, 4096, s))
            cells.append(f"{shown(r['seconds'])} ({100 * r['peak']:.0f} %)" if r else "")
        print(f"| {kind} | " + " | ".join(cells) + " |")

    chunks = sorted((k, n, s) for (k, n, s) in rows if k.startswith("chunk/"))
    if chunks:
        print()
        print("### Chunk size of the chunked causal kernel (N = 4096; rows: control, form, n)")
        print()
        sizes = sorted({s for (_, _, s) in chunks})
        print("| kernel | " + " | ".join(f"C = {s}" for s in sizes) + " |")
        print("|---|" + "---:|" * len(sizes))
        for kind in sorted({k for (k, _, _) in chunks}):
            cells = [shown(rows[(kind, 4096, s)]["seconds"]) if (kind, 4096, s) in rows else "" for s in sizes]
            best = min(sizes, key=lambda s: rows[(kind, 4096, s)]["seconds"] if (kind, 4096, s) in rows else 1e9)
            cells = [f"**{c}**" if s == best else c for c, s in zip(cells, sizes)]
            print(f"| {kind.replace('chunk/', '')} | " + " | ".join(cells) + " |")

    print()
    print("### The library against plain Eigen (ABC-MLP, N = 4096, n = 64)")
    print()
    print("| form | library | plain Eigen | ratio |")
    print("|---|---:|---:|---:|")
    for form in ("forward", "forward_causal", "step"):
        lib, eig = rows.get((f"bounded/mlp/{form}", 4096, 64)), rows.get((f"eigen_mlp/{form}", 4096, 64))
        if lib and eig:
            print(f"| {form} | {shown(lib['seconds'])} | {shown(eig['seconds'])} | "
                  f"{eig['seconds'] / lib['seconds']:.2f}× |")


def main(argv=None):
    p = Parser(prog="report.py",
               description="Print the Markdown tables of bench/README.md from a Google Benchmark JSON run: "
                           "for a bench_attention run, every kernel at n = 64 and each N (time, tokens/s, "
                           "GFLOP/s, fraction of the measured FMA peak, state bytes, speed-up over softmax "
                           "attention of the same form and N), the slot sweep, the chunk-size sweep and the "
                           "library against plain Eigen; for a bench_kernels run, the SIMD kernels against "
                           "the scalar ones. Medians only.",
               epilog="example: bench/report.py bench/results/run2.json > tables.md")
    p.add_argument("run", help="JSON written by bench_attention or bench_kernels with "
                               "--benchmark_out=FILE --benchmark_out_format=json")
    args = p.parse_args(argv)
    try:
        tables(args.run)
    except BadRun as e:
        fail(p.prog, e)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as e:
        fail(p.prog, f"{args.run}: unexpected contents ({type(e).__name__}: {e}); "
                     "is it a bench_attention or bench_kernels run?")
    except BrokenPipeError:  # piped into head, which has what it wanted: no traceback at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


if __name__ == "__main__":
    main()
