#!/usr/bin/env bash
# The memory wall, seen and passed: examples/train_gpt three times with the same small settings.
#   1. without a limit, to measure what the run holds and what a training step adds on top;
#   2. under a limit that holds the parameters, gradients, optimizer state and data but only half
#      of a plain step: it must fail with ember's OutOfMemoryError (core/out_of_memory.h), whose
#      message says what is live by category and which checkpointing would fit;
#   3. the same command with --checkpoint auto (examples/checkpoint_mode.h): it must train under
#      the limit; the script compares its speed and peak with the first run's.
# Everything printed comes from the three runs' output (their `result` lines and messages).
# Usage: examples/memory_wall.sh [BUILD_DIR]   (default: build/release in this checkout; from any
# folder). `make demo` runs it; so does the ctest example_memory_wall. docs/checkpointing.md,
# section "The memory wall", tells the story.
set -euo pipefail

usage() {
  echo "usage: $0 [BUILD_DIR]   (default: build/release of this checkout)" >&2
  exit 2
}
fail() {
  echo "memory_wall: $*" >&2
  exit 1
}
[ $# -le 1 ] || usage
case "${1:-}" in -h | --help) usage ;; esac

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build/release}
[ -d "$build" ] || fail "no build folder '$build' (make build, or give the build folder)"
build=$(cd "$build" && pwd)
program=$build/examples/train_gpt
[ -x "$program" ] || fail "no program $program (make build)"
"$program" --help | grep -q -- '--checkpoint.*auto' || fail "$program has no --checkpoint auto (rebuild it)"
cd "$repo"

work=$(mktemp -d "${TMPDIR:-/tmp}/memory_wall.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Small enough that each run takes seconds: 1,500 training windows of the fortunes, one epoch, no
# sample. The model is train_gpt's default (4 blocks, d = 128, context 128, batch 16).
flags=(--train-limit 1500 --epochs 1 --sample-chars 0 --workers 2)
# The share of a plain step the limit leaves room for. A share this model's least checkpointed step
# does not fit is refused by auto before training, naming the smallest limit that would work.
share=0.5

# field NAME FILE: the value of NAME=... on the `result` line of FILE.
field() {
  awk -v name="$1" '/^result / { for (i = 2; i <= NF; i++) { n = index($i, "="); if (substr($i, 1, n - 1) == name) v = substr($i, n + 1) } } END { print v }' "$2"
}
# mib BYTES: "12.34 MiB".
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }

echo "=== The memory wall, seen and passed ==="
echo "Three runs of $program"
echo "with ${flags[*]} (a 4-block GPT, batch 16, context 128)."

echo
echo "--- 1. No limit: what does a training step need? ---"
echo "\$ train_gpt ${flags[*]}"
"$program" "${flags[@]}" --csv "$work/plain.csv" >"$work/plain.out" 2>"$work/plain.err" ||
  { cat "$work/plain.err" >&2; fail "the run without a limit failed"; }
grep -E '^model: ' "$work/plain.out" || true
grep -E '^result ' "$work/plain.out" || fail "the run without a limit printed no result line"
peak=$(field peak_bytes "$work/plain.out")
step=$(field step_peak_bytes "$work/plain.out")
speed=$(field tokens_per_s "$work/plain.out")
[[ "$peak" =~ ^[0-9]+$ && "$step" =~ ^[0-9]+$ && "$speed" =~ ^[0-9]+$ && $step -gt 0 && $step -le $peak ]] ||
  fail "cannot read peak_bytes, step_peak_bytes and tokens_per_s from the result line"
rest=$((peak - step))
echo "The run peaked at $(mib "$peak"). A training step (forward, loss, backward) added up to"
echo "$(mib "$step") above what was live before it; the other $(mib "$rest") of the peak is what the run"
echo "holds whatever a step does: parameters, gradients, optimizer state, the encoded text and batches."

