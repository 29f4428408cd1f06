#!/usr/bin/python3
"""Trains examples/train_gpt's GPT in ember and in PyTorch from the same start, and compares.

    bench/compare_gpt.py [TRAIN_GPT] [--threads N] [--rounds R] [--json OUT] [-- TRAIN_GPT_FLAGS...]

"The same" is what train_gpt --export writes (Note [Exporting a run for PyTorch] in
examples/run_export.h): the initial weights, every training batch in step order and the
validation windows. PyTorch then trains the same model on them with the same optimizer (AdamW,
betas 0.9/0.99, weight decay on the Linear weights only) and the same schedule (linear warm-up,
then a cosine to lr / 10), built from torch's own LinearLR, CosineAnnealingLR and SequentialLR.
Each round runs ember's train_gpt and then the PyTorch loop, so both see the same machine load;
the table reports each side's validation loss and its training tokens per second (median over
rounds; the time of the training steps only, without the evaluation, on both sides), and the
load average before and after.

The PyTorch loop does per step what ember's fit does: forward, cross-entropy averaged over the
targets, zero_grad, backward, optimizer step, scheduler step, and reading back the loss and the
number of correct next-token guesses for the progress figures. Flags after "--" go to train_gpt
(for example -- --train-limit 4800 --layers 4); --threads and --sample-chars 0 are added.

Run with PyTorch 2.15 (README's virtualenv): its attention is F.scaled_dot_product_attention(
is_causal=True), the anchor, and the same attention written out with a softmax, a second column.
Debian's /usr/bin/python3 (python3-torch 1.13, which has no SDPA) gives the second column only.
The model, as examples/gpt.cpp builds it:
token + position embeddings, dropout, pre-LayerNorm blocks (x + attn(ln1(x)), then
h + mlp(ln2(h)); causal multi-head attention with a fused qkv projection and dropout after the
output projection; MLP d -> 4d, exact GELU, 4d -> d, dropout), a final LayerNorm and an untied
head without bias. Parameter names match ember's state dict, so the weights load strictly.
"""
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
from compare_torch import import_torch, parse_training_comparison_args, save_rounds_json  # noqa: E402

DEFAULT_TRAIN_GPT = "build/release/examples/train_gpt"


def run_ember(train_gpt, threads, flags, export_dir):
    """Runs train_gpt; returns its result line's fields."""
    cmd = [train_gpt, "--threads", str(threads), "--sample-chars", "0", *flags]
    if export_dir:
        cmd += ["--export", export_dir]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare_gpt.py: {' '.join(cmd)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    result = [line for line in out.stdout.splitlines() if line.startswith("result ")]
    if not result:
        sys.exit(f"compare_gpt.py: no result line from {' '.join(cmd)}")
    return {k: float(v) if re.fullmatch(r"[-+0-9.eE]+", v) else v
            for k, v in (field.split("=", 1) for field in result[-1].split()[1:])}


def make_gpt(torch, cfg, attention=None):
    """The GPT; attention "sdpa" is F.scaled_dot_product_attention(is_causal=True) (PyTorch's fused
    kernel, what a user writes; the default where this PyTorch has it), "math" the same attention
    written out with a softmax."""
    nn, F = torch.nn, torch.nn.functional
    if attention is None:
        attention = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "math"

    class Attention(nn.Module):
        def __init__(self, d, heads, p):
            super().__init__()
            self.heads, self.p = heads, p
            self.qkv = nn.Linear(d, 3 * d)
            self.out_proj = nn.Linear(d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (part.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
                       for part in self.qkv(x).chunk(3, dim=-1))
            if attention == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
                causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
                y = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v
            return F.dropout(self.out_proj(y.transpose(1, 2).reshape(b, t, d)), self.p, self.training)

    class Block(nn.Module):
        def __init__(self, d, heads, p):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attention(d, heads, p), nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(p))

        def forward(self, x):
            h = x + self.attn(self.ln1(x))
            return h + self.mlp(self.ln2(h))

    class GPT(nn.Module):
        def __init__(self, c):
            super().__init__()
            d = c["embed_dim"]
            self.tok_emb = nn.Embedding(c["vocab_size"], d)
            self.pos_emb = nn.Embedding(c["context"], d)
            self.drop = nn.Dropout(c["dropout"])
            self.blocks = nn.ModuleList(Block(d, c["heads"], c["dropout"]) for _ in range(c["layers"]))
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, c["vocab_size"], bias=False)

        def forward(self, ids):
            h = self.drop(self.tok_emb(ids) + self.pos_emb(torch.arange(ids.shape[1], device=ids.device)))
            for block in self.blocks:
                h = block(h)
            return self.lm_head(self.ln_f(h))

    return GPT(cfg)


