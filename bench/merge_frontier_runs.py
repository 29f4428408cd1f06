#!/usr/bin/env python3
"""Combines frontier JSON files by model (issue 25): the models of BASE, each MODEL=FILE replaced by
that model's entry of FILE, as when a model is measured again in a later run.

    bench/merge_frontier_runs.py OUT BASE [MODEL=FILE ...]

The output has the schema of bench/draw_checkpoint_frontier.py with the run-level fields (rounds,
load averages, check_values, version) moved into "runs": {MODEL: {..., "from": FILE}}, so that each
model keeps the conditions it was measured under.
"""
import json
import sys

RUN_FIELDS = ("rounds", "threads", "loadavg_before", "loadavg_after", "check_values", "version")


def run_of(data, path):
    if "runs" in data:
        sys.exit(f"merge_frontier_runs.py: {path} is already a combined file")
    return {k: data[k] for k in RUN_FIELDS if k in data} | {"from": path}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, base_path, *replacements = sys.argv[1:]
    with open(base_path) as f:
        base = json.load(f)
    runs = {model: run_of(base, base_path) for model in base["models"]}
    for replacement in replacements:
        model, path = replacement.split("=", 1)
        with open(path) as f:
            data = json.load(f)
        if model not in data["models"]:
            sys.exit(f"merge_frontier_runs.py: {path} has no model {model}")
        base["models"][model] = data["models"][model]
        runs[model] = run_of(data, path)
    for field in ("rounds", "loadavg_before", "loadavg_after"):
        base.pop(field, None)
    base["runs"] = runs
    with open(out, "w") as f:
        json.dump(base, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
