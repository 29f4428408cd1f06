#!/usr/bin/python3
"""PyTorch's side of checkpoint_demo's sweep: the peak memory of one training step of the same
16 x (Linear(1024, 1024) + ReLU) stack on a 4096 x 1024 input, plain and checkpointed in 1, 2, 4,
8 and 16 segments, to put next to examples/checkpoint_demo's table (docs/checkpointing.md).

Run with Debian's PyTorch:

    /usr/bin/python3 bench/torch_checkpoint_sweep.py [--layers 16 --batch 4096 --width 1024]

The step is checkpoint_demo's: gradients set to None, forward, the sum of the output as the loss,
backward. The segments follow checkpoint_sequential's rule (equal runs of modules, the last one
plain) with non-reentrant checkpoints, as ember's are; PyTorch 1.13's checkpoint_sequential itself
only has the reentrant kind, which gives the parameters no gradient when the input needs none.

PyTorch has no allocator statistics for the CPU, so the bytes come from its profiler: with
profile_memory it records every allocation and free of the CPU allocator as a "[memory]" event
with its size; the running sum of those events in time order, from the start of the step, is the
bytes the step added, and its maximum the peak: what checkpoint_demo reports from ember's
allocator.
"""
import argparse

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.checkpoint import checkpoint


def segments_forward(modules, segments, x):
    size = len(modules) // segments

    def run(start, end):
        def forward(h):
            for m in modules[start:end]:
                h = m(h)
            return h
        return forward

    end = 0
    for s in range(segments - 1):
        start, end = s * size, (s + 1) * size
        x = checkpoint(run(start, end), x, use_reentrant=False)
    return run(end, len(modules))(x)


def step(seq, x, segments):
    seq.zero_grad(set_to_none=True)
    out = seq(x) if segments is None else segments_forward(list(seq), segments, x)
    out.sum().backward()


def measured_peak(step, module):
    """The peak bytes one call of step() adds to what was live before it (the module docstring).
    bench/torch_checkpoint_frontier.py measures its steps with this too."""
    step()  # warm-up: the allocator and the profiler's first-call costs
    module.zero_grad(set_to_none=True)  # so that the measured step does not begin by freeing them
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    # PyTorch 1.13's events tell their start in microseconds; 2.x replaced start_us with start_ns.
    when = (lambda e: e.start_ns()) if events and hasattr(events[0], "start_ns") else (lambda e: e.start_us())
    live = peak = 0
    for e in sorted(events, key=when):
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def linear_relu_stack(layers, width):
    """checkpoint_demo's net: layers x (Linear(width, width) + ReLU), as one flat Sequential."""
    modules = []
    for _ in range(layers):
        modules += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*modules)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--width", type=int, default=1024)
    args = parser.parse_args()
    torch.manual_seed(0)
    seq = linear_relu_stack(args.layers, args.width)
    x = torch.randn(args.batch, args.width)
    print("torch %s, %d x (Linear(%d, %d) + ReLU), input %d x %d" % (torch.__version__, args.layers, args.width,
                                                                      args.width, args.batch, args.width))
    counts = [None] + [s for s in (1, 2, 4, 8, 16) if s <= args.layers]
    for segments in counts:
        peak = measured_peak(lambda: step(seq, x, segments), seq)
        label = "none" if segments is None else str(segments)
        print("sweep segments=%s peak_bytes=%d peak_mib=%.1f" % (label, peak, peak / 2**20), flush=True)


if __name__ == "__main__":
    main()
