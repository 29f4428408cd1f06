#!/usr/bin/python3
"""Side-by-side timings of a training step of the example models in ember (bench_train) and PyTorch.

    bench/compare_training.py [BENCH_TRAIN] [--threads N] [--json out.json] [--filter REGEX]

Runs BENCH_TRAIN (default build/release/bench/bench_train) with --benchmark_format=json, then
times the same cases in PyTorch with torch.set_num_threads(N), and prints one table: case,
ember ms, torch ms, ember/torch (above 1: ember is slower), and images/s on each side.

The cases (bench/bench_train.cpp) are "train_step/<model>/<batch>", "train_step_bf16/<model>/<batch>"
(the forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16)), "forward/<model>/<batch>"
and "optimizer_step/<model>/<batch>" for the models of examples/models.h, rebuilt here with the same
architecture:
  mlp       784-512-512-10, ReLU and Dropout(0.2) after each hidden layer;
            SGD lr 0.05, momentum 0.9
  resnet20  for 1x28x28: 3x3 conv 16 (no bias) + BN + ReLU, three stages of three BasicBlocks
            (16, 32, 64 channels, stride 2 entering stages 2 and 3, 1x1 conv + BN shortcut when
            the shape changes), adaptive average pooling, Linear 64 -> 10;
            SGD lr 0.1, momentum 0.9, weight decay 5e-4
  gpt       train_gpt's GPT (compare_gpt.py's make_gpt, whose attention is F.scaled_dot_product_attention
            where the PyTorch running this has it, 2.0 and later, else written out with a softmax;
            compare_gpt.py prints both): 4 pre-LayerNorm blocks, d 128, 4 heads,
            context 128, a 96-character vocabulary; batch 16 windows of random ids; AdamW lr 2e-3,
            betas (0.9, 0.99), weight decay 0.1 on the Linear weights only; the loss is the
            cross-entropy over every position (the "img/s" columns count windows)
A training step is forward, cross_entropy, zero_grad (set_to_none=True, ember's default; torch
1.13's default is False), backward, optimizer step, on one fixed random batch in training mode.
"forward" is the model's forward alone in training mode with autograd on; "optimizer_step" is the
optimizer step alone, over the gradients of one training step (torch 1.13 runs its for-loop SGD
and AdamW on the CPU: foreach is off by default there).

Methodology and the ember runner are compare_torch.py's (imported from it): a warm-up, then
REPETITIONS blocks of about MIN_TIME seconds, median over blocks of the wall-clock time per
iteration. A ResNet step takes longer than a block, so its blocks are single steps.

OpenMP threads that spin while waiting ruin timings on a busy machine (Note [OpenMP wait policy]
in examples/training.h), so unless OMP_WAIT_POLICY is already set this script sets it to PASSIVE
before PyTorch is imported and before bench_train starts. Run it with Debian's /usr/bin/python3
(python3-torch).
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_gpt import make_gpt  # noqa: E402
from compare_torch import (fmt_ms, import_torch, parse_comparison_args, print_errors, run_ember,  # noqa: E402
                           time_step)

DEFAULT_BENCH = "build/release/bench/bench_train"
GPT_VOCAB, GPT_CONTEXT = 96, 128  # bench/train_cases.h's kGptVocab and kGptContext


# --------------------------------------------------------------------------------------------
# The models, as examples/models.cpp builds them


def make_models(torch):
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self, dropout=0.2):
            super().__init__()
            self.net = nn.Sequential(
                nn.Flatten(),
                nn.Linear(784, 512), nn.ReLU(), nn.Dropout(dropout),
                nn.Linear(512, 512), nn.ReLU(), nn.Dropout(dropout),
                nn.Linear(512, 10))

        def forward(self, x):
            return self.net(x)

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            h = torch.relu(self.bn1(self.conv1(x)))
            h = self.bn2(self.conv2(h))
            return torch.relu(h + self.shortcut(x))

    class ResNet20(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem_conv = nn.Conv2d(1, 16, 3, padding=1, bias=False)
            self.stem_bn = nn.BatchNorm2d(16)
            blocks, cin = [], 16
            for cout in (16, 32, 64):
                for i in range(3):
                    blocks.append(BasicBlock(cin, cout, 2 if i == 0 and cout != 16 else 1))
                    cin = cout
            self.blocks = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(64, 10)
            for m in self.modules():  # as ember's ResNet20 (and torchvision's ResNets)
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            h = self.blocks(torch.relu(self.stem_bn(self.stem_conv(x))))
            return self.fc(torch.flatten(self.pool(h), 1))

    def sgd(lr, weight_decay=0.0):
        return lambda model: torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)

    def gpt():
        return make_gpt(torch, {"vocab_size": GPT_VOCAB, "embed_dim": 128, "context": GPT_CONTEXT, "heads": 4,
                                "layers": 4, "dropout": 0.0})

    def gpt_adamw(model):  # train_gpt's: weight decay on the Linear weights only
        linear = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
        decay = [p for p in model.parameters() if id(p) in linear]
        rest = [p for p in model.parameters() if id(p) not in linear]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                 lr=2e-3, betas=(0.9, 0.99))

    def images(batch):
        return torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))

    def windows(batch):
        ids = torch.randint(0, GPT_VOCAB, (batch, GPT_CONTEXT))
        return ids, torch.randint(0, GPT_VOCAB, (batch, GPT_CONTEXT))

    # model name -> (constructor, optimizer factory, batch factory), as bench/train_cases.h's kModels
    return {"mlp": (MLP, sgd(0.05), images), "resnet20": (ResNet20, sgd(0.1, 5e-4), images),
            "gpt": (gpt, gpt_adamw, windows)}


def make_torch_step(torch, models, kind, model_name, batch):
    """Returns (step, final_loss) for one case; final_loss() is the last step's loss or None."""
    F = torch.nn.functional
    make_model, make_optimizer, make_batch = models[model_name]
    torch.manual_seed(0)
    model = make_model()
    model.train()
    optimizer = make_optimizer(model)
    x, y = make_batch(batch)
    last = {}

    if kind == "forward":
        return (lambda: model(x)), (lambda: None)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=kind == "train_step_bf16"):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        last["loss"] = loss
        return loss
    if kind == "optimizer_step":
        step()  # the gradients, and the momentum buffers
        return optimizer.step, (lambda: None)
    return step, (lambda: float(last["loss"]) if "loss" in last else None)


