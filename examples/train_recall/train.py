#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Associative recall with bounded memory: one attention layer trained on CPU with each control at
the same number of slots, then the ABC-MLP model exported for C++ (decode.cpp).

    train.py OUT_DIR [--short] [--plot FILE] [--steps N] [--seed S]

The task: a sequence of key-value pairs, then queries of keys seen; the answer to a query is its
key's value. Each pair is one token, key · (values + 1) + value, and each query one token with the
value "none" (index `values`), so one attention layer can solve it: a query's q must find its
pair's k, and that pair's v must carry the value. With fewer slots than pairs a bounded memory
cannot hold every pair, and the controls differ in what they keep.

The model: the token's embedding, the sum of its key's and its value's (two nn.Embedding tables)
-> q, k, v projections (nn.Linear, no bias) -> attention -> output projection, added to the
embedding -> linear head over the values. The attention is, in turn:
  softmax   exact causal softmax attention in plain torch: every token kept (the baseline, unbounded)
  abc-mlp   ABC-MLP through abc (abc_attention_torch.MlpAttention), W_φ [slots, d] reading the
            block input, as the ABC paper does
  gsa       Gated Slot Attention through abc (SlotGatesAttention), gates from the block input
  window    the last `slots` tokens through abc (SlidingWindowAttention)
Each is trained with the same data, seed, optimiser and steps. The loss is the cross-entropy of the
answers at the query positions; the accuracy is over a held-out set.

