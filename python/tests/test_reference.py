#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python.bit_for_bit: abc_attention gives the C++ results exactly.

    test_reference.py DIR     DIR written by abc_python_reference (python/tests/reference.cpp)

Each case directory holds the inputs and parameters the C++ program used and what its calls
returned; the same calls through the module must return the same bits (np.array_equal).
"""
import os
import sys

import numpy as np

import abc_attention as abc


def attention(case, p):
    """The attention reference.cpp built for `case`, from its parameters p."""
    if case.startswith("mlp_keys_"):
        return abc.Mlp(p["w_phi"], activation="sigmoid", normalization="per_token")
    if case.startswith("mlp_"):
        return abc.Mlp(p["w_phi"])
    if case.startswith("sliding_window_"):
        return abc.SlidingWindow(5, dtype=case.rsplit("_", 1)[1])
    if case.startswith("slot_gates_"):
        return abc.SlotGates(p["w_f"], p["b_f"], tau=4.0, scale=1.0)
    if case.startswith("linformer_"):
        return abc.Linformer(p["w_lf"])
    raise KeyError(case)


def check_case(root, case):
    d = os.path.join(root, case)
    a = {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d)}
    attn = attention(case, a)
    dtype = np.dtype(case.rsplit("_", 1)[1])
    assert attn.dtype == dtype, (case, attn.dtype)
    q, k, v, d_out, x = a["q"], a["k"], a["v"], a["d_out"], a.get("x")
    failures = []

    def same(name, got):
        want = a[name]
        if got.dtype != dtype or not np.array_equal(got, want):
            diff = np.abs(got.astype(np.float64) - want).max() if got.shape == want.shape else "shape"
            failures.append(f"{case}/{name}: differs from C++ ({got.dtype} {got.shape}, max |diff| {diff})")

    same("forward", attn.forward(q, k, v, x))
    same("forward_causal", attn.forward_causal(q, k, v, x))
    for form, g in (("backward", attn.backward(q, k, v, d_out, x)),
                    ("backward_causal", attn.backward_causal(q, k, v, d_out, x))):
        expected = {n.split(".", 1)[1] for n in a if n.startswith(form + ".")}
        if set(g) != expected:
            failures.append(f"{case}/{form}: keys {sorted(g)}, expected {sorted(expected)}")
        for key in expected & set(g):
            same(f"{form}.{key}", g[key])
    state = attn.make_state(q.shape[1], v.shape[1])
    rows = [attn.step(state, q[t], k[t], v[t], None if x is None else x[t]) for t in range(len(q))]
    same("step", np.stack(rows))
    same("state.keys", state.keys)
    same("state.values", state.values)
    half = len(q) // 2
    split = attn.make_state(q.shape[1], v.shape[1])
    head = attn.forward_causal_state(split, q[:half], k[:half], v[:half], None if x is None else x[:half])
    tail = attn.forward_causal_state(split, q[half:], k[half:], v[half:], None if x is None else x[half:])
    same("forward_causal_state", np.concatenate([head, tail]))
    return failures


def main():
    root = sys.argv[1]
    cases = sorted(os.listdir(root))
    assert len(cases) == 10, cases
    failures = [f for case in cases for f in check_case(root, case)]
    for f in failures:
        print(f)
    print(f"python.bit_for_bit: {len(cases)} cases, {len(failures)} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