def run_torch(torch, cases, threads, min_time, repetitions, warmup):
    """{case: {"ms": median ms, "final_loss": ...} or an error string}."""
    torch.set_num_threads(threads)
    models = make_models(torch)
    results = {}
    for case in cases:
        m = re.fullmatch(r"(train_step|train_step_bf16|forward|optimizer_step)/(\w+)/(\d+)", case)
        if not m or m.group(2) not in models:
            results[case] = "no PyTorch mapping"
            continue
        step, final_loss = make_torch_step(torch, models, m.group(1), m.group(2), int(m.group(3)))
        print(f"torch: {case}", file=sys.stderr, flush=True)
        results[case] = {"ms": time_step(step, min_time, repetitions, warmup), "final_loss": final_loss()}
    return results


# --------------------------------------------------------------------------------------------


def images_per_s(case, ms):
    if case.startswith("optimizer_step/") or not isinstance(ms, float):
        return None
    return int(case.rsplit("/", 1)[1]) / (ms / 1e3)


def load_average():
    return [round(v, 2) for v in os.getloadavg()]


def main():
    args = parse_comparison_args(__doc__, "bench_train", DEFAULT_BENCH, min_time=0.5, warmup=0.5)
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"compare_training.py: {args.bench} is not an executable; build it first "
                 "(cmake --build BUILD_DIR --target bench_train) or pass its path")

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read by libgomp when torch loads it
    load_before = load_average()
    torch = import_torch()
    ember, context = run_ember(args.bench, args.threads, args.min_time, args.repetitions, args.warmup, args.filter)
    load_middle = load_average()
    torch_res = run_torch(torch, [c for c in ember if isinstance(ember[c], float)], args.threads, args.min_time,
                          args.repetitions, args.warmup)
    load_after = load_average()

    rows = []
    for case, e in ember.items():
        t = torch_res.get(case, "-")
        t_ms = t["ms"] if isinstance(t, dict) else t
        both = isinstance(e, float) and isinstance(t_ms, float)
        rows.append({"case": case, "ember_ms": e, "torch_ms": t_ms, "ratio": e / t_ms if both else None,
                     "ember_images_per_s": images_per_s(case, e), "torch_images_per_s": images_per_s(case, t_ms),
                     "torch_final_loss": t.get("final_loss") if isinstance(t, dict) else None})

    print(f"# threads {args.threads}; torch {torch.__version__}; OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}; "
          f"medians of {args.repetitions} blocks of ~{args.min_time} s; ratio > 1: ember slower")
    print(f"# load average (1/5/15 min): before {load_before}, between ember and torch {load_middle}, "
          f"after {load_after}")
    width = max([len("case")] + [len(r["case"]) for r in rows])
    print(f"| {'case':<{width}} | {'ember ms':>10} | {'torch ms':>10} | {'ember/torch':>11} "
          f"| {'ember img/s':>11} | {'torch img/s':>11} |")
    print(f"|{'-' * (width + 2)}|{'-' * 11}:|{'-' * 11}:|{'-' * 12}:|{'-' * 12}:|{'-' * 12}:|")
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        ips = [f"{v:.0f}" if v is not None else "-" for v in (r["ember_images_per_s"], r["torch_images_per_s"])]
        print(f"| {r['case']:<{width}} | {fmt_ms(r['ember_ms']):>10} | {fmt_ms(r['torch_ms']):>10} | {ratio:>11} "
              f"| {ips[0]:>11} | {ips[1]:>11} |")
    print_errors(rows)

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "torch_version": torch.__version__,
                       "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
                       "min_time_s": args.min_time, "repetitions": args.repetitions, "warmup_s": args.warmup,
                       "load_average": {"before": load_before, "middle": load_middle, "after": load_after},
                       "ember_context": context, "rows": rows}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