Writes to OUT_DIR: recall_mlp.abcw (the trained ABC-MLP model: weights and configuration,
docs/weights.md), reference.abcw (held-out sequences and the model's logits on them, for decode.cpp),
and results.md (the accuracy table). --plot writes the loss curves and accuracies as a PNG.
--short is the CI form: a small model, few steps; it checks that every control's loss fell by 10% or
more, that softmax (every token kept) reaches 90% and that ABC-MLP is above four times chance, and
exits 1 otherwise. Exits 77 without torch.
"""
import argparse
import math
import os
import sys
import time

try:
    import torch
except ImportError:
    print("train.py: torch is not installed (Debian: python3-torch); skipped")
    sys.exit(77)
import numpy as np

from abc_attention_torch import MlpAttention, SlidingWindowAttention, SlotGatesAttention
from abc_weights import save_weights

CONTROLS = ("softmax", "abc-mlp", "gsa", "window")


class Task:
    """Sequences of `pairs` key-value tokens over `keys` keys (distinct within a sequence) and
    `values` values, then `queries` query tokens of keys from the pairs. Token = key · (values + 1)
    + value, the value `values` for a query."""

    def __init__(self, keys, values, pairs, queries):
        self.keys, self.values, self.pairs, self.queries = keys, values, pairs, queries
        self.vocab_in = keys * (values + 1)
        self.length = pairs + queries

    def batch(self, size, generator):
        keys = torch.argsort(torch.rand(size, self.keys, generator=generator), dim=1)[:, :self.pairs]
        values = torch.randint(self.values, (size, self.pairs), generator=generator)
        asked = torch.randint(self.pairs, (size, self.queries), generator=generator)
        query_keys = torch.gather(keys, 1, asked)
        tokens = torch.cat([keys * (self.values + 1) + values, query_keys * (self.values + 1) + self.values], dim=1)
        targets = torch.full((size, self.length), -1, dtype=torch.long)  # -1: no answer here
        targets[:, self.pairs:] = torch.gather(values, 1, asked)
        return tokens, targets


class SoftmaxAttention(torch.nn.Module):
    """Exact causal softmax attention, scaled by 1/sqrt(d) as abc's default."""

    def forward(self, q, k, v, x=None):
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        n = q.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


class RecallModel(torch.nn.Module):
    def __init__(self, task, d, control, slots):
        super().__init__()
        self.control, self.slots = control, slots
        self.values = task.values
        self.key_embed = torch.nn.Embedding(task.keys, d)
        self.value_embed = torch.nn.Embedding(task.values + 1, d)  # the last row: "none" (a query)
        self.w_q, self.w_k, self.w_v, self.w_o = (torch.nn.Linear(d, d, bias=False) for _ in range(4))
        self.head = torch.nn.Linear(d, task.values)
        if control == "softmax":
            self.attention = SoftmaxAttention()
        elif control == "abc-mlp":
            self.attention = MlpAttention(d_x=d, slots=slots)
        elif control == "gsa":
            self.attention = SlotGatesAttention(d_x=d, slots=slots)
        else:
            self.attention = SlidingWindowAttention(slots)

    def forward(self, tokens):
        h = self.key_embed(tokens // (self.values + 1)) + self.value_embed(tokens % (self.values + 1))  # [B, N, d]
        x = None if self.control == "window" else h          # the controls' input: the block input
        a = self.attention(self.w_q(h), self.w_k(h), self.w_v(h), x)
        return self.head(h + self.w_o(a))                    # [B, N, values]


def loss_and_accuracy(logits, targets):
    answered = targets >= 0
    loss = torch.nn.functional.cross_entropy(logits[answered], targets[answered])
    accuracy = (logits[answered].argmax(-1) == targets[answered]).float().mean().item()
    return loss, accuracy


def train(task, control, args, held_out):
    torch.manual_seed(args.seed)  # the same initial embedding, projections and head for every control
    model = RecallModel(task, args.d, control, args.slots)
    optimiser = torch.optim.Adam(model.parameters(), lr=args.lr)
    data = torch.Generator().manual_seed(args.seed + 1)  # the same batches for every control
    losses, start = [], time.perf_counter()
    for step in range(args.steps):
        tokens, targets = task.batch(args.batch, data)
        loss, _ = loss_and_accuracy(model(tokens), targets)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
        if step % args.report == 0 or step == args.steps - 1:
            print(f"  {control:8s} step {step:5d}  loss {loss.item():.4f}", flush=True)
    with torch.no_grad():
        _, accuracy = loss_and_accuracy(model(held_out[0]), held_out[1])
    return model, losses, accuracy, time.perf_counter() - start


def export(model, task, args, held_out):
    """The ABC-MLP model for C++: every parameter under its state_dict name, the configuration as
    metadata; and held-out sequences with the model's logits on them."""
    attention = model.attention
    tensors = {name: p.detach() for name, p in model.state_dict().items()}
    meta = {"control": "mlp", "slots": args.slots, "d_model": args.d, "keys": task.keys, "values": task.values, "activation": attention.activation,
            "normalization": attention.normalization, "scale": float(attention.scale), "chunk": attention.chunk,
            "task": f"associative recall: {task.keys} keys, {task.values} values, {task.pairs} pairs, "
                    f"{task.queries} queries"}
    save_weights(os.path.join(args.out, "recall_mlp.abcw"), tensors, meta)
    tokens, targets = held_out[0][:args.reference], held_out[1][:args.reference]
    with torch.no_grad():
        logits = model(tokens)
    # Token ids and targets are small integers, exact in float64.
    save_weights(os.path.join(args.out, "reference.abcw"),
                 {"tokens": tokens.double(), "targets": targets.double(), "logits": logits},
                 {"description": "held-out sequences (targets -1 where no answer is due) and the "
                                 "PyTorch model's logits on them"})
    _, accuracy = loss_and_accuracy(logits, targets)
    return accuracy


def plot(path, results, args, task):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [2, 1]})
    window = max(1, args.steps // 50)
    for control, (_, losses, accuracy, _) in results.items():
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        left.plot(np.arange(len(smooth)) + window - 1, smooth, label=control)
    left.axhline(math.log(task.values), color="grey", linestyle=":", linewidth=1, label="chance")
    left.set(xlabel="step", ylabel="training loss (mean of %d steps)" % window, yscale="log")
    left.legend(frameon=False)
    names = list(results)
    right.bar(names, [100 * results[c][2] for c in names], color=[f"C{i}" for i in range(len(names))])
    right.axhline(100 / task.values, color="grey", linestyle=":", linewidth=1)
    right.set(ylabel="held-out accuracy (%)", ylim=(0, 100))
    fig.suptitle(f"associative recall, {task.pairs} pairs, {args.slots} slots (softmax: all tokens), d = {args.d}")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="directory for the exported model, the reference and results.md")
    parser.add_argument("--short", action="store_true", help="the CI form: small and quick, with checks")
    parser.add_argument("--plot", help="write the loss curves and accuracies to this PNG")
    parser.add_argument("--steps", type=int, help="training steps per control")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.short:
        task = Task(keys=16, values=8, pairs=8, queries=4)
        args.d, args.slots, args.batch, args.lr, steps = 32, 4, 16, 1e-2, 400
    else:
        task = Task(keys=32, values=16, pairs=16, queries=8)
        args.d, args.slots, args.batch, args.lr, steps = 64, 8, 32, 3e-3, 1500
    args.steps = args.steps or steps
    args.report = max(1, args.steps // 6)
    args.reference = 8
    os.makedirs(args.out, exist_ok=True)

    held_out = task.batch(512, torch.Generator().manual_seed(args.seed + 2))
    print(f"associative recall: {task.keys} keys, {task.values} values, {task.pairs} pairs then "
          f"{task.queries} queries per sequence ({task.length} tokens); d = {args.d}, {args.slots} slots, "
          f"{args.steps} steps of {args.batch} sequences; chance {100 / task.values:.1f}%")
    results = {control: train(task, control, args, held_out) for control in CONTROLS}

    rows = ["| control | slots | held-out accuracy | first loss | last loss |", "|---|---|---|---|---|"]
    for control, (_, losses, accuracy, _) in results.items():
        slots = "all tokens" if control == "softmax" else str(args.slots)
        tail = float(np.mean(losses[-max(1, args.steps // 20):]))
        rows.append(f"| {control} | {slots} | {100 * accuracy:.1f}% | {losses[0]:.3f} | {tail:.3f} |")
    table = "\n".join(rows)
    seconds = sum(r[3] for r in results.values())
    print("\n" + table + f"\n\nchance: {100 / task.values:.1f}%; last loss: the mean of the last "
          f"{max(1, args.steps // 20)} steps; trained in {seconds:.0f} s")
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(table + "\n")
    if args.plot:
        plot(args.plot, results, args, task)
        print(f"wrote {args.plot}")

    accuracy = export(results["abc-mlp"][0], task, args, held_out)
    print(f"exported the ABC-MLP model to {os.path.join(args.out, 'recall_mlp.abcw')} and {args.reference} "
          f"held-out sequences with its logits to reference.abcw (accuracy on them {100 * accuracy:.1f}%)")

    if args.short:
        failed = []
        for control, (_, losses, _, _) in results.items():
            first, last = np.mean(losses[:10]), np.mean(losses[-10:])
            if not last < 0.9 * first:
                failed.append(f"{control}: the loss fell from {first:.3f} to {last:.3f}, expected below {0.9 * first:.3f}")
        chance = 1 / task.values
        if not results["softmax"][2] >= 0.9:  # the task is learnable, and learnt, with every token kept
            failed.append(f"softmax: accuracy {100 * results['softmax'][2]:.1f}%, expected at least 90%")
        if not results["abc-mlp"][2] > 4 * chance:
            failed.append(f"abc-mlp: accuracy {100 * results['abc-mlp'][2]:.1f}%, expected above four times chance "
                          f"({400 * chance:.1f}%)")
        for line in failed:
            print("train.py --short: FAILED: " + line)
        if failed:
            return 1
        print("train.py --short: ok (every loss fell by 10% or more, softmax at 90% or more, ABC-MLP above four "
              "times chance)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
