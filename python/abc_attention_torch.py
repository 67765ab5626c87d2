# SPDX-License-Identifier: MIT
"""abc_attention_torch: ABC-MLP attention as a PyTorch layer whose forward and backward passes are
abc's (the C++ kernels through abc_attention), not autograd's.

    layer = MlpAttention(d_x=64, slots=32, causal=True)      # W_φ: [slots, d_x], nn.Linear layout
    out = layer(q, k, v, x)                                  # [..., N, d] each; x [..., N, d_x]
    out.sum().backward()                                     # ∂/∂q, k, v, x and layer.w_phi

Tensors go to abc as numpy arrays on the CPU (a copy only where the tensor is not C-contiguous or
lives elsewhere) and come back on the input's device. Leading dimensions are a batch of independent
sequences, run one after the other. The backward pass is abc's and is not itself differentiable
(no double backward).
"""
import math

import numpy as np
import torch
from torch.autograd.function import once_differentiable

import abc_attention

__all__ = ["MlpAttentionFunction", "MlpAttention"]


def _numpy(t):
    return t.detach().cpu().numpy()


def _torch(a, like):
    return torch.from_numpy(a).to(device=like.device)


def _attention(w_phi, activation, normalization, scale, chunk):
    if w_phi.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"abc_attention_torch: w_phi is {w_phi.dtype}, expected torch.float32 or torch.float64")
    return abc_attention.Mlp(_numpy(w_phi), activation=activation, normalization=normalization,
                             scale=scale, chunk=chunk)


class MlpAttentionFunction(torch.autograd.Function):
    """out = ABC-MLP attention of q, k, v with control input x (or the keys when x is None) and
    weights w_phi [n, d_x]; `causal` picks forward_causal over forward. All tensors share one dtype,
    float32 or float64."""

    @staticmethod
    def forward(ctx, q, k, v, x, w_phi, causal=True, activation="exp", normalization="prefix",
                scale=0.0, chunk=16):
        attn = _attention(w_phi, activation, normalization, scale, chunk)
        call = attn.forward_causal if causal else attn.forward
        lead = q.shape[:-2]
        qs, ks, vs = (_numpy(t).reshape(-1, *t.shape[-2:]) for t in (q, k, v))
        xs = None if x is None else _numpy(x).reshape(-1, *x.shape[-2:])
        out = np.stack([call(qs[b], ks[b], vs[b], None if xs is None else xs[b]) for b in range(len(qs))])
        ctx.attn, ctx.causal, ctx.has_x = attn, causal, x is not None
        ctx.save_for_backward(q, k, v, x if x is not None else q.new_empty(0))
        return _torch(out.reshape(*lead, *out.shape[-2:]), q)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out):
        q, k, v, x = ctx.saved_tensors
        call = ctx.attn.backward_causal if ctx.causal else ctx.attn.backward
        qs, ks, vs, ds = (_numpy(t).reshape(-1, *t.shape[-2:]) for t in (q, k, v, d_out))
        xs = _numpy(x).reshape(-1, *x.shape[-2:]) if ctx.has_x else None
        grads = [call(qs[b], ks[b], vs[b], ds[b], None if xs is None else xs[b]) for b in range(len(qs))]

        def stacked(key, like):
            return _torch(np.stack([g[key] for g in grads]).reshape(like.shape), like)

        dq, dk, dv = stacked("q", q), stacked("k", k), stacked("v", v)
        dx = stacked("x", x) if ctx.has_x else None
        dw = _torch(np.sum([g["w_phi"] for g in grads], axis=0), q)
        return dq, dk, dv, dx, dw, None, None, None, None, None


class MlpAttention(torch.nn.Module):
    """ABC-MLP attention with learned W_φ (`w_phi`, [slots, d_x], read as s = x W_φᵀ like
    nn.Linear's weight): forward(q, k, v, x=None) -> [..., N, dv]. Without x the control reads the
    keys, and d_x must be the key width."""

    def __init__(self, d_x, slots, causal=True, activation="exp", normalization="prefix", scale=0.0,
                 chunk=16, dtype=torch.float32, device=None):
        super().__init__()
        self.causal, self.activation, self.normalization = causal, activation, normalization
        self.scale, self.chunk = scale, chunk
        # N(0, 1/d_x), as abc's seeded Mlp: logits of unit scale for a unit-scale input.
        self.w_phi = torch.nn.Parameter(torch.randn(slots, d_x, dtype=dtype, device=device) / math.sqrt(d_x))

    def forward(self, q, k, v, x=None):
        return MlpAttentionFunction.apply(q, k, v, x, self.w_phi, self.causal, self.activation,
                                          self.normalization, self.scale, self.chunk)

    def extra_repr(self):
        slots, d_x = self.w_phi.shape
        return (f"d_x={d_x}, slots={slots}, causal={self.causal}, activation={self.activation!r}, "
                f"normalization={self.normalization!r}")
