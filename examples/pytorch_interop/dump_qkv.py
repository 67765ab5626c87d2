#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""abc example: dump one attention head's q, k, v from a PyTorch model you have, for
`compare --select --npy DIR` (the KV-cache table on your model's attention) or `compare --npy DIR`.

    python3 dump_qkv.py OUT_DIR --model MODEL.pt --input INPUT.pt \\
        --q NAME --k NAME --v NAME --heads H [--kv-heads G] [--head h] [--batch b]
    python3 dump_qkv.py OUT_DIR --demo          (a small random model, to try the pipeline)

--model is a whole module saved with torch.save(model) (its classes importable where this runs;
TorchScript modules take no forward hooks); --input a tensor, or a tuple of tensors, saved with
torch.save and passed as model(*input). --q,
--k and --v name the submodules whose outputs are a layer's query, key and value projections
[batch, tokens, heads · d] (for a Hugging Face Llama, e.g. model.layers.3.self_attn.q_proj; list
the names with `print([n for n, _ in model.named_modules()])`). Forward hooks record them during
one forward pass, and head h of sequence b is written as q.npy, k.npy [tokens, d] and v.npy
[tokens, d], float32, C order. Under grouped-query attention (--kv-heads G < H), query head h reads
key/value head h // (H / G).

Positional encodings applied after the projection (RoPE, inside the attention) are not in these
outputs: for a RoPE model the dumped q and k are the unrotated projections, and the table then
measures attention without positions. Hook the rotated tensors instead where a model exposes them.

Then:  build/bench/compare --select --npy OUT_DIR
"""
import argparse
import os
import sys


def fail(message):
    print(f"dump_qkv.py: {message}", file=sys.stderr)
    sys.exit(2)


def demo_model(torch, tokens, d_model, heads):
    """A two-layer pre-LayerNorm decoder with random weights over random token ids, and its input."""
    torch.manual_seed(1)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(d_model)
            self.q_proj = torch.nn.Linear(d_model, d_model, bias=False)
            self.k_proj = torch.nn.Linear(d_model, d_model, bias=False)
            self.v_proj = torch.nn.Linear(d_model, d_model, bias=False)
            self.o_proj = torch.nn.Linear(d_model, d_model, bias=False)

        def forward(self, x):
            h = self.norm(x)
            b, t, _ = h.shape
            split = lambda y: y.view(b, t, heads, -1).transpose(1, 2)  # noqa: E731
            q, k, v = split(self.q_proj(h)), split(self.k_proj(h)), split(self.v_proj(h))
            logits = q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5)
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            y = logits.masked_fill(mask, float("-inf")).softmax(-1) @ v
            return x + self.o_proj(y.transpose(1, 2).reshape(b, t, -1))

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(256, d_model)
            self.layers = torch.nn.ModuleList([Block(), Block()])

        def forward(self, ids):
            x = self.embed(ids)
            for layer in self.layers:
                x = layer(x)
            return x

    ids = torch.randint(0, 256, (1, tokens))
    return Decoder().eval(), (ids,)


def main():
    parser = argparse.ArgumentParser(prog="dump_qkv.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="where q.npy, k.npy and v.npy are written")
    parser.add_argument("--model", help="a module saved with torch.save")
    parser.add_argument("--input", help="the input tensor (or tuple of tensors) saved with torch.save")
    parser.add_argument("--q", help="the submodule whose output is the query projection")
    parser.add_argument("--k", help="the submodule whose output is the key projection")
    parser.add_argument("--v", help="the submodule whose output is the value projection")
    parser.add_argument("--heads", type=int, help="query heads H")
    parser.add_argument("--kv-heads", type=int, help="key/value heads G (default H)")
    parser.add_argument("--head", type=int, default=0, help="the query head to dump (default 0)")
    parser.add_argument("--batch", type=int, default=0, help="the sequence of the batch (default 0)")
    parser.add_argument("--demo", action="store_true", help="a small random decoder instead of --model")
    parser.add_argument("--tokens", type=int, default=1024, help="--demo: tokens (default 1024)")
    args = parser.parse_args()
    if args.demo == bool(args.model):
        fail("give --model (with --input, --q, --k, --v, --heads) or --demo")
    if args.model and not all((args.input, args.q, args.k, args.v, args.heads)):
        fail("--model needs --input, --q, --k, --v and --heads")
    if args.tokens < 2:
        fail(f"--tokens is {args.tokens}, expected at least 2")

    import numpy as np  # only now: --help and bad options need neither numpy nor torch
    import torch

    if args.demo:
        heads = 4
        model, inputs = demo_model(torch, args.tokens, 64, heads)
        names = ("layers.1.q_proj", "layers.1.k_proj", "layers.1.v_proj")
        kv_heads = heads
    else:
        try:
            model = torch.load(args.model)
            inputs = torch.load(args.input)
        except Exception as e:  # a missing file, a pickle that does not load: one line
            fail(f"cannot load the model or its input: {e}")
        if isinstance(model, torch.jit.ScriptModule):
            fail(f"{args.model}: a TorchScript module, which takes no forward hooks; save the nn.Module")
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        names, heads = (args.q, args.k, args.v), args.heads
        kv_heads = args.kv_heads or heads
    if heads < 1 or kv_heads < 1 or heads % kv_heads:
        fail(f"--heads {heads} and --kv-heads {kv_heads}: expected H a multiple of G, both at least 1")
    if not 0 <= args.head < heads:
        fail(f"--head is {args.head}, expected 0 .. {heads - 1}")

    modules = dict(model.named_modules())
    recorded = {}
    for role, name in zip("qkv", names):
        if name not in modules:
            fail(f"--{role} {name}: no such submodule")
        modules[name].register_forward_hook(lambda _m, _i, out, role=role: recorded.__setitem__(role, out.detach()))
    with torch.no_grad():
        model(*inputs)
    for role, count in (("q", heads), ("k", kv_heads), ("v", kv_heads)):
        if role not in recorded:
            fail(f"--{role}: the submodule did not run in the forward pass")
        t = recorded[role]
        if t.dim() != 3 or t.shape[-1] % count:
            fail(f"--{role}: output of shape {tuple(t.shape)}, expected [batch, tokens, heads · d] with {count} heads")
        if not 0 <= args.batch < t.shape[0]:
            fail(f"--batch is {args.batch}, expected 0 .. {t.shape[0] - 1}")
    os.makedirs(args.out_dir, exist_ok=True)
    group = heads // kv_heads
    for role, count, head in (("q", heads, args.head), ("k", kv_heads, args.head // group),
                              ("v", kv_heads, args.head // group)):
        t = recorded[role][args.batch]
        per_head = t.reshape(t.shape[0], count, -1)[:, head, :]
        np.save(os.path.join(args.out_dir, f"{role}.npy"), np.ascontiguousarray(per_head.float().numpy()))
    q = recorded["q"]
    print(f"dump_qkv.py: wrote q, k, v of head {args.head} ({q.shape[1]} tokens, d = {q.shape[-1] // heads}) "
          f"to {args.out_dir}; run: compare --select --npy {args.out_dir}")


if __name__ == "__main__":
    main()
