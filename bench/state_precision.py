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
"""
import numpy as np


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


def main():
    rows = run()
    print("| tokens | state format | rel. error of K̃ | rel. error of one read |")
    print("|---:|---|---:|---:|")
    for t, f, ek, eo in rows:
        print(f"| {t} | {f} | {ek:.1e} | {eo:.1e} |")


if __name__ == "__main__":
    main()
