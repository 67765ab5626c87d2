#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python.multi_head: MultiHeadMlp reads the [batch, seq, heads, dim] layout as abc documents it (each
query head's output equals the single-head call on its memory bit for bit), its Pool's decode steps
equal single-head steps, a failing pooled call changes nothing, and cross attention's read equals
forward."""
import sys

import numpy as np

import abc_attention as abc


def single_head_outputs(mha, w_phi, q, k, v, call):
    """out[b, :, h] from the single-head Mlp of query head h's memory, `call` naming the form."""
    batch, _, heads, _ = q.shape
    group = heads // mha.kv_heads
    weights = w_phi if w_phi.ndim == 3 else np.repeat(w_phi[None], mha.memories, axis=0)
    out = np.empty(q.shape[:3] + (v.shape[3],), dtype=q.dtype)
    for h in range(heads):
        attn = abc.Mlp(weights[mha.memory_of(h)])
        for b in range(batch):
            out[b, :, h] = getattr(attn, call)(q[b, :, h], k[b, :, h // group], v[b, :, h // group])
    return out


def main():
    rng = np.random.default_rng(5)
    batch, n_tok, heads, kv_heads, d, dv, n = 2, 13, 6, 2, 4, 3, 5
    for dtype in (np.float64, np.float32):
        q = rng.standard_normal((batch, n_tok, heads, d)).astype(dtype)
        k = rng.standard_normal((batch, n_tok, kv_heads, d)).astype(dtype)
        v = rng.standard_normal((batch, n_tok, kv_heads, dv)).astype(dtype)
        layers = {
            "shared": rng.standard_normal((n, d)).astype(dtype),                  # one control for all heads
            "per_kv_head": rng.standard_normal((kv_heads, n, d)).astype(dtype),   # GQA: a group shares a memory
            "per_query_head": rng.standard_normal((heads, n, d)).astype(dtype),   # a memory per query head
        }
        for name, w_phi in layers.items():
            mha = abc.MultiHeadMlp(w_phi, heads, kv_heads)
            assert type(mha).__name__ == f"MultiHeadMlp_{np.dtype(dtype).name}", type(mha)
            assert (mha.heads, mha.kv_heads, mha.num_slots) == (heads, kv_heads, n)
            assert mha.memories == (heads if name == "per_query_head" else kv_heads), (name, mha.memories)
            for call in ("forward", "forward_causal"):
                got = getattr(mha, call)(q, k, v)
                assert got.shape == (batch, n_tok, heads, dv) and got.dtype == dtype
                assert np.array_equal(got, single_head_outputs(mha, w_phi, q, k, v, call)), (name, call)

            # Decode: a prefill of 4 tokens, then batched steps with the batch in reverse order; every
            # head's output equals the single-head step on its memory's state.
            pool = mha.make_pool()
            ids = [40, 2]
            for i in ids:
                mha.add(pool, i, d, dv)
            assert len(pool) == 2 and 40 in pool and pool.contains(2) and 5 not in pool and pool.bytes() > 0
            mha.forward_causal_pool(pool, ids, q[:, :4], k[:, :4], v[:, :4])
            weights = w_phi if w_phi.ndim == 3 else np.repeat(w_phi[None], mha.memories, axis=0)
            single = [abc.Mlp(weights[m]) for m in range(mha.memories)]
            group = heads // kv_heads
            states = {(b, m): single[m].make_state(d, dv) for b in range(batch) for m in range(mha.memories)}
            kv_of = [m if mha.memories == kv_heads else m // group for m in range(mha.memories)]
            for (b, m), st in states.items():
                single[m].forward_causal_state(st, q[b, :4, 0], k[b, :4, kv_of[m]], v[b, :4, kv_of[m]])
            for t in range(4, n_tok):
                got = mha.step(pool, ids[::-1], q[::-1, t], k[::-1, t], v[::-1, t])
                assert got.shape == (batch, heads, dv)
                for j, b in enumerate(reversed(range(batch))):
                    for h in range(heads):
                        m = mha.memory_of(h)
                        kv = h // group
                        want = single[m].step(states[(b, m)].copy(), q[b, t, h], k[b, t, kv], v[b, t, kv])
                        assert np.array_equal(got[j, h], want), (name, t, b, h)
                    # The memory advances once per step, whichever of its heads read it.
                    for m in range(mha.memories):
                        single[m].step(states[(b, m)], q[b, t, 0], k[b, t, kv_of[m]], v[b, t, kv_of[m]])
            for b, i in enumerate(ids):
                got = pool.states(i)
                assert len(got) == mha.memories and all(s.position == n_tok for s in got)
                assert all(got[m] == states[(b, m)] for m in range(mha.memories)), (name, i)

            # A decode resumed from save_state's blobs in another pool continues bit for bit.
            resumed = mha.make_pool()
            mha.load_state(resumed, 7, mha.save_state(pool, 40))
            assert all(a == b for a, b in zip(resumed.states(7), pool.states(40)))
            for t in range(3):
                qt, kt, vt = q[:1, t] * (t + 2), k[:1, t], v[:1, t]
                assert np.array_equal(mha.step(resumed, [7], qt, kt, vt), mha.step(pool, [40], qt, kt, vt)), name
            # A bad blob or a wrong count is refused, naming it, and the pool is unchanged.
            blobs = mha.save_state(pool, 40)
            for bad, message in (
                (blobs[:-1], f"states.size() is {mha.memories - 1}, expected {mha.memories}"),
                ([b[:-1] for b in blobs], "abc::load_state"),
                (blobs, "sequence id 7 is already in the pool"),
            ):
                before = [s.copy() for s in resumed.states(7)]
                try:
                    mha.load_state(resumed, 7 if message.startswith("sequence") else 8, bad)
                    raise AssertionError("bad blobs accepted")
                except ValueError as e:
                    assert message in str(e), (message, str(e))
                assert len(resumed) == 1 and resumed.states(7) == before

            # A pooled call that fails (an unknown id) changes no sequence; reset and drop do.
            before = [s.copy() for s in pool.states(2)]
            try:
                mha.step(pool, [2, 99], q[:, 0], k[:, 0], v[:, 0])
                raise AssertionError("unknown id accepted")
            except ValueError as e:
                assert "sequence id 99 is not in the pool" in str(e), e
            assert pool.states(2) == before
            pool.reset(2)
            assert all(s.position == 0 for s in pool.states(2))
            pool.drop(40)
            pool.drop(40)  # an unknown id is ignored
            assert len(pool) == 1 and 40 not in pool

            # Cross attention: the memories of a source, built once, read by queries as forward reads.
            memories = mha.make_pool()
            mha.add_memory(memories, ids, k, v)
            assert np.array_equal(mha.read(memories, ids, q), mha.forward(q, k, v)), name

        # The control input x, shared ([batch, seq, 1, d_x]) or per memory, reaches every head.
        d_x = 7
        w_phi = rng.standard_normal((heads, n, d_x)).astype(dtype)
        mha = abc.MultiHeadMlp(w_phi, heads, kv_heads)
        x = rng.standard_normal((batch, n_tok, heads, d_x)).astype(dtype)
        got = mha.forward_causal(q, k, v, x)
        for h in range(heads):
            for b in range(batch):
                want = abc.Mlp(w_phi[h]).forward_causal(q[b, :, h], k[b, :, h // 3], v[b, :, h // 3], x[b, :, h])
                assert np.array_equal(got[b, :, h], want), (b, h)
        # A shared x is projected once for all memories (one wider product): the per-memory result to rounding.
        shared = mha.forward_causal(q, k, v, x[:, :, :1])
        repeated = mha.forward_causal(q, k, v, np.repeat(x[:, :, :1], heads, axis=2))
        tol = 1e-4 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(shared, repeated, rtol=tol, atol=tol)
    print("python.multi_head: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