limit=$(awk -v rest="$rest" -v step="$step" -v share="$share" 'BEGIN { printf "%d", rest + share * step }')
percent=$(awk -v share="$share" 'BEGIN { printf "%g", 100 * share }')
echo
echo "--- 2. A limit of $(mib "$limit") ($limit bytes), without checkpointing ---"
echo "The limit is those $(mib "$rest") plus $percent% of the step's $(mib "$step"): the model, its gradients and"
echo "the optimizer's state fit, a plain step does not. The first step must meet the wall:"
echo "\$ train_gpt ${flags[*]} --memory-limit $limit"
set +e
"$program" "${flags[@]}" --memory-limit "$limit" --csv "$work/limited.csv" >"$work/limited.out" 2>"$work/limited.err"
code=$?
set -e
sed 's/^/  | /' "$work/limited.err"
[ "$code" -ne 0 ] || fail "the plain run under the limit of $limit bytes succeeded; it was meant to run out of memory"
grep -q 'out of memory' "$work/limited.err" || fail "the failing run's stderr does not say 'out of memory'"
grep -q 'advice:' "$work/limited.err" || fail "the failing run's stderr has no 'advice:' line"
echo "It failed (exit code $code): the error names the op, the module and the phase that asked, what was"
echo "live by category, and what would fit."

echo
echo "--- 3. The same command with --checkpoint auto ---"
echo "auto measures a plain step with the limit lifted, takes what the limit leaves a step, and asks"
echo "the planner for the least recompute that fits it:"
echo "\$ train_gpt ${flags[*]} --memory-limit $limit --checkpoint auto"
"$program" "${flags[@]}" --memory-limit "$limit" --checkpoint auto --csv "$work/auto.csv" >"$work/auto.out" \
  2>"$work/auto.err" || {
  { grep -E '^checkpoint (auto|plan)' "$work/auto.out" || true; tail -n 1 "$work/auto.out"; cat "$work/auto.err"; } |
    sed 's/^/  | /' >&2
  fail "the run with --checkpoint auto failed"
}
grep -E '^checkpoint (auto|plan)' "$work/auto.out" | sed 's/^/  | /' ||
  fail "the run with --checkpoint auto printed no plan"
grep -E '^result ' "$work/auto.out" || fail "the run with --checkpoint auto printed no result line"
auto_peak=$(field peak_bytes "$work/auto.out")
auto_step=$(field step_peak_bytes "$work/auto.out")
auto_speed=$(field tokens_per_s "$work/auto.out")
[[ "$auto_peak" =~ ^[0-9]+$ && "$auto_step" =~ ^[0-9]+$ && "$auto_speed" =~ ^[0-9]+$ && $speed -gt 0 ]] ||
  fail "cannot read peak_bytes, step_peak_bytes and tokens_per_s from the auto run's result line"
[ "$auto_peak" -le "$limit" ] || fail "the auto run peaked at $auto_peak bytes, above the limit of $limit"
echo "It trained. Its peak, $(mib "$auto_peak"), is $(awk -v p="$auto_peak" -v l="$limit" 'BEGIN { printf "%.0f", 100 * p / l }')% of the limit; a step added up to $(mib "$auto_step")"
echo "where the plain step added $(mib "$step")."
loss=$(field val_loss "$work/plain.out")
auto_loss=$(field val_loss "$work/auto.out")
if [ "$loss" = "$auto_loss" ]; then
  echo "Validation loss $auto_loss, the same as without the limit: the recompute is exact."
else
  echo "Validation loss $auto_loss, against $loss without the limit."
fi
awk -v plain="$speed" -v auto="$auto_speed" 'BEGIN {
  change = 100 * (auto - plain) / plain
  printf "Speed: %d tokens/s against %d without the limit: checkpointing %s %.1f%% of the step'"'"'s speed\n",
         auto, plain, change <= 0 ? "cost" : "gained", change < 0 ? -change : change
  print "(one run each, on this machine as loaded now; the plan line says how much forward work it recomputes)."
}'
