# SPDX-License-Identifier: MIT
"""abc_attention_torch: abc's attention as PyTorch layers whose forward and backward passes are
abc's (the C++ kernels through abc_attention), not autograd's.

    layer = MlpAttention(d_x=64, slots=32, causal=True)      # W_φ: [slots, d_x], nn.Linear layout
    out = layer(q, k, v, x)                                  # [..., N, d] each; x [..., N, d_x]
    out.sum().backward()                                     # ∂/∂q, k, v, x and layer.w_phi

SlotGatesAttention (GSA), RandomFeatureAttention (RFA, learned W and gate) and
SlidingWindowAttention are the same for those controls, and
ControlAttentionFunction runs any control of abc_attention with a backward pass, its parameters
given as tensors.

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

__all__ = ["ControlAttentionFunction", "MlpAttentionFunction", "MlpAttention", "SlotGatesAttention",
           "RandomFeatureAttention", "SlidingWindowAttention"]


def _numpy(t):
    return t.detach().cpu().numpy()


def _torch(a, like):
    return torch.from_numpy(np.ascontiguousarray(a)).to(device=like.device)


def _attention(w_phi, activation, normalization, scale, chunk):
    if w_phi.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"abc_attention_torch: w_phi is {w_phi.dtype}, expected torch.float32 or torch.float64")
    return abc_attention.Mlp(_numpy(w_phi), activation=activation, normalization=normalization,
                             scale=scale, chunk=chunk)


def _forward(ctx, attn, causal, names, q, k, v, x, params):
    """What every Function here does forward: abc's forward_causal (or forward) on each sequence of
    the batch; keeps what _backward needs. `names` are the keys of `params`' gradients in abc's
    gradient dict ("inner.w_phi" for a nested one)."""
    call = attn.forward_causal if causal else attn.forward
    lead = q.shape[:-2]
    qs, ks, vs = (_numpy(t).reshape(-1, *t.shape[-2:]) for t in (q, k, v))
    xs = None if x is None else _numpy(x).reshape(-1, *x.shape[-2:])
    out = np.stack([call(qs[b], ks[b], vs[b], None if xs is None else xs[b]) for b in range(len(qs))])
    ctx.attn, ctx.causal, ctx.has_x, ctx.names = attn, causal, x is not None, names
    ctx.save_for_backward(q, k, v, x if x is not None else q.new_empty(0), *params)
    return _torch(out.reshape(*lead, *out.shape[-2:]), q)


def _backward(ctx, d_out):
    """abc's backward_causal (or backward) on each sequence: (dq, dk, dv, dx, *d_params), the
    parameters' gradients summed over the batch."""
    q, k, v, x, *params = ctx.saved_tensors
    call = ctx.attn.backward_causal if ctx.causal else ctx.attn.backward
    qs, ks, vs, ds = (_numpy(t).reshape(-1, *t.shape[-2:]) for t in (q, k, v, d_out))
    xs = _numpy(x).reshape(-1, *x.shape[-2:]) if ctx.has_x else None
    grads = [call(qs[b], ks[b], vs[b], ds[b], None if xs is None else xs[b]) for b in range(len(qs))]

    def stacked(key, like):
        return _torch(np.stack([g[key] for g in grads]).reshape(like.shape), like)

    def parameter(name, like):
        def find(g):
            for part in name.split("."):
                g = g[part]
            return np.asarray(g, dtype=_numpy(like).dtype)
        return _torch(np.sum([find(g) for g in grads], axis=0).reshape(like.shape), like)

    dx = stacked("x", x) if ctx.has_x else None
    return (stacked("q", q), stacked("k", k), stacked("v", v), dx,
            *(parameter(n, p) for n, p in zip(ctx.names, params)))


class ControlAttentionFunction(torch.autograd.Function):
    """out = abc attention of q, k, v with control input x (None: the keys) for any control of
    abc_attention: `make(*params, dtype=...)` builds it from the parameters as numpy arrays (e.g.
    `abc_attention.SlotGates`, or `lambda dtype: abc_attention.SlidingWindow(8, dtype=dtype)`), and
    `names` are their keys in abc's gradient dict, in order (("w_f", "b_f") for SlotGates, () for a
    control without parameters, "inner.w_phi" for a nested one). Parameters and inputs share one
    dtype, float32 or float64.

        out = ControlAttentionFunction.apply(make, names, causal, q, k, v, x, *params)
    """

    @staticmethod
    def forward(ctx, make, names, causal, q, k, v, x, *params):
        if len(names) != len(params):
            raise ValueError(f"abc_attention_torch: {len(params)} parameters, but {len(names)} names for their "
                             "gradients (expected one name per parameter)")
        attn = make(*(_numpy(p) for p in params), dtype=_numpy(q).dtype)
        return _forward(ctx, attn, causal, tuple(names), q, k, v, x, params)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out):
        return (None, None, None, *_backward(ctx, d_out))


