#!/usr/bin/env python3
"""PyTorch's side of issue 23's memory comparison: the peak of one GPT training step (train_gpt
--sweep's model at 8 blocks, context 256, batch 16) in float32 and under bfloat16 autocast, with
no checkpointing and with every block but the last checkpointed (torch.utils.checkpoint,
non-reentrant), as ember's `train_gpt --sweep [--amp bf16]` measures its `none` and `blocks`.

    /work/torch215/bin/python bench/torch_amp_memory.py [--layers 8] [--threads 2]

Peaks come from the profiler's allocation events (bench/torch_checkpoint_sweep.py's
measured_peak), in bytes above what was live before the step; bench/RESULTS.md has the numbers.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from torch_checkpoint_frontier import SEED, Checkpointed, gpt  # noqa: E402
from torch_checkpoint_sweep import measured_peak  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=114, help="train_gpt's distinct characters")
    args = parser.parse_args()
    args.dropout = 0.0  # train_gpt's default
    torch.set_num_threads(args.threads)
    _, build, train, _ = gpt(args.layers, args)  # torch_checkpoint_frontier.py's GPT, batch and step
    for amp in ("none", "bf16"):
        for checkpoint in ("none", "blocks"):
            torch.manual_seed(SEED)
            model, blocks = build()
            if checkpoint == "blocks":  # every block but the last, as ember's --checkpoint blocks
                for i in range(len(blocks) - 1):
                    blocks[i] = Checkpointed(blocks[i])

            def step():
                model.zero_grad(set_to_none=True)
                train(model, bf16=amp == "bf16")
            print(f"torch {torch.__version__} layers={args.layers} amp={amp} checkpoint={checkpoint} "
                  f"peak_bytes={measured_peak(step, model)}", flush=True)


if __name__ == "__main__":
    main()
