#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""python.torch_gradcheck: the torch layer's backward (abc's) against torch.autograd.gradcheck in
double, causal and not, with and without a control input, batched; and the layer's output against
the module's. Exits 77 (skipped) without torch."""
import sys

import numpy as np

try:
    import torch
except ImportError:
    print("python.torch_gradcheck: torch is not installed (Debian: python3-torch); skipped")
    sys.exit(77)

import abc_attention
from abc_attention_torch import MlpAttention, MlpAttentionFunction


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

    # float32 runs the float kernels and keeps the dtype.
    layer32 = MlpAttention(d_x, n)
    out32 = layer32(q.detach().float(), k.detach().float(), v.detach().float(), x.detach().float())
    assert out32.dtype == torch.float32
    print("python.torch_gradcheck: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
