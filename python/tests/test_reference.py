#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python.bit_for_bit: abc_attention gives the C++ results exactly.

    test_reference.py DIR     DIR written by abc_python_reference (python/tests/reference.cpp)

Each case directory holds the inputs and parameters the C++ program used and what its calls
returned; the same calls through the module must return the same bits (np.array_equal). Cases
named mha_* are MultiHeadAttention's: forward, forward_causal, and a pooled prefill followed by
batched decode steps, with every sequence's states at the end.
"""
import os
import sys

import numpy as np

import abc_attention as abc


# The forms beyond forward a case ran: "causal" (forward_causal, step, forward_causal_state) and
# "backward" (backward, backward_causal).
ALL_FORMS = {"causal", "backward"}


def attention(case, p):
    """The attention reference.cpp built for `case`, from its parameters p, and its forms."""
    dtype = case.rsplit("_", 1)[1]
    if case.startswith("mlp_keys_"):
        return abc.Mlp(p["w_phi"], activation="sigmoid", normalization="per_token"), ALL_FORMS
    if case.startswith("mlp_"):
        return abc.Mlp(p["w_phi"]), ALL_FORMS
    if case.startswith("sliding_window_"):
        return abc.SlidingWindow(5, dtype=dtype), ALL_FORMS
    if case.startswith("slot_gates_"):
        return abc.SlotGates(p["w_f"], p["b_f"], tau=4.0, scale=1.0), ALL_FORMS
    if case.startswith("linformer_"):
        return abc.Linformer(p["w_lf"]), ALL_FORMS
    if case.startswith("top_k_eviction_"):
        return abc.TopKEviction(5, 2, p["w_q"]), ALL_FORMS
    if case.startswith("cluster_kmeans_"):  # k-means fitted by forward: no causal form
        return abc.Cluster(5, 7, 3, dtype=dtype), set()
    if case.startswith("cluster_"):
        return abc.Cluster(p["centroids"]), ALL_FORMS
    if case.startswith("global_tokens_"):
        return abc.GlobalTokens([0, 3, 10, 20, 36], dtype=dtype), ALL_FORMS
    if case.startswith("local_global_"):
        return abc.LocalGlobal([0, 1, 17], 4, dtype=dtype), ALL_FORMS
    if case.startswith("random_feature_"):
        return abc.RandomFeature(p["w"], w_g=p["w_g"], b_g=0.25), ALL_FORMS
    raise KeyError(case)


def comparer(case, a, dtype, failures):
    """same(name, got): got has the case's dtype and equals the C++ result `name` bit for bit."""
    def same(name, got):
        want = a[name]
        if got.dtype != dtype or not np.array_equal(got, want):
            diff = np.abs(got.astype(np.float64) - want).max() if got.shape == want.shape else "shape"
            failures.append(f"{case}/{name}: differs from C++ ({got.dtype} {got.shape}, max |diff| {diff})")
    return same


def check_case(case, a, dtype):
    attn, forms = attention(case, a)
    assert attn.dtype == dtype, (case, attn.dtype)
    q, k, v, d_out, x = a["q"], a["k"], a["v"], a["d_out"], a.get("x")
    failures = []
    same = comparer(case, a, dtype, failures)
    # What C++ wrote is what the case's forms say: no form is skipped unnoticed.
    ran = {"causal": "forward_causal" in a, "backward": any(n.startswith("backward") for n in a)}
    for form, present in ran.items():
        if present != (form in forms):
            failures.append(f"{case}: C++ {'ran' if present else 'did not run'} the {form} forms, expected otherwise")

    same("forward", attn.forward(q, k, v, x))
    if "backward" in forms:
        for form, g in (("backward", attn.backward(q, k, v, d_out, x)),
                        ("backward_causal", attn.backward_causal(q, k, v, d_out, x))):
            expected = {n.split(".", 1)[1] for n in a if n.startswith(form + ".")}
            if set(g) != expected:
                failures.append(f"{case}/{form}: keys {sorted(g)}, expected {sorted(expected)}")
            for key in expected & set(g):
                got = g[key]
                if isinstance(got, float):  # a scalar gradient (RFA's b_g), exact in the case's dtype
                    got = np.array([[got]], dtype=dtype)
                same(f"{form}.{key}", got)
    if "causal" not in forms:
        return failures
    same("forward_causal", attn.forward_causal(q, k, v, x))
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


def check_multi_head_case(case, a, dtype):
    """MultiHeadMlp as reference.cpp's run_multi_head_case: 4 query heads over 2 key/value heads."""
    heads, kv_heads, prefill, ids, order = 4, 2, 20, [7, 3, 11], [2, 0, 1]
    if case.startswith("mha_x_"):  # one control per query head, x shared by all
        mha = abc.MultiHeadMlp(a["w_phi"], heads, kv_heads)
    elif case.startswith("mha_keys_"):  # one control per key/value head, reading its keys
        mha = abc.MultiHeadMlp(a["w_phi"], heads, kv_heads, activation="sigmoid", normalization="per_token", chunk=8)
    else:
        raise KeyError(case)
    assert mha.dtype == dtype and mha.memories == a["w_phi"].shape[0], (case, mha.dtype, mha.memories)
    q, k, v, x = a["q"], a["k"], a["v"], a.get("x")
    failures = []
    same = comparer(case, a, dtype, failures)
    same("forward", mha.forward(q, k, v, x))
    same("forward_causal", mha.forward_causal(q, k, v, x))
    pool = mha.make_pool()
    for i in ids:
        mha.add(pool, i, q.shape[3], v.shape[3])
    first = slice(0, prefill)
    same("prefill", mha.forward_causal_pool(pool, ids, q[:, first], k[:, first], v[:, first],
                                            None if x is None else x[:, first]))
    # Batch entry j of each step is sequence order[j]: q[order, t] is [batch, heads, d].
    step_ids = [ids[j] for j in order]
    rows = [mha.step(pool, step_ids, q[order, t], k[order, t], v[order, t], None if x is None else x[order, t])
            for t in range(prefill, q.shape[1])]
    same("decode", np.stack(rows))
    compared = set()
    for i in ids:
        for m, st in enumerate(pool.states(i)):
            for part in ("keys", "values"):
                name = f"pool.{i}.{m}.{part}"
                same(name, getattr(st, part))
                compared.add(name)
    written = {n for n in a if n.startswith("pool.")}
    if written != compared:
        failures.append(f"{case}: pool states written {sorted(written - compared)} not compared, "
                        f"compared {sorted(compared - written)} not written")
    return failures


def check(root, case):
    d = os.path.join(root, case)
    a = {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d)}
    dtype = np.dtype(case.rsplit("_", 1)[1])
    return (check_multi_head_case if case.startswith("mha_") else check_case)(case, a, dtype)


def main():
    root = sys.argv[1]
    cases = sorted(os.listdir(root))
    # 11 single-head cases and 2 multi-head ones, each in float64 and float32.
    assert len(cases) == 26, cases
    failures = [f for case in cases for f in check(root, case)]
    for f in failures:
        print(f)
    print(f"python.bit_for_bit: {len(cases)} cases, {len(failures)} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
