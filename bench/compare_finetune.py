#!/usr/bin/python3
"""Fine-tunes examples/finetune_text's BERT in ember and in PyTorch from the same start, and compares.

    bench/compare_finetune.py [FINETUNE_TEXT] [--threads N] [--rounds R] [--json OUT] [-- FLAGS...]

"The same" is what finetune_text --export writes (Note [Exporting a run for PyTorch] in
examples/run_export.h): the initial weights (all-MiniLM-L6-v2 and the new head), every training
batch in step order and the test set. PyTorch then trains the same model on them with the same
optimizer (AdamW, weight decay on the Linear weights only) and the same schedule (linear warm-up
from 0 over warmup_ratio of the steps, then linear decay to 0), a LambdaLR. Dropout is 0 on both
sides (--dropout 0 is added), so the two runs differ only in rounding. Each round runs ember's
finetune_text and then the PyTorch loop, so both see the same machine load; the table reports
each side's mean training loss over the steps, its test loss and accuracy after them, and its
training tokens per second (tokens: the texts' real tokens, without padding; the time of the
training steps only; median over rounds), and the load average before and after; then the step
time's ratio (the inverse of the tokens/s ratio, both sides training on the same batches), by the
sides' medians and by the median of the rounds' ratios.

The PyTorch loop does per step what ember's fit does: forward, cross-entropy, zero_grad,
backward, optimizer step, scheduler step, and reading back the loss and the number of correct
guesses. Flags after "--" go to finetune_text (default: --train-limit 1600 --epochs 1, 50 steps
of 32 texts); --threads, --dropout 0 and --probe-epochs 1 are added (the probe is not compared).

Run with a PyTorch 2 interpreter (the model uses torch's scaled_dot_product_attention). The
model, as examples/bert.cpp builds it (Note [A BERT encoder] in examples/bert.h): a post-LayerNorm
BERT encoder, mean pooling over the attention mask and a Linear head; each batch is first cut to
its longest text. Parameter names match ember's state dict, so the weights load strictly.
"""
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
from compare_torch import import_torch, parse_training_comparison_args, save_rounds_json  # noqa: E402

DEFAULT_FINETUNE = "build/release/examples/finetune_text"
DEFAULT_FLAGS = ["--train-limit", "1600", "--epochs", "1"]


