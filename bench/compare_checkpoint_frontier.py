#!/usr/bin/env python3
"""The frontier's comparison as a Markdown table (issue 25, docs/checkpointing.md section 10):
for each of PyTorch's configurations, its peak and its step time relative to its own plain step,
next to ember's planner given that peak as its budget (bench/checkpoint_frontier's
"planner@torch:CONFIG" points), with ember's peak and time relative to ember's plain step.

    bench/compare_checkpoint_frontier.py EMBER_JSON TORCH_JSON [--checked EMBER_CHECKED_JSON]

The last column gives the time of the same plans with ember's value check on: from the points
"planner@torch:CONFIG/values_checked" of the same run (--no-value-check --both-value-checks, the
two taking turns), or from another run's file with --checked (a run without --no-value-check).
The verdict is the first file's.

"infeasible" is a budget below the smallest one ember's planner can promise for the model
(bench/checkpoint_frontier prints that budget); "not measured" a feasible one that the run's
--configs left out. "the plain step": the budget fits ember's plain
step, whose peak the planned one has to the byte, so the plan checkpoints nothing and runs the
plain step; its measured ratio is the noise between two copies of one step.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from draw_checkpoint_frontier import load  # noqa: E402  (the same reader and checks)

MIB = 2 ** 20


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ember_json")
    parser.add_argument("torch_json")
    parser.add_argument("--checked", help="ember's run with the value check on")
    args = parser.parse_args()
    ember, torch = load(args.ember_json), load(args.torch_json)
    checked = load(args.checked) if args.checked else None

    def planned(run, model):
        return {p["config"]: p for p in run["models"].get(model, {}).get("points", [])}

    def checked_points(model):
        if checked:
            return planned(checked, model)
        suffix = "/values_checked"
        return {k[:-len(suffix)]: p for k, p in planned(ember, model).items() if k.endswith(suffix)}

    with_checked = checked is not None or any(checked_points(m) for m in torch["models"])
    extra = " ember time, values checked |" if with_checked else ""
    print("| model | PyTorch's configuration | PyTorch peak (MiB) | PyTorch time | ember planner peak (MiB) "
          f"| ember time | ember at or below |{extra}")
    print("| --- | --- | ---: | ---: | ---: | ---: | :---: |" + (" ---: |" if with_checked else ""))
    for model, entry in torch["models"].items():
        mine_all = planned(ember, model)
        checked_all = checked_points(model)
        for p in entry["points"]:
            key = "planner@torch:" + p["config"]
            mine = mine_all.get(key)
            row = f"| {model} | {p['config']} | {p['peak_bytes'] / MIB:.1f} | {p['time_ratio']:.3f}x | "
            plain = mine_all.get("none")
            smallest = ember["models"].get(model, {}).get("smallest_budget_bytes")
            if mine is None and smallest is not None and p["peak_bytes"] >= smallest:
                row += "not measured (--configs) | | |"  # a feasible budget the run left out
            elif mine is None:
                row += "infeasible | | no |"
            elif plain is not None and mine["peak_bytes"] == plain["peak_bytes"] and mine["peak_bytes"] <= p["peak_bytes"]:
                # A plan that checkpoints nothing is the plain step (its peak is the plain one to
                # the byte): its time ratio is 1 and what was measured is the noise between two
                # copies of the same step.
                row += f"{mine['peak_bytes'] / MIB:.1f} | {mine['time_ratio']:.3f}x | yes: the plain step |"
            else:
                ok = mine["peak_bytes"] <= p["peak_bytes"] and mine["time_ratio"] <= p["time_ratio"]
                row += f"{mine['peak_bytes'] / MIB:.1f} | {mine['time_ratio']:.3f}x | {'yes' if ok else 'no'} |"
            if with_checked:
                row += f" {checked_all[key]['time_ratio']:.3f}x |" if key in checked_all else " |"
            print(row)


if __name__ == "__main__":
    main()
