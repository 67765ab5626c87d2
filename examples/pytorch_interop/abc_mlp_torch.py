#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""abc example: a multi-head ABC-MLP attention layer written in PyTorch from the equations, whose
weights, inputs and outputs are exported as .npy files for compare.cpp to check abc against.

    python3 abc_mlp_torch.py OUT_DIR

The layer (docs/design.md section 1, normalised ABC-MLP; the control input is the layer input x,
as in the ABC paper, section 4: every head's W_φ reads the same x):

    q, k, v = x W_qᵀ, x W_kᵀ, x W_vᵀ, split into H heads of width d     (no biases)
    per head: s = x W_φᵀ                            [N × n], slot logits (W_φ [n × d_model])
              non-causal: φ = softmax over the tokens of each column of s
                          K̃ = φᵀ k, Ṽ = φᵀ v     [n × d]; slot ℓ = attention of pseudo-query W_φ[ℓ]
              causal:     query t uses the memory built from tokens 0..t only (the softmax over
                          the prefix, here a masked softmax over all tokens: O(N² · n · d), fine
                          for a small N)
              out(q) = Ṽᵀ softmax(scale · K̃ q),  scale = 1/sqrt(d)
    y = concat_heads(out) W_oᵀ

The reference is computed in float64 from weights and inputs that were first rounded to float32,
so the float32 files written for C++ hold exactly the values the reference used.

Files (C order, little-endian, .npy version 1.0):
    x.npy            float32 [B, N, d_model]      the layer input
    w_q/w_k/w_v/w_o  float32 [d_model, d_model]   torch.nn.Linear layout: [out, in], y = x Wᵀ
    w_phi.npy        float32 [H, n, d_model]      per-head ABC-MLP control weights (read x)
    q/k/v.npy        float32 [B, H, N, d]         the per-head projections (C++ recomputes them
                                                  from x and checks; attention uses these files)
    out_causal.npy     float64 [B, N, d_model]    y, causal
    out_noncausal.npy  float64 [B, N, d_model]    y, non-causal
    out_step.npy       float64 [B, N, d_model]    y, causal again: the reference for a step loop
"""
import math
import os
import sys

import numpy as np
import torch


class AbcMlpAttention(torch.nn.Module):
    """Multi-head attention whose memory is n slots written by the ABC-MLP control."""

    def __init__(self, d_model: int, heads: int, slots: int):
        super().__init__()
        assert d_model % heads == 0
        self.heads, self.d = heads, d_model // heads
        self.q_proj = torch.nn.Linear(d_model, d_model, bias=False)
        self.k_proj = torch.nn.Linear(d_model, d_model, bias=False)
        self.v_proj = torch.nn.Linear(d_model, d_model, bias=False)
        self.o_proj = torch.nn.Linear(d_model, d_model, bias=False)
        # W_φ[h] is [n × d_model]: it reads the layer input. Entries N(0, 1/d_model): logits of unit
        # scale for a unit-scale input.
        self.w_phi = torch.nn.Parameter(torch.randn(heads, slots, d_model) / math.sqrt(d_model))

    def project(self, x):
        """x [B, N, d_model] -> q, k, v [B, H, N, d]."""
        b, n_tok, _ = x.shape

        def split(t):
            return t.view(b, n_tok, self.heads, self.d).transpose(1, 2)

        return split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))

    def attend(self, x, q, k, v, causal: bool):
        """The ABC-MLP read for every head: x [B, N, d_model], q, k, v [B, H, N, d] -> [B, H, N, d]."""
        scale = 1.0 / math.sqrt(self.d)
        s = torch.einsum("bid,hld->bhli", x, self.w_phi)  # slot logits from the layer input, [B, H, n, N]
        if causal:
            n_tok = k.shape[2]
            future = torch.triu(torch.ones(n_tok, n_tok, dtype=torch.bool, device=k.device), 1)
            # [B, H, t, n, i]: logits of slot l over tokens i, tokens after t masked out
            st = s.unsqueeze(2).expand(-1, -1, n_tok, -1, -1)
            st = st.masked_fill(future[:, None, :], float("-inf"))
            phi = torch.softmax(st, dim=-1)  # normalised over the prefix 0..t, per slot
            k_mem = torch.einsum("bhtli,bhid->bhtld", phi, k)  # K̃_t, [B, H, N, n, d]
            v_mem = torch.einsum("bhtli,bhid->bhtld", phi, v)
            p = torch.softmax(scale * torch.einsum("bhtld,bhtd->bhtl", k_mem, q), dim=-1)
            return torch.einsum("bhtl,bhtld->bhtd", p, v_mem)
        phi = torch.softmax(s, dim=-1)  # [B, H, n, N]
        k_mem = phi @ k  # [B, H, n, d]
        v_mem = phi @ v
        p = torch.softmax(scale * q @ k_mem.transpose(-1, -2), dim=-1)  # [B, H, N, n]
        return p @ v_mem

    def forward(self, x, causal: bool):
        q, k, v = self.project(x)
        o = self.attend(x, q, k, v, causal)  # [B, H, N, d]
        b, _, n_tok, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(b, n_tok, -1))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: abc_mlp_torch.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)

    batch, n_tok, d_model, heads, slots = 1, 37, 64, 4, 8
    torch.manual_seed(20240801)
    layer = AbcMlpAttention(d_model, heads, slots)
    x = torch.randn(batch, n_tok, d_model)

    # Round everything C++ will read to float32 once, then compute the reference in float64.
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(p.float())
    layer = layer.double()
    x = x.float().double()

    with torch.no_grad():
        q, k, v = layer.project(x)
        y_causal = layer(x, causal=True)
        y_noncausal = layer(x, causal=False)
        # Sanity checks of the reference itself: the last causal query sees every key, so it
        # equals the non-causal output there; the first sees only token 0, so it reads v_0.
        assert torch.allclose(y_causal[:, -1], y_noncausal[:, -1], rtol=0, atol=1e-12)
        o0 = layer.o_proj(v[:, :, 0].reshape(batch, -1))
        assert torch.allclose(y_causal[:, 0], o0, rtol=0, atol=1e-12)

    def save(name, t, dtype):
        arr = np.ascontiguousarray(t.detach().cpu().numpy().astype(dtype))
        np.save(os.path.join(out_dir, name + ".npy"), arr)

    save("x", x, np.float32)
    save("w_q", layer.q_proj.weight, np.float32)
    save("w_k", layer.k_proj.weight, np.float32)
    save("w_v", layer.v_proj.weight, np.float32)
    save("w_o", layer.o_proj.weight, np.float32)
    save("w_phi", layer.w_phi, np.float32)
    # q, k, v are products of float32 values computed in float64; rounded to float32 for C++,
    # which also recomputes them from x and the weights and reports the difference.
    save("q", q, np.float32)
    save("k", k, np.float32)
    save("v", v, np.float32)
    save("out_causal", y_causal, np.float64)
    save("out_noncausal", y_noncausal, np.float64)
    save("out_step", y_causal, np.float64)
    print(f"abc_mlp_torch: torch {torch.__version__}, B={batch} N={n_tok} d_model={d_model} "
          f"H={heads} d={d_model // heads} n={slots}; wrote 12 .npy files to {out_dir}")


if __name__ == "__main__":
    main()
