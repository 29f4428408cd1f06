#!/usr/bin/env python3
"""Two builds of bench_core side by side: before and after a change, on the same machine.

Runs the two binaries in interleaved rounds (A B, then B A, ...), each round one bench_core run
per binary over the cases the filter selects, and prints per case the median time of each and
the median of the per-round ratios after/before, with the CPU, the load average before and after,
and the rounds. Only wall times bench_core reports are used; nothing is asserted.

  bench/compare_bench_core.py BEFORE_BINARY AFTER_BINARY [--rounds 3] [--filter REGEX] [--threads 1]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess


def cpu_name():
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def run(binary, pattern, threads):
    out = subprocess.run([binary, "--threads", str(threads), f"--benchmark_filter={pattern}",
                          "--benchmark_format=json", "--benchmark_min_time=0.5"],
                         capture_output=True, text=True, check=True).stdout
    times = {}
    for b in json.loads(out)["benchmarks"]:
        times[b["name"]] = b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    return times  # ms


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--filter", default=".")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    load_before = os.getloadavg()
    before, after, ratios = {}, {}, {}
    for r in range(args.rounds):
        order = [("before", args.before), ("after", args.after)]
        if r % 2:
            order.reverse()
        got = {label: run(binary, args.filter, args.threads) for label, binary in order}
        for name in got["before"]:
            before.setdefault(name, []).append(got["before"][name])
            after.setdefault(name, []).append(got["after"][name])
            ratios.setdefault(name, []).append(got["after"][name] / got["before"][name])
    load_after = os.getloadavg()
    print(f"CPU: {cpu_name()}; {args.threads} thread(s); {args.rounds} interleaved rounds; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print(f"| case | before ms (median) | after ms (median) | after/before (median of rounds) | rounds' ratios |")
    print("|---|---:|---:|---:|---|")
    for name in before:
        print(f"| {name.replace('/real_time', '')} | {statistics.median(before[name]):.3f} | "
              f"{statistics.median(after[name]):.3f} | {statistics.median(ratios[name]):.3f} | "
              f"{', '.join(f'{x:.3f}' for x in ratios[name])} |")


if __name__ == "__main__":
    main()
