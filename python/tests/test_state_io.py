#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python.state_io: save_state / load_state round trip, and a loaded state decodes as the original."""
import copy
import sys

import numpy as np

import abc_attention as abc


def main():
    rng = np.random.default_rng(2)
    n_tok, d, dv, n = 11, 4, 3, 5
    for dtype in (np.float64, np.float32):
        q, k = (rng.standard_normal((n_tok, d)).astype(dtype) for _ in range(2))
        v = rng.standard_normal((n_tok, dv)).astype(dtype)
        for attn in (abc.Mlp(rng.standard_normal((n, d)).astype(dtype)),
                     abc.SlidingWindow(n, dtype=dtype),
                     abc.SlotGates(rng.standard_normal((n, d)).astype(dtype))):
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
    print("python.state_io: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
