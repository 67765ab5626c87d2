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
    print("python.errors: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
