#!/usr/bin/python3
"""Side-by-side timings of ember (bench_core) and PyTorch on the same shapes, on the CPU.

    bench/compare_torch.py [BENCH_CORE] [--threads N] [--json out.json] [--filter REGEX]

Runs BENCH_CORE (default build/release/bench/bench_core) with --benchmark_format=json, then
times every case it reported in PyTorch with torch.set_num_threads(N), and prints one table:
case, ember ms, torch ms, ember/torch (above 1: ember is slower).

Both sides use one methodology: a warm-up, then REPETITIONS blocks of about MIN_TIME seconds
each (0.5 s per case with the defaults), and the median over blocks of the wall-clock time per
iteration. On ember's side that is Google Benchmark's --benchmark_min_warmup_time,
--benchmark_min_time, --benchmark_repetitions and the "median" aggregate of real_time.

PyTorch must come from Debian's interpreter (/usr/bin/python3, package python3-torch); the
python3 first on PATH may have none. Case names are "<op>/<dims>" (bench/bench_core.cpp);
TORCH_CASES below maps each op to the PyTorch code for it, and the dims come from the name.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

DEFAULT_BENCH = "build/release/bench/bench_core"
TIME_UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}  # to milliseconds


def import_torch():
    try:
        import torch  # noqa: F401  (imported here so a missing torch gets a clear message)
    except ImportError:
        sys.exit(
            f"compare_torch.py: PyTorch is not importable from {sys.executable}.\n"
            "Run the script with Debian's interpreter, which has python3-torch:\n"
            f"    /usr/bin/python3 {' '.join(sys.argv)}\n"
            "(install it with: apt-get install python3-torch)"
        )
    return torch


# --------------------------------------------------------------------------------------------
# ember side


def run_ember(bench, threads, min_time, repetitions, warmup, filter_regex):
    """Runs bench_core and returns ({case: median ms or error string}, context)."""
    if not os.access(bench, os.X_OK):
        sys.exit(f"compare_torch.py: {bench} is not an executable; build bench_core first "
                 "(cmake -DEMBER_BUILD_BENCH=ON) or pass its path")
    cmd = [bench, f"--threads={threads}", "--benchmark_format=json",
           f"--benchmark_min_time={min_time}", f"--benchmark_min_warmup_time={warmup}",
           f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=true"]
    if filter_regex:
        cmd.append(f"--benchmark_filter={filter_regex}")
    print("running:", " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"compare_torch.py: bench_core exited with status {proc.returncode}")
    report = json.loads(proc.stdout)
    results = {}
    for b in report["benchmarks"]:
        # "matmul/256x784x512/real_time" (UseRealTime adds the suffix) -> "matmul/256x784x512"
        case = re.sub(r"/real_time$", "", b["run_name"])
        if b.get("error_occurred"):
            results[case] = "ERROR: " + b.get("error_message", "?")
        elif b.get("aggregate_name") == "median":
            results[case] = b["real_time"] * TIME_UNITS[b["time_unit"]]
        elif b.get("run_type") == "iteration" and case not in results:  # --benchmark_repetitions=1
            results[case] = b["real_time"] * TIME_UNITS[b["time_unit"]]
    context = report.get("context", {})
    if context.get("ember_threads") not in (None, str(threads)):
        print(f"warning: bench_core ran with {context['ember_threads']} threads, not {threads}", file=sys.stderr)
    return results, context


# --------------------------------------------------------------------------------------------
# PyTorch side: one table, op -> builder(*dims) -> a step to time


def make_torch_cases(torch):
    F = torch.nn.functional
    randn = torch.randn

    def call(fn, *inputs):
        return lambda: fn(*inputs)

    def backward_of(fn):  # dL/dx of y = fn(x) for a fixed g, the graph kept (bench_core's *_bwd)
        def build(r, c):
            x = randn(r, c, requires_grad=True)
            g = randn(r, c)
            y = fn(x)
            return lambda: torch.autograd.grad(y, x, g, retain_graph=True)[0]
        return build

    def cross_entropy_step(n, c):
        logits = randn(n, c, requires_grad=True)
        target = torch.randint(0, c, (n,))

        def step():
            logits.grad = None
            F.cross_entropy(logits, target).backward()
            return logits.grad
        return step

    def mlp_step(batch, *widths):
        # y = x @ W + b with W [in, out], as bench_core does; grads reset to None, no optimizer.
        params = []
        for fan_in, fan_out in zip(widths, widths[1:]):
            scale = 1.0 / math.sqrt(fan_in)
            params += [(randn(fan_in, fan_out) * scale).requires_grad_(),
                       (randn(fan_out) * scale).requires_grad_()]
        x = randn(batch, widths[0])
        target = torch.randint(0, widths[-1], (batch,))

        def step():
            for p in params:
                p.grad = None
            h = x
            for i in range(0, len(params), 2):
                h = torch.add(torch.matmul(h, params[i]), params[i + 1])
                if i + 2 < len(params):
                    h = torch.relu(h)
            loss = F.cross_entropy(h, target)
            loss.backward()
            return loss
        return step

    return {
        "matmul": lambda m, k, n: call(torch.matmul, randn(m, k), randn(k, n)),
        "bmm": lambda b, m, k, n: call(torch.matmul, randn(b, m, k), randn(b, k, n)),
        "matmul_tA": lambda m, k, n: call(torch.matmul, randn(k, m).t(), randn(k, n)),
        "matmul_bf16": lambda m, k, n: call(torch.matmul, randn(m, k).bfloat16(), randn(k, n).bfloat16()),
        "bmm_bf16": lambda b, m, k, n: call(torch.matmul, randn(b, m, k).bfloat16(), randn(b, k, n).bfloat16()),
        "add": lambda r, c: call(torch.add, randn(r, c), randn(r, c)),
        "add_bias": lambda r, c: call(torch.add, randn(r, c), randn(c)),
        "mul": lambda r, c: call(torch.mul, randn(r, c), randn(r, c)),
        "relu": lambda r, c: call(torch.relu, randn(r, c)),
        "gelu": lambda r, c: call(F.gelu, randn(r, c)),  # exact (erf) form, as ember's
        "exp": lambda r, c: call(torch.exp, randn(r, c)),
        "sum": lambda r, c: call(torch.sum, randn(r, c)),
        "sum_dim0": lambda r, c: call(lambda x: torch.sum(x, 0), randn(r, c)),
        "sum_dim1": lambda r, c: call(lambda x: torch.sum(x, 1), randn(r, c)),
        "mean": lambda r, c: call(torch.mean, randn(r, c)),
        "max_dim1": lambda r, c: call(lambda x: torch.amax(x, 1), randn(r, c)),
        "softmax_dim1": lambda r, c: call(lambda x: torch.softmax(x, 1), randn(r, c)),
        "sigmoid_bwd": backward_of(torch.sigmoid),
        "tanh_bwd": backward_of(torch.tanh),
        "silu_bwd": backward_of(F.silu),
        "gelu_bwd": backward_of(F.gelu),
        "gelu_tanh_bwd": backward_of(lambda x: F.gelu(x, approximate="tanh")),
        "softmax_bwd": backward_of(lambda x: torch.softmax(x, 1)),
        "layer_norm_bwd": backward_of(lambda x: F.layer_norm(x, x.shape[1:])),
        "cross_entropy_fwd_bwd": cross_entropy_step,
        "mlp_step": mlp_step,
    }


def time_step(step, min_time, repetitions, warmup):
    """Median wall-clock ms per iteration over `repetitions` blocks of about min_time seconds."""
    start = time.perf_counter()
    iters = 0
    while True:  # warm-up: at least 3 iterations and `warmup` seconds
        step()
        iters += 1
        elapsed = time.perf_counter() - start
        if iters >= 3 and elapsed >= warmup:
            break
    per_iter = elapsed / iters
    n = max(1, math.ceil(min_time / per_iter))
    blocks = []
    for _ in range(repetitions):
        start = time.perf_counter()
        for _ in range(n):
            step()
        blocks.append((time.perf_counter() - start) / n)
    return statistics.median(blocks) * 1e3


def run_torch(torch, cases, threads, min_time, repetitions, warmup):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    builders = make_torch_cases(torch)
    results = {}
    for case in cases:
        op, _, dims = case.partition("/")
        if op not in builders:
            results[case] = "no PyTorch mapping"
            continue
        step = builders[op](*(int(d) for d in dims.split("x")))
        results[case] = time_step(step, min_time, repetitions, warmup)
    return results


# --------------------------------------------------------------------------------------------


def fmt_ms(v):
    return f"{v:.4f}" if isinstance(v, float) else "-"


def print_errors(rows):
    """Prints in full every case whose time is an error message (a failed check or an ember::Error)."""
    for r in rows:
        for side in ("ember_ms", "torch_ms"):
            if isinstance(r[side], str) and r[side] != "-":
                print(f"{r['case']}: {side.split('_')[0]}: {r[side]}")


def parse_training_comparison_args(doc, program, default_binary, default_flags=()):
    """The command line of the scripts that run an example program against PyTorch in rounds
    (compare_gpt.py, compare_finetune.py): PROGRAM [--threads N] [--rounds R] [--json OUT] [-- FLAGS...],
    the flags after -- going to the program (default_flags when there are none)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(program, nargs="?", default=default_binary, help=f"{program} binary (default {default_binary})")
    parser.add_argument("--threads", type=int, default=2, help="threads for both sides (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="ember-then-PyTorch rounds (default 3)")
    parser.add_argument("--json", metavar="OUT", help="also save the figures as JSON")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    args.flags = argv[split + 1:] or list(default_flags)
    if args.threads < 1 or args.rounds < 1:
        parser.error("--threads and --rounds must be positive")
    return args


def save_rounds_json(path, args, torch, load_before, rounds):
    """The figures of a compare_gpt.py / compare_finetune.py run, for --json."""
    with open(path, "w") as f:
        json.dump({"flags": args.flags, "threads": args.threads, "torch": torch.__version__,
                   "load_before": load_before, "rounds": rounds}, f, indent=2)


def parse_comparison_args(doc, binary, default_bench, min_time, warmup):
    """The command line every ember-vs-PyTorch comparison script takes."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("bench", nargs="?", default=default_bench, help=f"{binary} binary (default {default_bench})")
    parser.add_argument("--threads", type=int, default=1, help="threads for both ember and PyTorch (default 1)")
    parser.add_argument("--json", metavar="OUT", help="also save the table as JSON")
    parser.add_argument("--filter", help="regex of cases to run (Google Benchmark's --benchmark_filter)")
    parser.add_argument("--min-time", type=float, default=min_time, help=f"seconds per block (default {min_time})")
    parser.add_argument("--repetitions", type=int, default=5, help="blocks per case (default 5)")
    parser.add_argument("--warmup", type=float, default=warmup, help=f"warm-up seconds per case (default {warmup})")
    args = parser.parse_args()
    if args.threads < 1:
        parser.error("--threads must be positive")
    return args


def main():
    args = parse_comparison_args(__doc__, "bench_core", DEFAULT_BENCH, min_time=0.1, warmup=0.05)

    torch = import_torch()  # fail before spending time on ember
    ember, context = run_ember(args.bench, args.threads, args.min_time, args.repetitions, args.warmup, args.filter)
    torch_ms = run_torch(torch, [c for c in ember if isinstance(ember[c], float)], args.threads, args.min_time,
                         args.repetitions, args.warmup)

    rows = []
    for case, e in ember.items():
        t = torch_ms.get(case, "-")
        ratio = e / t if isinstance(e, float) and isinstance(t, float) else None
        rows.append({"case": case, "ember_ms": e, "torch_ms": t, "ratio": ratio})

    print(f"# threads {args.threads}; torch {torch.__version__}; medians of {args.repetitions} blocks of "
          f"~{args.min_time} s; ratio > 1: ember slower")
    width = max([len("case")] + [len(r["case"]) for r in rows])
    print(f"| {'case':<{width}} | {'ember ms':>10} | {'torch ms':>10} | {'ember/torch':>11} |")
    print(f"|{'-' * (width + 2)}|{'-' * 11}:|{'-' * 11}:|{'-' * 12}:|")
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        print(f"| {r['case']:<{width}} | {fmt_ms(r['ember_ms']):>10} | {fmt_ms(r['torch_ms']):>10} | {ratio:>11} |")
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"geometric mean of ember/torch over {len(ratios)} cases: {geo:.2f}")
    print_errors(rows)

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "torch_version": torch.__version__,
                       "min_time_s": args.min_time, "repetitions": args.repetitions,
                       "ember_context": context, "rows": rows}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
