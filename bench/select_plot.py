#!/usr/bin/python3
"""abc bench: a PNG of `compare --select` tables (Debian's python3-matplotlib).

    bench/select_plot.py OUT.png TABLE.txt [TABLE.txt ...]      (Debian's /usr/bin/python3)

Each TABLE.txt is the output of `compare --select` (one workload, one N). The figure has two
panels per table: the relative error of the decoded tokens against exact attention, and the share
of exact attention's weight the decoded queries read ("kept mass"), both against the budget (log
scale), one line per policy. The panel title is the table's workload and N.

A missing or unreadable file, a file with no --select table, or an output that cannot be written
is one line on stderr and exit status 2.
"""
import argparse
import re
import sys

ROW = re.compile(r"^(\S+)\s+(\d+)\s+([\d.]+)%\s+([\d.eE+-]+)\s+([\d.eE+-]+)\s+(\d+)\s*$")


def fail(message):
    print(f"select_plot.py: {message}", file=sys.stderr)
    sys.exit(2)


def read_table(path):
    """{policy: [(budget, kept %, rel err)]} and a title, from one compare --select output."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    rows, title = {}, path
    for line in lines:
        if line.startswith("abc compare --select:"):
            n = re.search(r"N = (\d+)", line)
            title = f"N = {n.group(1)}" if n else title
        elif line.startswith("workload: "):
            title = line[len("workload: "):].split(":")[0] + ", " + title
        else:
            m = ROW.match(line)
            if m:
                rows.setdefault(m.group(1), []).append((int(m.group(2)), float(m.group(3)), float(m.group(4))))
    if not rows:
        fail(f"{path}: no compare --select table in it")
    return rows, title


def main():
    parser = argparse.ArgumentParser(prog="select_plot.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the PNG to write")
    parser.add_argument("tables", nargs="+", help="compare --select outputs")
    args = parser.parse_args()
    tables = [read_table(p) for p in args.tables]
    import matplotlib  # only now: --help and bad input need no matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(tables), 2, figsize=(10, 3.6 * len(tables)), squeeze=False)
    for (rows, title), (err_ax, kept_ax) in zip(tables, axes):
        for policy, points in rows.items():
            budgets = [p[0] for p in points]
            err_ax.plot(budgets, [p[2] for p in points], marker="o", label=policy)
            kept_ax.plot(budgets, [p[1] for p in points], marker="o", label=policy)
        for ax, what in ((err_ax, "rel err of decoded tokens"), (kept_ax, "kept mass (%)")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("budget (tokens kept)")
            ax.set_ylabel(what)
            ax.set_title(title, fontsize=9)
            ax.grid(True, alpha=0.3)
        err_ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(args.out, dpi=110)
    except OSError as e:
        fail(f"{args.out}: cannot write ({e.strerror})")


if __name__ == "__main__":
    main()
