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

from compare_gpt import make_gpt  # noqa: E402
from torch_checkpoint_frontier import SEED, Checkpointed  # noqa: E402
from torch_checkpoint_sweep import measured_peak  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=114, help="train_gpt's distinct characters")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = {"vocab_size": args.vocab, "context": 256, "embed_dim": 128, "heads": 4, "layers": args.layers,
           "dropout": 0.0}
    g = torch.Generator().manual_seed(SEED)
    x = torch.randint(0, args.vocab, (16, 256), generator=g)
    y = torch.randint(0, args.vocab, (16, 256), generator=g)
    for amp in ("none", "bf16"):
        for checkpoint in ("none", "blocks"):
            torch.manual_seed(SEED)
            model = make_gpt(torch, cfg).train()
            if checkpoint == "blocks":  # every block but the last, as ember's --checkpoint blocks
                for i in range(len(model.blocks) - 1):
                    model.blocks[i] = Checkpointed(model.blocks[i])

            def step():
                model.zero_grad(set_to_none=True)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp == "bf16"):
                    loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
                loss.backward()
            print(f"torch {torch.__version__} layers={args.layers} amp={amp} checkpoint={checkpoint} "
                  f"peak_bytes={measured_peak(step, model)}", flush=True)


if __name__ == "__main__":
    main()