def run_torch(torch, export_dir, threads, attention):
    """Trains on the exported run with `attention` (make_gpt); returns (validation loss, training
    tokens per second, steps)."""
    from make_safetensors_fixtures import read_safetensors

    torch.set_num_threads(threads)
    # torch 1.13's SequentialLR calls the next scheduler's step(0) at a milestone, and warns about it.
    warnings.filterwarnings("ignore", message="The epoch parameter in")
    init, meta = read_safetensors(os.path.join(export_dir, "init.safetensors"))
    data, _ = read_safetensors(os.path.join(export_dir, "batches.safetensors"))
    # (the "ember.xxh3_64." keys are the per-tensor checksums of serialize/checksum.h)
    cfg = {k: (float(v) if k in ("dropout", "lr", "weight_decay") else int(v)) for k, v in meta.items()
           if not k.startswith("ember.")}
    model = make_gpt(torch, cfg, attention)
    model.load_state_dict(init, strict=True)

    linear_weights = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    decay = [p for p in model.parameters() if id(p) in linear_weights]
    no_decay = [p for p in model.parameters() if id(p) not in linear_weights]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=cfg["lr"], betas=(0.9, 0.99))
    steps, lr = cfg["steps"], cfg["lr"]
    warmup = min(cfg["warmup"], steps - 1)  # as train_gpt's warmup_cosine
    lr_sched = torch.optim.lr_scheduler
    cosine = lr_sched.CosineAnnealingLR(optimizer, T_max=steps - max(warmup, 0), eta_min=lr / 10)
    if warmup > 0:
        warm = lr_sched.LinearLR(optimizer, start_factor=1.0 / warmup, end_factor=1.0, total_iters=warmup)
        scheduler = lr_sched.SequentialLR(optimizer, [warm, cosine], milestones=[warmup])
    else:
        scheduler = cosine

    model.train()
    inputs, targets = data["train_inputs"], data["train_targets"]
    start, train_seconds, tokens = 0, 0.0, 0
    for size in data["batch_sizes"].tolist():
        x, y = inputs[start:start + size], targets[start:start + size]
        start += size
        began = time.perf_counter()
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        loss.item(), (logits.detach().argmax(-1) == y).sum().item()  # fit's progress figures
        train_seconds += time.perf_counter() - began
        tokens += y.numel()

    model.eval()
    loss_sum, total = 0.0, 0
    with torch.no_grad():
        vx, vy = data["val_inputs"], data["val_targets"]
        for i in range(0, vx.shape[0], 64):  # train_gpt's validation batches
            logits = model(vx[i:i + 64])
            loss_sum += torch.nn.functional.cross_entropy(logits.flatten(0, 1), vy[i:i + 64].flatten()).item() \
                * vy[i:i + 64].numel()
            total += vy[i:i + 64].numel()
    return loss_sum / total, tokens / train_seconds, steps


def main():
    args = parse_training_comparison_args(__doc__, "train_gpt", DEFAULT_TRAIN_GPT)
    torch = import_torch()
    if not os.access(args.train_gpt, os.X_OK):
        sys.exit(f"compare_gpt.py: {args.train_gpt} is not an executable; build train_gpt first or pass its path")
    load_before = [round(v, 2) for v in os.getloadavg()]
    rounds = []
    # The anchor is the attention a PyTorch user writes, F.scaled_dot_product_attention (PyTorch
    # 2.0 and later); the written-out math attention is the second column.
    attentions = ["sdpa", "math"] if hasattr(torch.nn.functional, "scaled_dot_product_attention") else ["math"]
    with tempfile.TemporaryDirectory(prefix="compare_gpt.") as export_dir:
        for r in range(args.rounds):
            ember = run_ember(args.train_gpt, args.threads, args.flags, export_dir if r == 0 else None)
            row = {"ember_val_loss": ember["val_loss"], "ember_tokens_per_s": ember["tokens_per_s"],
                   "ember_attention": ember.get("attention", "math")}
            for attention in attentions:
                loss, tps, steps = run_torch(torch, export_dir, args.threads, attention)
                row.update({f"torch_{attention}_val_loss": loss, f"torch_{attention}_tokens_per_s": tps, "steps": steps})
            row["load"] = [round(v, 2) for v in os.getloadavg()]
            rounds.append(row)
            print(f"round {r + 1}: ember val loss {ember['val_loss']:.4f}, {ember['tokens_per_s']:.0f} tok/s; " +
                  "; ".join(f"torch {a} val loss {row[f'torch_{a}_val_loss']:.4f}, "
                            f"{row[f'torch_{a}_tokens_per_s']:.0f} tok/s" for a in attentions) +
                  f"; load {row['load']}", flush=True)

    def median(key):
        return statistics.median(r[key] for r in rounds)

    ember_loss, ember_tps = median("ember_val_loss"), median("ember_tokens_per_s")
    print(f"\ntrain_gpt {' '.join(args.flags)} --threads {args.threads}: {rounds[0]['steps']} steps, "
          f"{args.rounds} round(s), torch {torch.__version__}, ember attention {rounds[0]['ember_attention']}, "
          f"load average {load_before} before")
    print("| side                  | val loss | tokens/s (median) | ember's speed / this side's |")
    print("|-----------------------|---------:|------------------:|----------------------------:|")
    print(f"| ember                 | {ember_loss:8.4f} | {ember_tps:17.0f} |                             |")
    for attention in attentions:
        loss, tps = median(f"torch_{attention}_val_loss"), median(f"torch_{attention}_tokens_per_s")
        label = "PyTorch, SDPA" if attention == "sdpa" else "PyTorch, math attention"
        print(f"| {label:21s} | {loss:8.4f} | {tps:17.0f} | {ember_tps / tps:26.2f}x |")
    if args.json:
        save_rounds_json(args.json, args, torch, load_before, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
