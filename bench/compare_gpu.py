#!/usr/bin/env python3
"""A training step of the example models on the GPU: ember (bench_gpu) against PyTorch eager.

    bench/compare_gpu.py [--bench BENCH_GPU] [--json out.json] [--repetitions R] [--min-time S]
                         [--warmup W]

Runs BENCH_GPU (default build/gpu/bench/bench_gpu) three times, reads its JSON lines, then times
the same cases in PyTorch on the same GPU (device cuda:0), and prints three tables, one per
setting, with the same columns as compare_training.py: case, ember ms, torch ms, ember/torch
(above 1: ember is slower) and images/s on each side.

  TF32 off   both sides compute float32 matrix products in IEEE float32: ember with cuBLAS's
             default math; PyTorch with matmul and cuDNN TF32 disallowed.
  TF32 on    both may use TF32 tensor cores: ember's cuBLAS handle in CUBLAS_TF32_TENSOR_OP_MATH
             (its convolutions are cuBLAS products); PyTorch with TF32 allowed for matmul and cuDNN.
  bf16       the forward and the loss under bfloat16 autocast on both sides (bench_gpu --amp bf16,
             torch.autocast("cuda", dtype=torch.bfloat16)), the backward and the step outside it,
             TF32 off for what stays in float32.

The cases, models and hyper-parameters are bench_train's (bench/train_cases.h); the PyTorch models
are compare_training.py's (imported from it). The method is bench_gpu's: W warm-up steps, then R
blocks of K steps, K chosen so that a block lasts about S seconds, each block ended by a device
synchronisation; the median over blocks of block time / K. cuDNN's autotuner stays off
(torch.backends.cudnn.benchmark = False, PyTorch's default), as for a plain training script.

It needs the GPU machine's python3, the one with a CUDA build of PyTorch; it imports torch only
when it times (so --help and a syntax check work without it). scripts/gpu-check runs it.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_training import make_models  # noqa: E402

DEFAULT_BENCH = "build/gpu/bench/bench_gpu"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", default=DEFAULT_BENCH, help="the bench_gpu program")
    p.add_argument("--json", help="also write every number to this file")
    p.add_argument("--repetitions", type=int, default=10)
    p.add_argument("--min-time", type=float, default=0.2, help="seconds per block")
    p.add_argument("--warmup", type=int, default=10, help="warm-up steps")
    return p.parse_args()


def run_ember(args, tf32, amp):
    """{case: result dict} from bench_gpu's JSON lines; a failed case carries "error"."""
    cmd = [args.bench, "--repetitions", str(args.repetitions), "--min-time", str(args.min_time),
           "--warmup", str(args.warmup), "--amp", amp] + (["--tf32"] if tf32 else [])
    print("ember: " + " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            results[r["case"]] = r
    if not results:
        sys.exit(f"compare_gpu.py: {args.bench} printed no results (exit status {proc.returncode}):\n{proc.stderr}")
    return results


def set_tf32(torch, allowed):
    """TF32 for float32 matmul and cuDNN convolutions, through whichever API this PyTorch has."""
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision") and hasattr(getattr(conv, "conv", None), "fp32_precision"):
        precision = "tf32" if allowed else "ieee"
        matmul.fp32_precision = precision
        conv.conv.fp32_precision = precision
    else:
        matmul.allow_tf32 = allowed
        conv.allow_tf32 = allowed


def batch_of(case):
    """train_step/<model>/<batch> -> batch."""
    return int(case.rsplit("/", 1)[1])


def torch_step(torch, models, model_name, batch, amp):
    """The case's step on cuda:0, built as bench/train_cases.h builds ember's; under autocast of
    `amp` ("bf16") for the forward and the loss."""
    F = torch.nn.functional
    make_model, make_optimizer, make_batch = models[model_name]
    device = torch.device("cuda:0")
    torch.manual_seed(0)
    model = make_model().to(device)
    model.train()
    optimizer = make_optimizer(model)
    x, y = (t.to(device) for t in make_batch(batch))
    last = {}

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp == "bf16"):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        last["loss"] = loss
    return step, last


def time_torch(torch, step, args):
    """Median ms per step, as bench_gpu measures it."""
    def block(steps):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        return time.perf_counter() - start

    block(max(args.warmup, 1))
    one = block(1)
    steps = max(1, math.ceil(args.min_time / max(one, 1e-6)))
    ms = [1e3 * block(steps) / steps for _ in range(args.repetitions)]
    return statistics.median(ms), min(ms), steps


def run_torch(torch, cases, args, tf32, amp):
    set_tf32(torch, tf32)
    torch.backends.cudnn.benchmark = False
    models = make_models(torch)
    results = {}
    for case in cases:
        model_name = case.split("/")[1]
        print(f"torch: {case} tf32={tf32} amp={amp}", file=sys.stderr, flush=True)
        step, last = torch_step(torch, models, model_name, batch_of(case), amp)
        median, fastest, steps = time_torch(torch, step, args)
        results[case] = {"median_ms": median, "min_ms": fastest, "steps_per_block": steps,
                         "final_loss": float(last["loss"])}
    return results


def table(title, ember, torch_res):
    rows = []
    for case, e in ember.items():
        t = torch_res.get(case, {})
        e_ms, t_ms = e.get("median_ms"), t.get("median_ms")
        rows.append({"case": case, "ember_ms": e_ms, "torch_ms": t_ms,
                     "ratio": e_ms / t_ms if e_ms and t_ms else None,
                     "ember_images_per_s": batch_of(case) / (e_ms / 1e3) if e_ms else None,
                     "torch_images_per_s": batch_of(case) / (t_ms / 1e3) if t_ms else None,
                     "ember_error": e.get("error")})
    def fmt(v, spec):
        return format(v, spec) if v is not None else "-"

    print(f"\n{title}")
    print("| case | ember ms | torch ms | ember/torch | ember img/s | torch img/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['case']} | {fmt(r['ember_ms'], '.3f')} | {fmt(r['torch_ms'], '.3f')} | {fmt(r['ratio'], '.2f')} "
              f"| {fmt(r['ember_images_per_s'], '.0f')} | {fmt(r['torch_images_per_s'], '.0f')} |")
    for r in rows:
        if r["ember_error"]:
            print(f"ember error in {r['case']}: {r['ember_error']}")
    return rows


def main():
    args = parse_args()
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"compare_gpu.py: {args.bench} is not an executable (build the bench_gpu target, or pass --bench)")
    import torch
    if not torch.cuda.is_available():
        sys.exit("compare_gpu.py: this PyTorch sees no CUDA device")
    report = {"torch_version": torch.__version__, "torch_cuda": torch.version.cuda,
              "device": torch.cuda.get_device_name(0), "repetitions": args.repetitions,
              "min_time_s": args.min_time, "warmup_steps": args.warmup, "tables": {}}
    print(f"# {report['device']}; torch {torch.__version__} (CUDA {torch.version.cuda}); medians of "
          f"{args.repetitions} blocks of ~{args.min_time} s after {args.warmup} warm-up steps; ratio > 1: ember slower")
    settings = [("ieee", False, "none", "TF32 off on both sides (IEEE float32)"),
                ("tf32", True, "none", "TF32 allowed on both sides"),
                ("bf16", False, "bf16", "bfloat16 autocast on both sides (TF32 off)")]
    for key, tf32, amp, title in settings:
        ember = run_ember(args, tf32, amp)
        torch_res = run_torch(torch, [c for c in ember if "median_ms" in ember[c]], args, tf32, amp)
        report["tables"][key] = {"ember": ember, "torch": torch_res, "rows": table(title, ember, torch_res)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
