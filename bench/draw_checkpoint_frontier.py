#!/usr/bin/env python3
"""Draws the checkpointing frontier (issue 25): ember's and PyTorch's (peak memory, step time)
points of one training step, one panel per model, as an SVG without any plotting library.

    bench/draw_checkpoint_frontier.py EMBER_JSON TORCH_JSON -o docs/checkpoint_frontier.svg

Both files have one schema (bench/torch_checkpoint_frontier.py writes PyTorch's):
    {"framework": ..., "version": ..., "threads": ..., "rounds": ...,
     "loadavg_before": [1, 5, 15 min], "loadavg_after": [...],
     "models": {MODEL: {"description": ..., "points": [{"config": ..., "peak_bytes": ...,
                                                        "step_ms": ..., "time_ratio": ...}, ...]}}}
or, combined from several runs by bench/merge_frontier_runs.py, the run's fields per model in
"runs": {MODEL: {"rounds": ..., "loadavg_before": ..., "loadavg_after": ..., ...}}.
A panel is drawn for each model in both files. x is the step's peak in MiB from 0; y is the
step's time relative to the same framework's plain step (time_ratio), so each framework is
measured against itself. ember's configurations whose name starts with "planner" are the
planner's curve, joined in order of peak; every other configuration of either side is an
unjoined marker with its name.
"""
import argparse
import html
import json
import math
import sys

PANEL_W, PANEL_H = 300, 260        # the plot area of one panel
LEFT, RIGHT, TOP, BOTTOM = 60, 30, 70, 100
EMBER, TORCH = "#1f4e9c", "#d9541e"
MIB = 2 ** 20


def load(path):
    """The file's contents, with a message that names the file if it is not a frontier JSON."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"draw_checkpoint_frontier.py: cannot read {path}: {e.strerror}")
    try:
        data = json.loads(text)
        run_fields = ("runs",) if "runs" in data else ("loadavg_before", "loadavg_after")
        missing = [k for k in ("framework", "models") + run_fields if k not in data]
        if missing:
            raise KeyError(", ".join(missing))
        for entry in data["models"].values():
            for p in entry["points"]:
                p["peak_bytes"], p["time_ratio"] = int(p["peak_bytes"]), float(p["time_ratio"])
                p["config"] = str(p["config"])
        return data
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"draw_checkpoint_frontier.py: {path}: not a frontier JSON file ({type(e).__name__}: {e}); "
                 "bench/torch_checkpoint_frontier.py describes the schema")


def nice_step(span, ticks=5):
    """A step of 1, 2 or 5 times a power of ten that cuts span into about `ticks` parts."""
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def axis(lo, hi):
    """Tick values covering [lo, hi], and the axis's ends (the outer ticks)."""
    step = nice_step(hi - lo if hi > lo else 1.0)
    start, end = math.floor(lo / step) * step, math.ceil(hi / step) * step
    ticks = [start + i * step for i in range(round((end - start) / step) + 1)]
    return ticks, start, end


class Svg:
    def __init__(self):
        self.parts = []

    def add(self, element, text=None, **attrs):
        a = " ".join(f"{k.replace('_', '-')}='{html.escape(str(v))}'" for k, v in attrs.items())
        self.parts.append(f"<{element} {a}/>" if text is None else f"<{element} {a}>{html.escape(text)}</{element}>")

    def marker(self, shape, x, y, colour):
        if shape == "circle":
            self.add("circle", cx=f"{x:.1f}", cy=f"{y:.1f}", r=4, fill=colour)
        else:  # a square
            self.add("rect", x=f"{x - 4:.1f}", y=f"{y - 4:.1f}", width=8, height=8, fill="none", stroke=colour,
                     stroke_width=1.8)


def draw_panel(svg, x0, model, ember, torch):
    # A name with "/" is a plan run a second time with the other value check (--both-value-checks):
    # the figure shows the file's own check, as on PyTorch's side.
    mine = [p for p in ember["points"] if "/" not in p["config"]]
    points = [(p, "ember") for p in mine] + [(p, "torch") for p in torch["points"]]
    xs, x_lo, x_hi = axis(0, max(p["peak_bytes"] for p, _ in points) / MIB * 1.05)
    ratios = [p["time_ratio"] for p, _ in points]
    ys, y_lo, y_hi = axis(min(min(ratios), 1.0) - 0.05, max(ratios) + 0.05)

    def at(p):
        return (x0 + (p["peak_bytes"] / MIB - x_lo) / (x_hi - x_lo) * PANEL_W,
                TOP + PANEL_H - (p["time_ratio"] - y_lo) / (y_hi - y_lo) * PANEL_H)

    svg.add("text", model, x=x0, y=TOP - 10, font_weight="bold")
    svg.add("rect", x=x0, y=TOP, width=PANEL_W, height=PANEL_H, fill="none", stroke="#888")
    for v in xs:
        x = x0 + (v - x_lo) / (x_hi - x_lo) * PANEL_W
        svg.add("line", x1=f"{x:.1f}", x2=f"{x:.1f}", y1=TOP, y2=TOP + PANEL_H, stroke="#eee")
        svg.add("text", f"{v:g}", x=f"{x:.1f}", y=TOP + PANEL_H + 15, text_anchor="middle")
    for v in ys:
        y = TOP + PANEL_H - (v - y_lo) / (y_hi - y_lo) * PANEL_H
        svg.add("line", x1=x0, x2=x0 + PANEL_W, y1=f"{y:.1f}", y2=f"{y:.1f}", stroke="#eee")
        svg.add("text", f"{v:g}", x=x0 - 6, y=f"{y + 4:.1f}", text_anchor="end")
    svg.add("text", "peak of a step (MiB)", x=x0 + PANEL_W / 2, y=TOP + PANEL_H + 32, text_anchor="middle")
    svg.add("text", "time / plain step", x=x0 - 42, y=TOP + PANEL_H / 2, text_anchor="middle",
            transform=f"rotate(-90 {x0 - 42} {TOP + PANEL_H / 2})")

    planner = sorted((p for p in mine if p["config"].startswith("planner")), key=lambda p: p["peak_bytes"])
    if planner:
        svg.add("polyline", fill="none", stroke=EMBER, stroke_width=1.5,
                points=" ".join(f"{x:.1f},{y:.1f}" for x, y in map(at, planner)))
    placed = [(x - 5, y + 5, 10) for x, y in (at(p) for p, _ in points)]  # the markers' boxes, then the labels'
    for p, side in points:
        x, y = at(p)
        colour = EMBER if side == "ember" else TORCH
        svg.marker("circle" if side == "ember" else "square", x, y, colour)
        if side == "ember" and p["config"].startswith("planner"):
            continue
        width = 5.2 * len(p["config"])  # about the width of 9-pixel text
        left, baseline = place_label(placed, x, y, width, x0, x0 + PANEL_W + RIGHT)
        if baseline != y + 3:  # moved up or down: a line says whose label it is
            end = left - 1 if left > x else left + width + 1
            svg.add("line", x1=f"{x:.1f}", y1=f"{y:.1f}", x2=f"{end:.1f}", y2=f"{baseline - 3:.1f}",
                    stroke=colour, stroke_width=0.5)
        svg.add("text", p["config"], x=f"{left:.1f}", y=f"{baseline:.1f}", font_size=9, fill=colour)


