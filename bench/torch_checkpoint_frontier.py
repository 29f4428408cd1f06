#!/usr/bin/env python3
"""PyTorch's side of the checkpointing frontier (issue 25): the peak memory and the time of one
training step, with and without activation checkpointing, for the models of ember's sweeps.

Run with PyTorch 2.x (selective checkpointing needs 2.4 or later), for example the project's venv:

    /work/torch215/bin/python bench/torch_checkpoint_frontier.py \\
        [--models gpt8,gpt16,linear16] [--rounds 5] [--threads 2] [--json OUT]

bench/draw_checkpoint_frontier.py draws these points next to ember's (the same JSON schema).

Models
  gpt8, gpt16  bench/compare_gpt.py's GPT at 8 and 16 blocks with `train_gpt --sweep --context
               256`'s settings: d = 128, 4 heads, context 256, batch 16, dropout 0 (GPTConfig's
               default, which the sweep keeps), vocabulary 114 (the distinct characters of
               Debian's fortunes, as train_gpt prints them). The step: gradients set to None,
               the forward of random token ids [16, 256], the cross-entropy against random
               targets, backward. A block is one transformer block.
  linear16     checkpoint_demo's net, 16 x (Linear(1024, 1024) + ReLU) on a 4096 x 1024 input,
               with the sum of the output as the loss; the step keeps the output alive through
               backward, as checkpoint_demo's does (one activation, 16 MiB, of the peak). A
               block is one Linear + ReLU pair.

Configurations (non-reentrant torch.utils.checkpoint, as ember's checkpoints are)
  none                        no checkpointing
  per_block                   every block checkpointed (the last one too)
  per_block_save_matmuls      every block, with selective checkpointing that keeps the output of
                              every matmul op (aten.mm, addmm, bmm: a Linear on 3-d input runs as
                              addmm on a view, q @ k^T and weights @ v as bmm) and recomputes the
                              rest: ember's save_matmuls
  per_block_save_attention    (GPT) every block, keeping the attention weights, the output of
                              aten._softmax [16, 4, 256, 256] per block: ember's save_attention,
                              which keeps its scaled_softmax op's output
  per_block_save_attention_output
                              (GPT) every block, keeping the heads' output weights @ v, the
                              second aten.bmm of each block ([64, 256, 32], before the view that
                              puts the heads side by side)
  every_other_block           blocks 0, 2, 4, ... checkpointed, the others plain
  sqrt_segments               the blocks in round(sqrt(n)) segments, all checkpointed but the last,
                              by checkpoint_sequential's rule (bench/torch_checkpoint_sweep.py's
                              segments_forward): train_gpt's --checkpoint sqrt, checkpoint_demo's
                              4 segments
The script prints, for each policy, the ops it kept and the ops it let recompute in one step.
(MUST_SAVE and PREFER_RECOMPUTE; in eager mode a PREFER is followed like a MUST.)

Peak: PyTorch has no allocator statistics for the CPU; bench/torch_checkpoint_sweep.py's
measured_peak takes the bytes from the profiler's memory events: after one warm-up step, the
maximum of the running sum of allocations and frees in time order over one step, i.e. the most
bytes the step had alive above what was alive before it (the parameters and the batch), which is
what ember's sweeps report from its allocator. Time: the wall clock of forward, loss and backward
(the gradients are set to None before the clock starts), without the profiler. Each model's
configurations take turns within a round, so that a change in the machine's load falls on all of
them alike; one warm-up round, then --rounds timed ones (as train_gpt --sweep). Reported are the
median step time and the median over rounds of the step's ratio to that round's plain step.
"""
import argparse
import collections
import json
import math
import os
import statistics
import sys
import time

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts, noop_context_fn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_gpt import make_gpt  # noqa: E402
from torch_checkpoint_sweep import linear_relu_stack, measured_peak, segments_forward  # noqa: E402

aten = torch.ops.aten
# aten.matmul and aten.linear are composite: a policy never sees them, only the mm, addmm and bmm
# they turn into (the policy lines the script prints list every op a policy saw).
MATMULS = {aten.mm, aten.addmm, aten.bmm}
SOFTMAX = {aten._softmax, aten.softmax}
SEED = 1  # train_gpt's default --seed