class MlpAttentionFunction(torch.autograd.Function):
    """out = ABC-MLP attention of q, k, v with control input x (or the keys when x is None) and
    weights w_phi [n, d_x]; `causal` picks forward_causal over forward. All tensors share one dtype,
    float32 or float64. (ControlAttentionFunction with abc_attention.Mlp, with the options named.)"""

    @staticmethod
    def forward(ctx, q, k, v, x, w_phi, causal=True, activation="exp", normalization="prefix",
                scale=0.0, chunk=16):
        attn = _attention(w_phi, activation, normalization, scale, chunk)
        return _forward(ctx, attn, causal, ("w_phi",), q, k, v, x, (w_phi,))

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out):
        return (*_backward(ctx, d_out), None, None, None, None, None)


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


class SlotGatesAttention(torch.nn.Module):
    """Gated Slot Attention (abc::control::SlotGates) with learned gates: f = sigmoid(x W_fᵀ + b_f)^(1/τ),
    `w_f` [slots, d_x] (nn.Linear layout) and `b_f` [slots] (None with bias=False):
    forward(q, k, v, x=None) -> [..., N, dv]."""

    def __init__(self, d_x, slots, tau=8.0, bias=True, causal=True, scale=0.0, chunk=16, dtype=torch.float32,
                 device=None):
        super().__init__()
        self.tau, self.causal, self.scale, self.chunk = tau, causal, scale, chunk
        self.w_f = torch.nn.Parameter(torch.randn(slots, d_x, dtype=dtype, device=device) / math.sqrt(d_x))
        self.b_f = torch.nn.Parameter(torch.zeros(slots, dtype=dtype, device=device)) if bias else None

    def _make(self, w_f, b_f=None, dtype=None):
        return abc_attention.SlotGates(w_f, b_f, tau=self.tau, scale=self.scale, chunk=self.chunk, dtype=dtype)

    def forward(self, q, k, v, x=None):
        params, names = ((self.w_f, self.b_f), ("w_f", "b_f")) if self.b_f is not None else ((self.w_f,), ("w_f",))
        return ControlAttentionFunction.apply(self._make, names, self.causal, q, k, v, x, *params)

    def extra_repr(self):
        slots, d_x = self.w_f.shape
        return f"d_x={d_x}, slots={slots}, tau={self.tau}, bias={self.b_f is not None}, causal={self.causal}"


class RandomFeatureAttention(torch.nn.Module):
    """RFA (abc::control::RandomFeature with sin/cos features): out_t = φ(q_t)ᵀ S / φ(q_t)·z with
    φ(x) = sqrt(1/D) [sin(W x̂), cos(W x̂)], x̂ = x/‖x‖ (input_norm="unit") or x ("raw"). `w`
    [features, d] is learned (drawn as sigma · N(0, 1), RFA's σ folded into W); with gate=True the
    memory is gated by sigmoid(x · w_g + b_g), `w_g` [d_x] and `b_g` [] learned (the gate reads the
    keys when x is None, so d_x must then be d). forward(q, k, v, x=None) -> [..., N, dv]."""

    def __init__(self, d, features, gate=False, d_x=None, sigma=1.0, input_norm="unit", floor=0.0,
                 causal=True, scale=0.0, chunk=16, dtype=torch.float32, device=None):
        super().__init__()
        self.input_norm, self.floor, self.causal, self.scale, self.chunk = input_norm, floor, causal, scale, chunk
        self.w = torch.nn.Parameter(sigma * torch.randn(features, d, dtype=dtype, device=device))
        d_x = d if d_x is None else d_x
        self.w_g = torch.nn.Parameter(torch.randn(d_x, dtype=dtype, device=device) / math.sqrt(d_x)) if gate else None
        self.b_g = torch.nn.Parameter(torch.zeros((), dtype=dtype, device=device)) if gate else None

    def _make(self, w, w_g=None, b_g=None, dtype=None):
        return abc_attention.RandomFeature(w, input_norm=self.input_norm, w_g=w_g,
                                           b_g=0.0 if b_g is None else float(b_g), floor=self.floor,
                                           scale=self.scale, chunk=self.chunk, dtype=dtype)

    def forward(self, q, k, v, x=None):
        if self.w_g is None:
            return ControlAttentionFunction.apply(self._make, ("w",), self.causal, q, k, v, x, self.w)
        return ControlAttentionFunction.apply(self._make, ("w", "w_g", "b_g"), self.causal, q, k, v, x,
                                              self.w, self.w_g, self.b_g)

    def extra_repr(self):
        features, d = self.w.shape
        return (f"d={d}, features={features}, gate={self.w_g is not None}, input_norm={self.input_norm!r}, "
                f"floor={self.floor}, causal={self.causal}")


class SlidingWindowAttention(torch.nn.Module):
    """The last `slots` tokens (abc::control::SlidingWindow): no parameters; forward(q, k, v) -> [..., N, dv]."""

    def __init__(self, slots, causal=True, scale=0.0, chunk=16):
        super().__init__()
        self.slots, self.causal, self.scale, self.chunk = slots, causal, scale, chunk

    def _make(self, dtype=None):
        return abc_attention.SlidingWindow(self.slots, scale=self.scale, chunk=self.chunk, dtype=dtype)

    def forward(self, q, k, v, x=None):
        return ControlAttentionFunction.apply(self._make, (), self.causal, q, k, v, x)

    def extra_repr(self):
        return f"slots={self.slots}, causal={self.causal}"
