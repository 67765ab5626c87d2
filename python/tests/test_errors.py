#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python.errors: abc's shape_error and config_error arrive as ValueError with abc's message."""
import sys

import numpy as np

import abc_attention as abc


def raises(fn, *fragments):
    try:
        fn()
    except ValueError as e:
        msg = str(e)
        missing = [f for f in fragments if f not in msg]
        assert not missing, f"message {msg!r} lacks {missing}"
        return msg
    raise AssertionError(f"no ValueError; expected one saying {fragments}")


def main():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((7, 4)) for _ in range(3))
    mlp = abc.Mlp(rng.standard_normal((3, 4)))
    # Messages as abc writes them (tests/ checks the same texts on the C++ side).
    raises(lambda: mlp.forward(q, k[:3], v), "abc::BoundedAttention::forward: v is [7 x 4], expected [3 x 4]")
    raises(lambda: mlp.forward_causal(q, k, v, rng.standard_normal((7, 5))), "abc::BoundedAttention::forward_causal", "x")
    bad = q.copy()
    bad[2, 1] = np.nan
    raises(lambda: mlp.forward_causal(bad, k, v), "abc::BoundedAttention::forward_causal", "q")
    raises(lambda: mlp.backward_causal(q, k, v, np.ones((6, 4))), "abc::BoundedAttention::backward_causal", "d_out")
    raises(lambda: abc.Mlp(np.zeros((0, 4))), "abc::control::Mlp", "W_phi.rows() (slots)")
    raises(lambda: abc.SlidingWindow(0), "abc::control::SlidingWindow", "n")
    raises(lambda: abc.SlidingWindow(4, chunk=0), "abc::BoundedAttention", "chunk")
    raises(lambda: mlp.make_state(0, 4), "abc::BoundedAttention::make_state")
    # A state of another control type is refused by abc, whatever the shapes.
    window = abc.SlidingWindow(3)
    raises(lambda: mlp.step(window.make_state(4, 4), q[0], k[0], v[0]), "abc::BoundedAttention::step")
    raises(lambda: mlp.load_state(b"not a state"), "abc::load_state")
    # The module's own checks: dimensions, dtype and option names.
    raises(lambda: mlp.forward(q[None], k, v), "abc_attention: q has 3 dimensions, expected 2")
    raises(lambda: mlp.step(mlp.make_state(4, 4), q, k[0], v[0]), "abc_attention: q has 2 dimensions, expected 1")
    raises(lambda: abc.Mlp(np.ones((3, 4)), activation="tanh"), "activation is 'tanh'")
    raises(lambda: abc.SlidingWindow(3, dtype=np.int32), "dtype is int32, expected float32 or float64")
    assert abc.ShapeError is ValueError and abc.ConfigError is ValueError

    # The controls added with TopKEviction, Cluster, GlobalTokens, LocalGlobal and RandomFeature.
    raises(lambda: abc.TopKEviction(5, 6), "abc::control::TopKEviction: recent is 6, expected at most 5")
    raises(lambda: abc.TopKEviction(5, 2, score="trams_code"), "abc_attention: score is 'trams_code', which needs w_q")
    raises(lambda: abc.TopKEviction(5, 2, np.ones((4, 3)), score="best"), "abc_attention: score is 'best', expected")
    raises(lambda: abc.TopKEviction(5, 2, np.ones((4, 3)), score="key_norm"), "abc::select::KeyScore: kind is key_norm")
    raises(lambda: abc.TopKEviction(5, 2, np.ones((3, 3))).forward(q, k, v),
           "abc::BoundedAttention::forward: k is [7 x 4], expected [7 x 3]")
    raises(lambda: abc.Cluster(np.zeros((0, 4))), "abc::control::Cluster", "centroids.rows() (slots)")
    kmeans = abc.Cluster(3, 4, 1)
    raises(lambda: kmeans.forward_causal(q, k, v),
           "abc::BoundedAttention::forward_causal: centroids.rows() is 0, expected at least 3")
    raises(lambda: abc.GlobalTokens([1, 4, 1]),
           "abc::control::GlobalTokens: positions[2] is 1, expected a position not listed before")
    raises(lambda: abc.GlobalTokens([]), "abc::control::GlobalTokens", "positions.size()")
    raises(lambda: abc.LocalGlobal([0, 1], 0), "abc::control::SlidingWindow", "n")
    raises(lambda: abc.RandomFeature(np.ones((3, 4)), floor=-1.0), "abc::control::RandomFeature", "floor")
    raises(lambda: abc.RandomFeature(np.ones((3, 4)), input_norm="l2"),
           "abc_attention: input_norm is 'l2', expected 'unit' or 'raw'")
    raises(lambda: abc.RandomFeature(np.ones((3, 5))).forward(q, k, v),
           "abc::BoundedAttention::forward: k is [7 x 4], expected [7 x 5]")
    # RFA has a backward (the linear readout's), checked like every other call; its gradients agree
    # with central differences of forward (the torch test's gradcheck covers every input).
    for rfa in (abc.RandomFeature(np.ones((3, 4))), abc.RandomFeature(np.ones((3, 4)), dtype=np.float32)):
        assert hasattr(rfa, "backward") and hasattr(rfa, "backward_causal"), type(rfa)
    assert hasattr(kmeans, "backward") and hasattr(abc.LocalGlobal([0], 2), "backward_causal")
    rfa = abc.RandomFeature(0.4 * rng.standard_normal((3, 4)), w_g=rng.standard_normal(4), b_g=0.1)
    raises(lambda: rfa.backward(q, k, v, v[:, :2]),
           "abc::BoundedAttention::backward: d_out is [7 x 2], expected [7 x 4] (the gradient of the output holds "
           "one row per query)")
    raises(lambda: rfa.backward_causal(q, k, v, v[:5]), "abc::BoundedAttention::backward_causal: d_out is [5 x 4]")
    d_out = rng.standard_normal(v.shape)
    g = rfa.backward_causal(q, k, v, d_out)
    assert set(g) == {"q", "k", "v", "w", "w_g", "b_g"}, sorted(g)
    h, i, j = 1e-6, 2, 1
    for name, arr in (("k", k), ("v", v)):
        up, down = arr.copy(), arr.copy()
        up[i, j] += h
        down[i, j] -= h
        args = lambda a: (q, a, v) if name == "k" else (q, k, a)
        fd = ((rfa.forward_causal(*args(up)) - rfa.forward_causal(*args(down))) * d_out).sum() / (2 * h)
        assert abs(fd - g[name][i, j]) <= 1e-6 * max(1.0, abs(fd)), (name, fd, g[name][i, j])

    # MultiHeadMlp: abc's messages for heads, ids and pools; the module's for array dimensions.
    heads, kv_heads = 4, 2
    mq = rng.standard_normal((2, 5, heads, 4))
    mk, mv = rng.standard_normal((2, 5, kv_heads, 4)), rng.standard_normal((2, 5, kv_heads, 3))
    mha = abc.MultiHeadMlp(rng.standard_normal((kv_heads, 3, 4)), heads, kv_heads)
    raises(lambda: mha.forward(mq[:, :, :3], mk, mv),
           "abc::MultiHeadAttention::forward: q.heads() is 3, expected 4 (one per query head)")
    raises(lambda: mha.forward_causal(mq, mq, mv),
           "abc::MultiHeadAttention::forward_causal: k.heads() is 4, expected 2")
    raises(lambda: mha.forward(mq, mk, mv[:1]), "abc::MultiHeadAttention::forward: v.batch() is 1, expected 2")
    raises(lambda: mha.forward(mq, mk, mv, rng.standard_normal((2, 5, 3, 4))), "x.heads() is 3, expected 1")
    raises(lambda: abc.MultiHeadMlp(np.ones((3, 3, 4)), heads, kv_heads),
           "abc::MultiHeadAttention: controls.size() is 3, expected 2 (one per key/value head) or 4",
           "(one per query head)")
    raises(lambda: abc.MultiHeadMlp(np.ones((3, 4)), 4, 3), "abc::MultiHeadAttention", "kv_heads must divide heads")
    raises(lambda: abc.MultiHeadMlp(np.ones((1, 1, 3, 4)), 4),
           "abc_attention: w_phi has 4 dimensions, expected 2 ([n, d_x]")
    raises(lambda: mha.forward(mq[0], mk, mv),
           "abc_attention: q has 3 dimensions, expected 4 ([batch, seq, heads, dim])")
    raises(lambda: mha.memory_of(4), "abc_attention: h is 4, expected 0 <= h < 4 (a query head)")
    raises(lambda: mha.memory(-1), "abc_attention: m is -1, expected 0 <= m < 2 (a memory)")
    pool = mha.make_pool()
    mha.add(pool, 7, 4, 3)
    raises(lambda: mha.add(pool, 7, 4, 3),
           "abc::MultiHeadAttention::add: sequence id 7 is already in the pool (drop it first)")
    raises(lambda: mha.step(pool, [7, 8], mq[:, 0], mk[:, 0], mv[:, 0]),
           "abc::MultiHeadAttention::forward_causal: sequence id 8 is not in the pool (add it first)")
    raises(lambda: mha.step(pool, [7, 7], mq[:, 0], mk[:, 0], mv[:, 0]),
           "ids holds sequence id 7 twice, expected distinct ids")
    raises(lambda: mha.step(pool, [7], mq[:, 0], mk[:, 0], mv[:, 0]),
           "ids.size() is 1, expected 2 (one id per sequence)")
    raises(lambda: mha.step(pool, [7], mq[:1], mk[:1, 0], mv[:1, 0]),
           "abc_attention: q has 4 dimensions, expected 3 ([batch, heads, dim]: one token per sequence)")
    raises(lambda: mha.forward_causal_pool(pool, [7], mq[:1], mk[:1, :, :, :3], mv[:1]),
           "abc::MultiHeadAttention::forward_causal: k is [5 x 3], expected [5 x 4]")
    raises(lambda: pool.states(8), "abc::MultiHeadAttention::Pool: sequence id 8 is not in the pool (add it first)")
    raises(lambda: mha.save_state(pool, 8), "sequence id 8 is not in the pool")
    raises(lambda: mha.read(pool, [8], mq[:1]), "abc::MultiHeadAttention::read: sequence id 8 is not in the pool")
    raises(lambda: mha.add_memory(pool, [7], mk[:1], mv[:1]),
           "abc::MultiHeadAttention::add_memory: sequence id 7 is already in the pool")
    # A pool of another layer (other memories) is refused, naming what it holds.
    other = abc.MultiHeadMlp(rng.standard_normal((heads, 3, 4)), heads, kv_heads)
    raises(lambda: other.step(pool, [7], mq[:1, 0], mk[:1, 0], mv[:1, 0]),
           "pool sequence 7 holds 2 states, expected 4 (the pool was filled by another MultiHeadAttention)")
    print("python.errors: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
