#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python.torch_gradcheck: the torch layers' backward (abc's) against torch.autograd.gradcheck in
double, causal and not, with and without a control input, batched, for ABC-MLP and, through
ControlAttentionFunction, GSA, gated ABC-MLP, RFA (RandomFeature: W, the gate, unit and raw inputs, a
floor) and the sliding window; RandomFeatureAttention; and the layers' outputs against the module's. Exits 77 (skipped) without torch."""
import sys

import numpy as np

try:
    import torch
except ImportError:
    print("python.torch_gradcheck: torch is not installed (Debian: python3-torch); skipped")
    sys.exit(77)

import abc_attention
from abc_attention_torch import (ControlAttentionFunction, MlpAttention, MlpAttentionFunction, RandomFeatureAttention,
                                 SlidingWindowAttention, SlotGatesAttention)


def main():
    torch.manual_seed(0)
    n_tok, n, d, d_x = 7, 3, 4, 5

    def leaf(*shape):
        return torch.randn(*shape, dtype=torch.float64, requires_grad=True)

    for causal in (True, False):
        for normalization in ("prefix", "per_token"):
            q, k, v, x = leaf(n_tok, d), leaf(n_tok, d), leaf(n_tok, d), leaf(n_tok, d_x)
            w_phi = leaf(n, d_x)
            fn = lambda q, k, v, x, w: MlpAttentionFunction.apply(q, k, v, x, w, causal, "exp", normalization)
            assert torch.autograd.gradcheck(fn, (q, k, v, x, w_phi), eps=1e-6, atol=1e-7, rtol=1e-5)
        # No control input: the control reads the keys (W_φ [n, d]).
        q, k, v, w_phi = leaf(n_tok, d), leaf(n_tok, d), leaf(n_tok, d), leaf(n, d)
        fn = lambda q, k, v, w: MlpAttentionFunction.apply(q, k, v, None, w, causal)
        assert torch.autograd.gradcheck(fn, (q, k, v, w_phi), eps=1e-6, atol=1e-7, rtol=1e-5)

    # The module: a batch of two sequences, its parameter reached by gradcheck through the layer.
    layer = MlpAttention(d_x, n, causal=True, dtype=torch.float64)
    q, k, v, x = leaf(2, n_tok, d), leaf(2, n_tok, d), leaf(2, n_tok, d), leaf(2, n_tok, d_x)
    assert torch.autograd.gradcheck(lambda q, k, v, x, w: MlpAttentionFunction.apply(q, k, v, x, w),
                                    (q, k, v, x, layer.w_phi), eps=1e-6, atol=1e-7, rtol=1e-5)
    out = layer(q, k, v, x)
    ref = abc_attention.Mlp(layer.w_phi.detach().numpy()).forward_causal(
        q[1].detach().numpy(), k[1].detach().numpy(), v[1].detach().numpy(), x[1].detach().numpy())
    assert np.array_equal(out[1].detach().numpy(), ref)
    out.square().sum().backward()
    assert layer.w_phi.grad is not None and layer.w_phi.grad.shape == (n, d_x)

    # Any control through ControlAttentionFunction: GSA (two parameters), gated ABC-MLP (a nested
    # gradient and a scalar one), the sliding window (none).
    q, k, v, x = leaf(2, n_tok, d), leaf(2, n_tok, d), leaf(2, n_tok, d), leaf(2, n_tok, d_x)
    w_f, b_f, w_phi, w_g = leaf(n, d_x), leaf(n), leaf(n, d_x), leaf(d_x)
    b_g = torch.randn((), dtype=torch.float64, requires_grad=True)
    gates = lambda q, k, v, x, w, b: ControlAttentionFunction.apply(
        lambda w, b, dtype: abc_attention.SlotGates(w, b, tau=2.0, dtype=dtype), ("w_f", "b_f"), True, q, k, v, x, w, b)
    assert torch.autograd.gradcheck(gates, (q, k, v, x, w_f, b_f), eps=1e-6, atol=1e-7, rtol=1e-5)
    gated = lambda q, k, v, x, w, wg, bg: ControlAttentionFunction.apply(
        lambda w, wg, bg, dtype: abc_attention.GatedMlp(w, wg, float(bg), dtype=dtype),
        ("inner.w_phi", "w_g", "b_g"), False, q, k, v, x, w, wg, bg)
    assert torch.autograd.gradcheck(gated, (q, k, v, x, w_phi, w_g, b_g), eps=1e-6, atol=1e-7, rtol=1e-5)
    window = SlidingWindowAttention(3)
    assert torch.autograd.gradcheck(lambda q, k, v: window(q, k, v), (q, k, v), eps=1e-6, atol=1e-7, rtol=1e-5)
    # The modules: their outputs are the module's, their parameters receive gradients.
    gsa = SlotGatesAttention(d_x, n, tau=4.0, dtype=torch.float64)
    out = gsa(q, k, v, x)
    ref = abc_attention.SlotGates(gsa.w_f.detach().numpy(), gsa.b_f.detach().numpy(), tau=4.0).forward_causal(
        q[0].detach().numpy(), k[0].detach().numpy(), v[0].detach().numpy(), x[0].detach().numpy())
    assert np.array_equal(out[0].detach().numpy(), ref)
    out.square().sum().backward()
    assert gsa.w_f.grad.shape == (n, d_x) and gsa.b_f.grad.shape == (n,) and gsa.b_f.grad.abs().sum() > 0
    try:
        ControlAttentionFunction.apply(abc_attention.SlotGates, ("w_f",), True, q, k, v, x, w_f, b_f)
        raise AssertionError("a parameter without a name accepted")
    except ValueError as e:
        assert "2 parameters, but 1 names" in str(e), e

    # RFA: W (σ folded in, small enough that the sin/cos denominators stay away from 0), the learned
    # gate reading the keys or x, unit and raw inputs, causal and not, a floor active at some reads.
    w_rfa, wg_k, wg_x = 0.4 * torch.randn(3, d, dtype=torch.float64), leaf(d), leaf(d_x)
    w_rfa.requires_grad_()
    bg = torch.randn((), dtype=torch.float64, requires_grad=True)
    for causal in (True, False):
        for norm in ("unit", "raw"):
            rfa = lambda q, k, v, w: ControlAttentionFunction.apply(
                lambda w, dtype: abc_attention.RandomFeature(w, input_norm=norm, chunk=3, dtype=dtype), ("w",),
                causal, q, k, v, None, w)
            assert torch.autograd.gradcheck(rfa, (q, k, v, w_rfa), eps=1e-6, atol=1e-7, rtol=1e-5)
            rfa_x = lambda q, k, v, x, w, wg, b: ControlAttentionFunction.apply(
                lambda w, wg, b, dtype: abc_attention.RandomFeature(w, input_norm=norm, w_g=wg, b_g=float(b),
                                                                    chunk=3, dtype=dtype),
                ("w", "w_g", "b_g"), causal, q, k, v, x, w, wg, b)
            assert torch.autograd.gradcheck(rfa_x, (q, k, v, x, w_rfa, wg_x, bg), eps=1e-6, atol=1e-7, rtol=1e-5)
        rfa_k = lambda q, k, v, w, wg, b: ControlAttentionFunction.apply(
            lambda w, wg, b, dtype: abc_attention.RandomFeature(w, w_g=wg, b_g=float(b), floor=0.9, dtype=dtype),
            ("w", "w_g", "b_g"), causal, q, k, v, None, w, wg, b)
        assert torch.autograd.gradcheck(rfa_k, (q, k, v, w_rfa, wg_k, bg), eps=1e-6, atol=1e-7, rtol=1e-5)
    # The module: its output is abc's, and gradcheck reaches its parameters through it.
    layer = RandomFeatureAttention(d, 3, gate=True, d_x=d_x, sigma=0.4, dtype=torch.float64)
    out = layer(q, k, v, x)
    ref = abc_attention.RandomFeature(layer.w.detach().numpy(), w_g=layer.w_g.detach().numpy(),
                                      b_g=float(layer.b_g)).forward_causal(
        q[1].detach().numpy(), k[1].detach().numpy(), v[1].detach().numpy(), x[1].detach().numpy())
    assert np.array_equal(out[1].detach().numpy(), ref)
    out.square().sum().backward()
    assert layer.w.grad.shape == (3, d) and layer.w_g.grad.shape == (d_x,) and layer.b_g.grad.shape == ()
    assert layer.w.grad.abs().sum() > 0 and layer.w_g.grad.abs().sum() > 0
    module = lambda q, k, v, x, w, wg, b: ControlAttentionFunction.apply(layer._make, ("w", "w_g", "b_g"), True,
                                                                          q, k, v, x, w, wg, b)
    assert torch.autograd.gradcheck(module, (q, k, v, x, layer.w, layer.w_g, layer.b_g), eps=1e-6, atol=1e-7,
                                    rtol=1e-5)

    # float32 runs the float kernels and keeps the dtype.
    layer32 = MlpAttention(d_x, n)
    out32 = layer32(q.detach().float(), k.detach().float(), v.detach().float(), x.detach().float())
    assert out32.dtype == torch.float32
    print("python.torch_gradcheck: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