def run_ember(binary, threads, flags, work_dir, export):
    """Runs finetune_text; returns its result line's fields and the mean training loss of its CSV."""
    metrics = os.path.join(work_dir, "metrics.csv")
    cmd = [binary, "--threads", str(threads), "--dropout", "0", "--probe-epochs", "1", "--csv", metrics, *flags]
    if export:
        cmd += ["--export", work_dir]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare_finetune.py: {' '.join(cmd)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    result = [line for line in out.stdout.splitlines() if line.startswith("result ")]
    if not result:
        sys.exit(f"compare_finetune.py: no result line from {' '.join(cmd)}")
    fields = {k: float(v) if re.fullmatch(r"[-+0-9.eE]+", v) else v
              for k, v in (field.split("=", 1) for field in result[-1].split()[1:])}
    with open(metrics) as f:
        rows = list(csv.DictReader(f))
    fields["train_loss"] = statistics.fmean(float(r["train_loss"]) for r in rows)  # one row per epoch
    return fields


def make_bert(torch, cfg):
    """BertClassifier of examples/bert.h, with its parameter names."""
    nn, F = torch.nn, torch.nn.functional
    hidden, eps = cfg["hidden"], cfg["layer_norm_eps"]

    class Embeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(cfg["vocab_size"], hidden)
            self.position_embeddings = nn.Embedding(cfg["max_positions"], hidden)
            self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

        def forward(self, ids):
            positions = torch.arange(ids.shape[1])
            return self.LayerNorm(self.word_embeddings(ids) + self.position_embeddings(positions)
                                  + self.token_type_embeddings(torch.zeros_like(ids)))

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))

        def forward(self, x, key_mask):
            n, t, _ = x.shape
            heads = cfg["heads"]

            def split(y):
                return y.reshape(n, t, heads, hidden // heads).transpose(1, 2)

            y = F.scaled_dot_product_attention(split(self.query(x)), split(self.key(x)), split(self.value(x)),
                                               attn_mask=key_mask)
            return y.transpose(1, 2).reshape(n, t, hidden)

    class ResidualOutput(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.dense = nn.Linear(width, hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

        def forward(self, x, residual):
            return self.LayerNorm(self.dense(x) + residual)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.add_module("self", SelfAttention())
            self.output = ResidualOutput(hidden)

        def forward(self, x, key_mask):
            return self.output(self.get_submodule("self")(x, key_mask), x)

    class Intermediate(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(hidden, cfg["intermediate"])

        def forward(self, x):
            return F.gelu(self.dense(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention, self.intermediate = Attention(), Intermediate()
            self.output = ResidualOutput(cfg["intermediate"])

        def forward(self, x, key_mask):
            a = self.attention(x, key_mask)
            return self.output(self.intermediate(a), a)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.ModuleList(Layer() for _ in range(cfg["layers"]))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings, self.encoder = Embeddings(), Encoder()

        def forward(self, ids, mask):
            h = self.embeddings(ids)
            key_mask = mask.bool()[:, None, None, :]  # [N, 1, 1, T]: broadcast over heads and queries
            for layer in self.encoder.layer:
                h = layer(h, key_mask)
            return h

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = Bert()
            self.classifier = nn.Linear(hidden, cfg["classes"])

        def forward(self, x):
            longest = int(x[:, 1].sum(1).max())  # cut to the batch's longest text, as ember
            ids, mask = x[:, 0, :longest], x[:, 1, :longest]
            h = self.bert(ids, mask)
            w = mask.to(h.dtype).unsqueeze(-1)
            return self.classifier((h * w).sum(1) / w.sum(1))

    return Classifier()


def run_torch(torch, export_dir, threads):
    """Trains on the exported run; returns the figures of the table."""
    from make_safetensors_fixtures import read_safetensors

    torch.set_num_threads(threads)
    init, meta = read_safetensors(os.path.join(export_dir, "init.safetensors"))
    data, _ = read_safetensors(os.path.join(export_dir, "batches.safetensors"))
    layers = 1 + max(int(k.split(".")[3]) for k in init if k.startswith("bert.encoder.layer."))
    cfg = {"vocab_size": init["bert.embeddings.word_embeddings.weight"].shape[0],
           "hidden": init["bert.embeddings.word_embeddings.weight"].shape[1],
           "max_positions": init["bert.embeddings.position_embeddings.weight"].shape[0],
           "type_vocab_size": init["bert.embeddings.token_type_embeddings.weight"].shape[0],
           "intermediate": init["bert.encoder.layer.0.intermediate.dense.weight"].shape[0],
           "layer_norm_eps": 1e-12, "heads": 12, "layers": layers, "classes": int(meta["classes"])}
    if float(meta["dropout"]) != 0:
        sys.exit("compare_finetune.py: the exported run has dropout; compare with --dropout 0")
    model = make_bert(torch, cfg)
    model.load_state_dict(init, strict=True)

    linear_weights = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    decay = [p for p in model.parameters() if id(p) in linear_weights]
    no_decay = [p for p in model.parameters() if id(p) not in linear_weights]
    lr, steps = float(meta["lr"]), int(meta["steps"])
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": float(meta["weight_decay"])},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=lr)
    warmup = int(float(meta["warmup_ratio"]) * steps)  # as finetune_text's warmup_linear_decay
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: s / warmup if s < warmup else max(0.0, (steps - s) / max(1, steps - warmup)))

    model.train()
    inputs, targets = data["train_inputs"], data["train_targets"]
    start, train_seconds, tokens, loss_sum, seen = 0, 0.0, 0, 0.0, 0
    for size in data["batch_sizes"].tolist():
        x, y = inputs[start:start + size], targets[start:start + size]
        start += size
        began = time.perf_counter()
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        loss_value, _ = loss.item(), (logits.detach().argmax(-1) == y).sum().item()  # fit's progress figures
        train_seconds += time.perf_counter() - began
        tokens += int(x[:, 1].sum())
        loss_sum += loss_value * size
        seen += size

    model.eval()
    test_loss, correct, total = 0.0, 0, 0
    with torch.no_grad():
        tx, ty = data["val_inputs"], data["val_targets"]  # the test set (metadata val_set=test)
        for i in range(0, tx.shape[0], 128):  # finetune_text's evaluation batches
            logits = model(tx[i:i + 128])
            test_loss += torch.nn.functional.cross_entropy(logits, ty[i:i + 128], reduction="sum").item()
            correct += (logits.argmax(-1) == ty[i:i + 128]).sum().item()
            total += ty[i:i + 128].numel()
    return {"train_loss": loss_sum / seen, "test_loss": test_loss / total, "test_acc": correct / total,
            "tokens_per_s": tokens / train_seconds, "steps": steps}


def main():
    args = parse_training_comparison_args(__doc__, "finetune_text", DEFAULT_FINETUNE, DEFAULT_FLAGS)
    torch = import_torch()
    if not os.access(args.finetune_text, os.X_OK):
        sys.exit(f"compare_finetune.py: {args.finetune_text} is not an executable; build finetune_text first or "
                 "pass its path")
    load_before = [round(v, 2) for v in os.getloadavg()]
    rounds = []
    with tempfile.TemporaryDirectory(prefix="compare_finetune.") as work_dir:
        for r in range(args.rounds):
            ember = run_ember(args.finetune_text, args.threads, args.flags, work_dir, export=r == 0)
            pt = run_torch(torch, work_dir, args.threads)
            rounds.append({"ember": {k: ember[k] for k in ("train_loss", "test_loss", "test_acc", "tokens_per_s")},
                           "torch": pt, "load": [round(v, 2) for v in os.getloadavg()]})
            print(f"round {r + 1}: ember train loss {ember['train_loss']:.5f} test loss {ember['test_loss']:.5f} "
                  f"acc {ember['test_acc']:.4f} {ember['tokens_per_s']:.0f} tok/s; torch train loss "
                  f"{pt['train_loss']:.5f} test loss {pt['test_loss']:.5f} acc {pt['test_acc']:.4f} "
                  f"{pt['tokens_per_s']:.0f} tok/s; load {rounds[-1]['load']}", flush=True)

    def median(side, key):
        return statistics.median(r[side][key] for r in rounds)

    print(f"\nfinetune_text {' '.join(args.flags)} --threads {args.threads} --dropout 0: {rounds[0]['torch']['steps']} "
          f"steps, {args.rounds} round(s), torch {torch.__version__}, load average {load_before} before")
    print("| side    | train loss | test loss | test acc | tokens/s (median) |")
    print("|---------|-----------:|----------:|---------:|------------------:|")
    for side, name in (("ember", "ember  "), ("torch", "PyTorch")):
        print(f"| {name} | {median(side, 'train_loss'):10.5f} | {median(side, 'test_loss'):9.5f} | "
              f"{median(side, 'test_acc'):8.4f} | {median(side, 'tokens_per_s'):17.0f} |")
    print(f"ember - PyTorch: train loss {median('ember', 'train_loss') - median('torch', 'train_loss'):+.5f}, "
          f"test loss {median('ember', 'test_loss') - median('torch', 'test_loss'):+.5f}, test accuracy "
          f"{median('ember', 'test_acc') - median('torch', 'test_acc'):+.4f}; speed ember / PyTorch: "
          f"{median('ember', 'tokens_per_s') / median('torch', 'tokens_per_s'):.2f}x")
    # A step's time is the inverse of its tokens/s: both sides train on the same batches.
    step_ratios = [r["torch"]["tokens_per_s"] / r["ember"]["tokens_per_s"] for r in rounds]
    print(f"step time ember / PyTorch: {median('torch', 'tokens_per_s') / median('ember', 'tokens_per_s'):.2f}x by "
          f"the sides' medians, {statistics.median(step_ratios):.2f}x by the median of the rounds' ratios "
          f"({', '.join(f'{x:.2f}' for x in step_ratios)})")
    if args.json:
        save_rounds_json(args.json, args, torch, load_before, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