def save_matmuls(op, nth):
    return op.overloadpacket in MATMULS


def save_attention(op, nth):
    return op.overloadpacket in SOFTMAX


def save_attention_output(op, nth):
    return op.overloadpacket == aten.bmm and nth == 2  # 1: q @ k^T, 2: weights @ v


def selective(keep, log):
    """A context_fn for checkpoint(): keep the outputs of the ops keep(op, nth) picks, nth counting
    op's calls in one region (1, 2, ...), recompute the others. Each checkpoint() call asks for new
    contexts, so each region counts from 1; the recompute replays the forward's calls in order, so
    it counts them alike and takes the same decisions. log counts the forward's decisions."""
    def context_fn():
        calls = collections.Counter()

        def policy(ctx, op, *args, **kwargs):
            calls[ctx.is_recompute, op] += 1
            keep_it = keep(op, calls[ctx.is_recompute, op])
            if not ctx.is_recompute:
                log[keep_it][str(op)] += 1
            return CheckpointPolicy.MUST_SAVE if keep_it else CheckpointPolicy.PREFER_RECOMPUTE
        return create_selective_checkpoint_contexts(policy)
    return context_fn


class Checkpointed(torch.nn.Module):
    def __init__(self, block, context_fn=noop_context_fn):
        super().__init__()
        self.block, self.context_fn = block, context_fn

    def forward(self, h):
        return checkpoint(self.block, h, use_reentrant=False, context_fn=self.context_fn)


class Segmented(torch.nn.Module):
    """The blocks in `segments` segments, by checkpoint_sequential's rule (the sweep's)."""

    def __init__(self, blocks, segments):
        super().__init__()
        self.blocks, self.segments = torch.nn.ModuleList(blocks), segments

    def forward(self, h):
        return segments_forward(list(self.blocks), self.segments, h)


def every_block(keep=None):
    def plan(blocks, log):
        context_fn = selective(keep, log) if keep else noop_context_fn
        return [Checkpointed(b, context_fn) for b in blocks]
    return plan


def every_other_block(blocks, log):
    return [Checkpointed(b) if i % 2 == 0 else b for i, b in enumerate(blocks)]


def sqrt_segments(blocks, log):  # train_gpt's --checkpoint sqrt
    return [Segmented(blocks, max(1, round(math.sqrt(len(blocks)))))]


# name: (what runs in place of the blocks, given them and a policy's log; for the GPT only)
CONFIGS = {
    "none": (lambda blocks, log: blocks, False),
    "per_block": (every_block(), False),
    "per_block_save_matmuls": (every_block(save_matmuls), False),
    "per_block_save_attention": (every_block(save_attention), True),
    "per_block_save_attention_output": (every_block(save_attention_output), True),
    "every_other_block": (every_other_block, False),
    "sqrt_segments": (sqrt_segments, False),
}


class Point:
    """One configuration of one model: its own copy of the model (the same seed, the same
    weights), its step, and what was measured."""

    def __init__(self, name, build, train):
        torch.manual_seed(SEED)
        self.name, self.model, blocks = name, *build()
        self.train = train
        self.log = {True: collections.Counter(), False: collections.Counter()}
        replacement = CONFIGS[name][0](list(blocks), self.log)
        del blocks[:]
        for m in replacement:
            blocks.append(m)
        self.peak, self.ms, self.ratios = 0, [], []

    def step(self):
        self.model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        self.train(self.model)
        return 1000 * (time.perf_counter() - start)


def gpt(layers, args):
    cfg = {"vocab_size": args.vocab, "context": 256, "embed_dim": 128, "heads": 4, "layers": layers,
           "dropout": args.dropout}
    batch = 16
    description = (f"bench/compare_gpt.py's GPT: {layers} blocks, d=128, 4 heads, context 256, batch {batch}, "
                   f"vocab {args.vocab}, dropout {args.dropout:g}; loss: cross-entropy")

    def build():
        model = make_gpt(torch, cfg).train()
        return model, model.blocks

    g = torch.Generator().manual_seed(SEED)
    x = torch.randint(0, args.vocab, (batch, cfg["context"]), generator=g)
    y = torch.randint(0, args.vocab, (batch, cfg["context"]), generator=g)

    def train(model, bf16=False):  # the logits are a temporary, as in train_gpt's sweep
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):  # the forward and the loss
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
    return description, build, train, True


