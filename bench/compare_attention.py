#!/usr/bin/python3
"""scaled_dot_product_attention forward + backward, ember's fused path against PyTorch's SDPA.

    DIR/bin/python bench/compare_attention.py [--bench build/release/bench/bench_attention]
        [--lengths 512,1024,2048,4096] [--threads 1,2] [--dtypes float32,bfloat16]
        [--rounds 3] [--reps 3] [--batch 4] [--heads 12] [--head-dim 64] [--json OUT]

Run with PyTorch 2.15 (README's "PyTorch 2.15" virtualenv): the anchor is what a PyTorch user
writes, F.scaled_dot_product_attention(q, k, v, is_causal=...), which takes PyTorch's fused CPU
kernel. Each point (length, causal or not, dtype, threads) is one process per side per round:
bench_attention for ember, this script with --torch-worker for PyTorch, both timing `reps` steps
after one untimed step and reporting the median. Rounds are interleaved (every point of round 1,
both sides, then round 2, ...), so both sides see the same machine load; the table gives the
medians over rounds, their ratio, and each side's peak bytes above the inputs during a step:
ember's from its allocator, PyTorch's from its profiler's memory events (the method of
bench/torch_checkpoint_sweep.py). The CPU, the load average before and after and PyTorch's
version are printed with the table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def torch_worker(argv):
    """Times PyTorch's SDPA at one point; prints 'ms=... peak_bytes=...' like bench_attention."""
    import time

    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    p = argparse.ArgumentParser()
    for name in ("batch", "heads", "length", "head-dim", "threads", "reps"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--dtype", required=True)
    p.add_argument("--causal", action="store_true")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    shape = (a.batch, a.heads, a.length, a.head_dim)
    q, k, v = (torch.randn(shape).to(dtype).requires_grad_() for _ in range(3))
    g = torch.randn(shape).to(dtype)

    def step():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
        return torch.autograd.grad(out, (q, k, v), g)

    step()
    times = []
    for _ in range(a.reps):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    live = peak = 0
    for e in events:
        live += e.nbytes()
        peak = max(peak, live)
    print("ms=%.3f peak_bytes=%d" % (statistics.median(times), peak))


def parse_line(out, cmd):
    for line in out.stdout.splitlines():
        if line.startswith("ms="):
            fields = dict(f.split("=", 1) for f in line.split())
            return float(fields["ms"]), int(fields["peak_bytes"])
    sys.exit("compare_attention.py: %s failed:\n%s%s" % (" ".join(cmd), out.stdout[-2000:], out.stderr[-2000:]))


def run(cmd):
    return parse_line(subprocess.run(cmd, capture_output=True, text=True), cmd)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        return torch_worker(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", default="build/release/bench/bench_attention")
    p.add_argument("--lengths", default="512,1024,2048,4096")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--json")
    a = p.parse_args()
    import torch

    points = [(L, causal, dtype, threads) for threads in map(int, a.threads.split(","))
              for dtype in a.dtypes.split(",") for L in map(int, a.lengths.split(","))
              for causal in (False, True)]
    load_before = [round(x, 2) for x in os.getloadavg()]
    results = {pt: {"ember": [], "torch": []} for pt in points}
    for r in range(a.rounds):
        for pt in points:
            L, causal, dtype, threads = pt
            common = ["--batch", str(a.batch), "--heads", str(a.heads), "--length", str(L), "--head-dim",
                      str(a.head_dim), "--threads", str(threads), "--reps", str(a.reps), "--dtype", dtype]
            common += ["--causal"] if causal else []
            results[pt]["ember"].append(run([a.bench, "--backend", "fused", *common]))
            results[pt]["torch"].append(run([sys.executable, os.path.abspath(__file__), "--torch-worker", *common]))
        print("round %d of %d done" % (r + 1, a.rounds), file=sys.stderr, flush=True)
    load_after = [round(x, 2) for x in os.getloadavg()]
    print("CPU: %s; PyTorch %s; B=%d H=%d d=%d; %d interleaved rounds of %d steps per side; load average %s before, "
          "%s after" % (cpu_name(), torch.__version__, a.batch, a.heads, a.head_dim, a.rounds, a.reps, load_before,
                        load_after))
    print("| threads | dtype | L | causal | ember ms | PyTorch SDPA ms | ratio | ember peak MiB | PyTorch peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for pt in points:
        L, causal, dtype, threads = pt
        e_ms = statistics.median(t for t, _ in results[pt]["ember"])
        t_ms = statistics.median(t for t, _ in results[pt]["torch"])
        e_peak = max(b for _, b in results[pt]["ember"])
        t_peak = max(b for _, b in results[pt]["torch"])
        rows.append({"threads": threads, "dtype": dtype, "L": L, "causal": causal, "ember_ms": e_ms, "torch_ms": t_ms,
                     "ratio": e_ms / t_ms, "ember_peak": e_peak, "torch_peak": t_peak, "rounds": results[pt]})
        print("| %d | %s | %d | %s | %.1f | %.1f | %.2fx | %.1f | %.1f |" % (
            threads, dtype, L, "yes" if causal else "no", e_ms, t_ms, e_ms / t_ms, e_peak / 2**20, t_peak / 2**20))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu_name(), "torch": torch.__version__, "load_before": load_before,
                       "load_after": load_after, "rows": [{**r, "rounds": {k: v for k, v in r["rounds"].items()}}
                                                           for r in rows]}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
