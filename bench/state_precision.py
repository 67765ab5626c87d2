#!/usr/bin/python3
"""abc bench: what storing the decode state in bf16 or fp16 would cost in accuracy.

The state is an accumulator: every token rewrites every row of K̃ and Ṽ under a dense control
(ABC-MLP: K̃_ℓ ← a_ℓ K̃_ℓ + w_ℓ k with a_ℓ + w_ℓ = 1, the running softmax-weighted mean of the
keys). Stored in a 16-bit format, each of those updates is rounded. This script runs the same
ABC-MLP write (random logits λ = W_φ k, as an untrained MLP control gives) over N tokens with the
state kept in float64 (the reference), float32, fp16 and bf16 (each update computed in float32,
then rounded to the storage format, as a kernel with 16-bit storage would do), and prints the
relative error of K̃ and of one read o = softmax(q K̃ᵀ/√d) Ṽ against float64.

    bench/state_precision.py            (Debian's /usr/bin/python3 with python3-numpy)

The defaults (n = d = 64, 16384 tokens, seed 0) give the table in bench/README.md.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchjson.py, from any directory
from benchjson import Parser, fail  # noqa: E402

np = None  # numpy, imported in main() so that --help and bad options work without it


def to_bf16(x):
    """Round float32 to the nearest bf16 (ties to even), returned as float32."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


FORMATS = {
    "float32": lambda x: x.astype(np.float32),
    "fp16": lambda x: x.astype(np.float16).astype(np.float32),
    "bf16": to_bf16,
}


def run(n=64, d=64, tokens=16384, checkpoints=(64, 256, 1024, 4096, 16384), seed=0):
    """Rows (tokens, format, relative error of K̃, relative error of one read) at each checkpoint."""
    rng = np.random.default_rng(seed)
    w_phi = rng.standard_normal((n, d)) / np.sqrt(d)
    q = rng.standard_normal(d)
    ref_k = np.zeros((n, d))
    ref_v = np.zeros((n, d))
    m = np.full(n, -np.inf)
    z = np.zeros(n)
    low = {f: (np.zeros((n, d), np.float32), np.zeros((n, d), np.float32)) for f in FORMATS}
    rows = []

    def read(km, vm):
        s = km.astype(np.float64) @ q / np.sqrt(d)
        p = np.exp(s - s.max())
        return (p / p.sum()) @ vm.astype(np.float64)

    for t in range(1, tokens + 1):
        k = rng.standard_normal(d)
        v = rng.standard_normal(d)
        lam = w_phi @ k
        m_new = np.maximum(m, lam)
        keep = np.where(np.isinf(m), 0.0, np.exp(m - m_new))
        add = np.exp(lam - m_new)
        z_new = keep * z + add
        a, w = keep * z / z_new, add / z_new
        m, z = m_new, z_new
        ref_k = a[:, None] * ref_k + w[:, None] * k
        ref_v = a[:, None] * ref_v + w[:, None] * v
        a32, w32 = a.astype(np.float32)[:, None], w.astype(np.float32)[:, None]
        k32, v32 = k.astype(np.float32), v.astype(np.float32)
        for f, rnd in FORMATS.items():
            km, vm = low[f]
            low[f] = (rnd(a32 * km + w32 * k32), rnd(a32 * vm + w32 * v32))
        if t in checkpoints:
            o_ref = read(ref_k, ref_v)
            for f in FORMATS:
                km, vm = low[f]
                ek = np.linalg.norm(km - ref_k) / np.linalg.norm(ref_k)
                eo = np.linalg.norm(read(km, vm) - o_ref) / np.linalg.norm(o_ref)
                rows.append((t, f, ek, eo))
    return rows


def positive(text):
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise ValueError(text)
    return v


positive.__name__ = "positive integer"  # argparse names the type in its message


def main(argv=None):
    global np
    p = Parser(prog="state_precision.py",
               description="Run the ABC-MLP state update over N tokens with the state kept in float64 "
                           "(the reference), float32, fp16 and bf16, and print as a Markdown table the "
                           "relative error of K̃ and of one read against float64 at 64, 256, 1024, ... "
                           "tokens. Needs numpy (Debian: python3-numpy, with /usr/bin/python3).")
    p.add_argument("--tokens", type=positive, default=16384, help="tokens written (default 16384)")
    p.add_argument("--slots", type=positive, default=64, help="memory slots n (default 64)")
    p.add_argument("--dim", type=positive, default=64, help="key and value dimension d (default 64)")
    p.add_argument("--seed", type=int, default=0, help="seed of the keys, values and W_phi (default 0)")
    args = p.parse_args(argv)
    if args.seed < 0:
        p.error(f"argument --seed: a seed is >= 0, got {args.seed}")
    try:
        import numpy
    except ImportError:
        fail(p.prog, "needs numpy: apt-get install python3-numpy (scripts/setup.sh does) and run it with "
                     "/usr/bin/python3; a pyenv or venv python does not see Debian's packages")
    np = numpy
    checkpoints = tuple(t for t in (64, 256, 1024, 4096, 16384) if t < args.tokens) + (args.tokens,)
    rows = run(n=args.slots, d=args.dim, tokens=args.tokens, checkpoints=checkpoints, seed=args.seed)
    print("| tokens | state format | rel. error of K̃ | rel. error of one read |")
    print("|---:|---|---:|---:|")
    for t, f, ek, eo in rows:
        print(f"| {t} | {f} | {ek:.1e} | {eo:.1e} |")


if __name__ == "__main__":
    main()