def place_label(placed, x, y, width, left_end, right_end):
    """Where a label of the point (x, y) goes: right of it, else left of it, else right or left and
    a line further down or up, whichever first overlaps no box in `placed` (left, baseline, width; 10
    high) nor leaves [left_end, right_end]; the box chosen is added to placed."""
    def free(left, baseline):
        return left_end <= left and left + width <= right_end and not any(
            abs(baseline - b) < 10 and left < l + w and l < left + width for l, b, w in placed)

    shifts = [0] + [sign * 11 * k for k in range(1, 20) for sign in (1, -1)]
    spots = [(left, y + 3 + shift) for shift in shifts for left in (x + 7, x - 7 - width)]
    left, baseline = next((spot for spot in spots if free(*spot)), spots[0])
    placed.append((left, baseline, width))
    return left, baseline


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("ember_json")
    parser.add_argument("torch_json")
    parser.add_argument("-o", "--out", required=True, help="the SVG to write")
    args = parser.parse_args()
    ember, torch = load(args.ember_json), load(args.torch_json)
    models = [m for m in ember["models"] if m in torch["models"]]
    if not models:
        sys.exit(f"draw_checkpoint_frontier.py: no model is in both files ({args.ember_json}: "
                 f"{sorted(ember['models'])}, {args.torch_json}: {sorted(torch['models'])})")

    def conditions(r):
        return (f"{r.get('rounds', '?')} rounds, load average {'/'.join(map(str, r['loadavg_before']))} before, "
                f"{'/'.join(map(str, r['loadavg_after']))} after")

    def run(d):
        checks = {True: ", the recompute's values checked", False: ", shapes and dtypes checked only"}.get(
            d.get("check_values"), "")
        name = " ".join(filter(None, (d["framework"], d.get("version"))))
        if "runs" in d:  # one line for each run the models came from
            by_run = {}
            for model, r in d["runs"].items():
                by_run.setdefault(conditions(r), []).append(model)
            return [f"{name}, {', '.join(models)}: {d.get('threads', '?')} threads, {c}{checks}"
                    for c, models in by_run.items()]
        return [f"{name}: {d.get('threads', '?')} threads, {conditions(d)}{checks}"]
    lines = run(ember) + run(torch)
    width = max(LEFT + len(models) * (PANEL_W + LEFT + RIGHT), 820)  # at least the title's and the legend's
    height = TOP + PANEL_H + BOTTOM + 14 * max(0, len(lines) - 2)  # room for a line per run
    svg = Svg()
    svg.add("rect", width="100%", height="100%", fill="white")
    svg.add("text", "Activation checkpointing: the peak and the time of one training step, ember and PyTorch",
            x=LEFT, y=24, font_size=16)
    for i, model in enumerate(models):
        draw_panel(svg, LEFT + i * (PANEL_W + LEFT + RIGHT), model, ember["models"][model], torch["models"][model])

    legend_y = TOP + PANEL_H + 52
    svg.marker("circle", LEFT + 4, legend_y - 4, EMBER)
    svg.add("line", x1=LEFT + 20, x2=LEFT + 40, y1=legend_y - 4, y2=legend_y - 4, stroke=EMBER, stroke_width=1.5)
    svg.add("text", "ember (the line: the planner's plans, in order of peak)", x=LEFT + 46, y=legend_y)
    svg.marker("square", LEFT + 404, legend_y - 4, TORCH)
    svg.add("text", f"PyTorch {torch.get('version', '')}", x=LEFT + 414, y=legend_y)

    for i, line in enumerate(lines):
        svg.add("text", line, x=LEFT, y=legend_y + 22 + 14 * i, font_size=10, fill="#555")

    with open(args.out, "w") as f:
        f.write(f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
                "font-family='sans-serif' font-size='12'>\n")
        f.write("\n".join(svg.parts))
        f.write("\n</svg>\n")
    print(f"wrote {args.out}: {', '.join(models)}")


if __name__ == "__main__":
    main()