def linear16(args):
    layers, batch, width = 16, 4096, 1024

    def build():
        flat = list(linear_relu_stack(layers, width))
        model = torch.nn.Sequential(*(torch.nn.Sequential(*flat[i:i + 2]) for i in range(0, len(flat), 2)))
        return model, model

    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(SEED))
    description = f"examples/checkpoint_demo's net: {layers} x (Linear({width}, {width}) + ReLU), input {batch} x " \
                  f"{width}; loss: the output's sum"

    def train(model):
        out = model(x)  # alive through backward, as checkpoint_demo's step keeps it: one activation more
        out.sum().backward()
    return description, build, train, False


MODELS = {"gpt8": lambda args: gpt(8, args), "gpt16": lambda args: gpt(16, args), "linear16": linear16}


def measure(model_name, args):
    description, build, train, is_gpt = MODELS[model_name](args)
    points = [Point(name, build, train) for name, (_, gpt_only) in CONFIGS.items()
              if (is_gpt or not gpt_only) and (name == "none" or args.configs is None or name in args.configs)]
    for p in points:
        p.peak = measured_peak(p.step, p.model)
        for counter in p.log.values():
            counter.clear()  # the warm-up round's step is the one report_policies shows
    for r in range(args.rounds + 1):  # round 0: warm-up
        if r == 1:
            report_policies(model_name, points)
        for p in points:
            ms = p.step()
            if r > 0:
                p.ms.append(ms)
                p.ratios.append(ms / points[0].ms[-1])
    out = []
    for p in points:
        point = {"config": p.name, "peak_bytes": p.peak, "step_ms": round(statistics.median(p.ms), 2),
                 "time_ratio": round(statistics.median(p.ratios), 4)}
        print(f"frontier model={model_name} config={p.name} peak_bytes={p.peak} step_ms={point['step_ms']:.1f} "
              f"time_ratio={point['time_ratio']:.3f} round_ms={'/'.join(f'{ms:.0f}' for ms in p.ms)}", flush=True)
        out.append(point)
    return {"description": description, "points": out}


def report_policies(model_name, points):
    """Prints what each selective policy kept and recomputed in one step (the warm-up round's)."""
    for p in points:
        for keep_it, word in ((True, "kept"), (False, "recomputed")):
            if p.log[keep_it]:
                ops = ", ".join(f"{op} x{n}" for op, n in sorted(p.log[keep_it].items()))
                print(f"policy model={model_name} config={p.name} {word}: {ops}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ", ".join(MODELS))
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds, after one warm-up round (at least 3)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=114, help="the GPT's vocabulary (train_gpt's distinct characters)")
    parser.add_argument("--dropout", type=float, default=0.0, help="the GPT's dropout (train_gpt's default: 0)")
    parser.add_argument("--json", help="write the points to this file")
    parser.add_argument("--configs", type=lambda s: s.split(","),
                        help="comma-separated subset of the configurations to measure (none, every ratio's base, "
                             "always runs): to measure a few points over more rounds")
    args = parser.parse_args()
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS] + [c for c in args.configs or [] if c not in CONFIGS]
    if unknown or args.rounds < 3:
        parser.error(f"unknown model(s) or configuration(s) {unknown}" if unknown else "--rounds must be at least 3")
    torch.set_num_threads(args.threads)
    load_before = [round(v, 2) for v in os.getloadavg()]
    print(f"torch {torch.__version__}, {args.threads} threads, {args.rounds} rounds, load average {load_before}",
          flush=True)
    results = {m: measure(m, args) for m in models}
    load_after = [round(v, 2) for v in os.getloadavg()]
    print(f"load average after: {load_after}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"framework": "torch", "version": torch.__version__, "threads": args.threads,
                       "rounds": args.rounds, "loadavg_before": load_before, "loadavg_after": load_after,
                       "models": results}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
