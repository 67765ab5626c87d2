#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python.state_io: save_state / load_state round trip, and a loaded state decodes as the original;
for MultiHeadMlp, a pool sequence's blobs (one per memory) load into its memories' attentions; a
float32 state held in bfloat16."""
import copy
import sys

import numpy as np

import abc_attention as abc


def multi_head(rng, dtype):
    """A pool sequence's states as blobs, one per memory: each loads into memory m's single-head
    attention as the state it was, and continues there as the pool continues."""
    batch, n_tok, heads, kv_heads, d, dv, n = 2, 9, 4, 2, 4, 3, 5
    q = rng.standard_normal((batch, n_tok, heads, d)).astype(dtype)
    k = rng.standard_normal((batch, n_tok, kv_heads, d)).astype(dtype)
    v = rng.standard_normal((batch, n_tok, kv_heads, dv)).astype(dtype)
    mha = abc.MultiHeadMlp(rng.standard_normal((kv_heads, n, d)).astype(dtype), heads, kv_heads)
    pool = mha.make_pool()
    for i in (1, 2):
        mha.add(pool, i, d, dv)
    mha.forward_causal_pool(pool, [1, 2], q[:, :6], k[:, :6], v[:, :6])
    blobs = mha.save_state(pool, 2)
    assert len(blobs) == mha.memories and all(b[:8] == b"ABCSTATE" for b in blobs)
    loaded = [mha.memory(m).load_state(b) for m, b in enumerate(blobs)]
    assert loaded == pool.states(2) and all(s.position == 6 for s in loaded)
    out = mha.forward_causal_pool(pool, [1, 2], q[:, 6:], k[:, 6:], v[:, 6:])
    for h in range(heads):
        m = mha.memory_of(h)
        cont = mha.memory(m).forward_causal_state(loaded[m].copy(), q[1, 6:, h], k[1, 6:, m], v[1, 6:, m])
        assert np.array_equal(cont, out[1, :, h]), h
    # A blob of one memory is a state of that memory's attention only when the slot counts agree.
    try:
        abc.Mlp(np.ones((n + 1, d), dtype=dtype)).load_state(blobs[0])
        raise AssertionError("a blob of 5 slots loaded into an attention of 6")
    except ValueError as e:
        assert "abc::load_state" in str(e), e


def bfloat16_storage(rng):
    """A float32 state held in bfloat16: its memory is bfloat16 values (the low 16 bits of every
    float32 are zero) after each call; it decodes close to a float32 state; blobs hold the widened
    memory; float64 and unknown storages are refused with abc's messages."""
    n_tok, d, dv, n = 12, 4, 3, 5
    q, k = (rng.standard_normal((n_tok, d)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((n_tok, dv)).astype(np.float32)
    attn = abc.Mlp(rng.standard_normal((n, d)).astype(np.float32))
    packed, wide = attn.make_state(d, dv, storage="bfloat16"), attn.make_state(d, dv)
    assert packed.storage == "bfloat16" and wide.storage == "native"
    a = attn.forward_causal_state(packed, q[:6], k[:6], v[:6])
    b = attn.forward_causal_state(wide, q[:6], k[:6], v[:6])
    assert np.array_equal(a, b)  # one call reads the memory in float; it is rounded when the call ends
    for t in range(6, n_tok):
        a = attn.step(packed, q[t], k[t], v[t])
        b = attn.step(wide, q[t], k[t], v[t])
        assert np.allclose(a, b, rtol=0, atol=2e-2), (a, b)
    for m in (packed.keys, packed.values):
        assert not np.any(m.view(np.uint32) & 0xFFFF) and m.dtype == np.float32
    loaded = attn.load_state(attn.save_state(packed))
    assert loaded.storage == "native" and np.array_equal(loaded.keys, packed.keys)
    # Loaded into bfloat16 storage: a bfloat16 state's blob comes back as it was; a float32 state's
    # memory comes back rounded, as the bfloat16 state decoding beside it holds it.
    again = attn.load_state(attn.save_state(packed), storage="bfloat16")
    assert again.storage == "bfloat16" and again == packed
    rounded = attn.load_state(attn.save_state(wide), storage="bfloat16")
    assert rounded.storage == "bfloat16" and rounded.position == wide.position
    assert not np.any(rounded.keys.view(np.uint32) & 0xFFFF)
    assert np.allclose(rounded.keys, wide.keys, rtol=2 ** -8, atol=0) and not np.array_equal(rounded.keys, wide.keys)
    for make, want in ((lambda: abc.Mlp(np.ones((n, d))).make_state(d, dv, storage="bfloat16"),
                        "abc::BoundedAttention::make_state: storage is StateStorage::bfloat16, expected "
                        "StateStorage::native for a double state"),
                       (lambda: attn.make_state(d, dv, storage="fp16"),
                        "make_state: storage is 'fp16', expected 'native' or 'bfloat16'"),
                       (lambda: attn.load_state(attn.save_state(wide), storage="fp16"),
                        "load_state: storage is 'fp16', expected 'native' or 'bfloat16'")):
        try:
            make()
            raise AssertionError("accepted: " + want)
        except ValueError as e:
            assert want in str(e), e
    mha = abc.MultiHeadMlp(rng.standard_normal((2, n, d)).astype(np.float32), 4, 2)
    pool = mha.make_pool()
    mha.add(pool, 1, d, dv, storage="bfloat16")
    assert [s.storage for s in pool.states(1)] == ["bfloat16", "bfloat16"]
    mha.load_state(pool, 2, mha.save_state(pool, 1), storage="bfloat16")
    mha.load_state(pool, 3, mha.save_state(pool, 1))
    assert [s.storage for s in pool.states(2)] == ["bfloat16", "bfloat16"] and pool.states(2) == pool.states(1)
    assert [s.storage for s in pool.states(3)] == ["native", "native"]


def main():
    rng = np.random.default_rng(2)
    n_tok, d, dv, n = 11, 4, 3, 5
    for dtype in (np.float64, np.float32):
        q, k = (rng.standard_normal((n_tok, d)).astype(dtype) for _ in range(2))
        v = rng.standard_normal((n_tok, dv)).astype(dtype)
        for attn in (abc.Mlp(rng.standard_normal((n, d)).astype(dtype)),
                     abc.SlidingWindow(n, dtype=dtype),
                     abc.SlotGates(rng.standard_normal((n, d)).astype(dtype)),
                     abc.TopKEviction(n, 2, dtype=dtype),
                     abc.Cluster(rng.standard_normal((n, d)).astype(dtype)),
                     abc.GlobalTokens([0, 2, 5, 8, 9], dtype=dtype),
                     abc.LocalGlobal([0, 3], 3, dtype=dtype),
                     abc.RandomFeature(rng.standard_normal((3, d)).astype(dtype))):
            state = attn.make_state(d, dv)
            attn.forward_causal_state(state, q[:6], k[:6], v[:6])
            blob = attn.save_state(state)
            assert isinstance(blob, bytes) and blob[:8] == b"ABCSTATE"
            loaded = attn.load_state(blob)
            assert loaded == state and loaded.position == 6
            assert np.array_equal(loaded.keys, state.keys) and np.array_equal(loaded.values, state.values)
            assert attn.save_state(loaded) == blob
            # Both continue identically, and a copy forks the sequence.
            fork = copy.copy(state)
            a = attn.forward_causal_state(state, q[6:], k[6:], v[6:])
            b = attn.forward_causal_state(loaded, q[6:], k[6:], v[6:])
            assert np.array_equal(a, b) and loaded == state and fork.position == 6
            # A truncated blob is refused and names the problem.
            try:
                attn.load_state(blob[:-1])
                raise AssertionError("truncated blob accepted")
            except ValueError as e:
                assert "abc::load_state" in str(e), e
        multi_head(rng, dtype)
    bfloat16_storage(rng)
    print("python.state_io: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
