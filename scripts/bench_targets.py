#!/usr/bin/env python3
"""The CPU speed issue's ratio targets, read off a run of bench/cpu_speed.sh.

    scripts/bench_targets.py docs/results/cpu_speed/run23

For each target: the case's median ratio over the run's processes (forward.json, forward_2.json,
... and the same for epoch), per population, with the processes' range in brackets, and whether
the medians reach the target. Where the records carry `bound` (the best ratio the case's own
EGGROLL work allows on the machine: factors obtained once, correction and update multiply-adds at
the peak; `eggroll bench`), its median follows, and a target above it is marked "above the
bound": no code can reach it on that machine under the current design. Then the large float
model's plain inference as a fraction of the peak: the peak its process measured at the start
(peak_fraction) and, where the records have it, the peak timed alongside the case
(peak_alongside_fraction). The lines are what the targets
tables of docs/results.md hold, for a run's table to start from.
"""
import glob
import json
import os
import statistics
import sys

# (suite, model, rank, rows per member, noise, float target); the int8 target is INT8_OFFSET lower
TARGETS = [
    ("forward", "large", 1, 1, "table", 0.90),
    ("forward", "large", 4, 1, "table", 0.90),
    ("forward", "medium", 1, 1, "table", 0.90),
    ("forward", "medium", 4, 1, "table", 0.80),
    ("forward", "large", 4, 1, "generator", 0.75),  # stretch 0.80
    ("forward", "large", 1, 16, "generator", 0.95),
    ("forward", "medium", 1, 16, "generator", 0.95),
    ("forward", "large", 4, 16, "generator", 0.90),
    ("forward", "medium", 4, 16, "generator", 0.90),
    ("epoch", "large", 1, 16, "generator", 0.85),
    ("epoch", "medium", 1, 16, "generator", 0.85),
    ("epoch", "large", 4, 16, "generator", 0.80),
    ("epoch", "medium", 4, 16, "generator", 0.75),
]
INT8_OFFSET = 0.05  # each int8 target is the float one less this


def load_runs(folder, suite):
    paths = sorted(glob.glob(os.path.join(folder, f"{suite}.json")) + glob.glob(os.path.join(folder, f"{suite}_[0-9].json")))
    runs = []
    for path in paths:
        try:
            with open(path) as f:
                records = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"bench_targets: cannot read {path}: {e}")
        if not isinstance(records, list):
            sys.exit(f"bench_targets: {path} holds no list of records; expected `eggroll bench --json FILE` output")
        runs.append([r for r in records if isinstance(r, dict) and "ratio" in r])
    return runs


def ratios(runs, dtype, model, rank, rows, noise, population, key="ratio"):
    out = []
    for run in runs:
        for r in run:
            if (r.get("dtype"), r.get("model"), r.get("rank"), r.get("rows_per_member"), r.get("noise"),
                    r.get("population")) == (dtype, model, rank, rows, noise, population) and key in r:
                out.append(r[key])
    return out


def target_line(runs_by_suite, suite, dtype, model, rank, rows, noise, target):
    label = f"{suite} {dtype}, R = {rows}, {noise}, {model}, rank {rank} (>= {target:.2f})"
    runs = runs_by_suite[suite]
    populations = sorted({r["population"] for run in runs for r in run if r.get("model") == model})
    parts, met = [], []
    for n in populations:
        v = ratios(runs, dtype, model, rank, rows, noise, n)
        if not v:
            continue
        median = statistics.median_low(v)
        text = f"N {n}: {median:.3f} ({min(v):.3f}-{max(v):.3f})"
        bounds = ratios(runs, dtype, model, rank, rows, noise, n, key="bound")
        bound = statistics.median_low(bounds) if bounds else None
        if bound is not None:
            text += f", bound {bound:.3f}"
        parts.append(text)
        met.append((n, median >= target, bound is not None and bound < target))
    if not parts:
        return None
    if all(ok for _, ok, _ in met):
        verdict = "yes"
    elif any(ok for _, ok, _ in met):
        verdict = "at N " + ", ".join(str(n) for n, ok, _ in met if ok)
    else:
        verdict = "no"
    above = [str(n) for n, ok, over in met if over and not ok]
    if above:
        verdict += "; above the bound at N " + ", ".join(above)
    return f"| {label} | {'; '.join(parts)} | {verdict} |"


def peak_lines(runs_by_suite):
    lines = []
    for suite in ("forward", "epoch"):
        start, alongside = [], []
        for run in runs_by_suite[suite]:
            for r in run:
                if r.get("model") == "large" and r.get("dtype") == "f32":
                    start.append(r["peak_fraction"])
                    if "peak_alongside_fraction" in r:
                        alongside.append(r["peak_alongside_fraction"])
        if not start:
            continue
        text = (f"{100 * min(start):.0f}-{100 * max(start):.0f}% of the process's peak "
                f"(median {100 * statistics.median(start):.0f}%)")
        if alongside:
            text += (f"; {100 * min(alongside):.0f}-{100 * max(alongside):.0f}% of the peak timed alongside "
                     f"(median {100 * statistics.median(alongside):.0f}%)")
        lines.append(f"| large f32 inference >= 70% of the fp32 peak, {suite} suite | {text} | "
                     f"{'yes' if statistics.median(alongside or start) >= 0.70 else 'no'} by the median |")
    return lines


def main(args):
    if len(args) != 1:
        sys.exit(__doc__)
    if not os.path.isdir(args[0]):
        sys.exit(f"bench_targets: {args[0]} is not a folder; expected a bench/cpu_speed.sh output folder ($OUT)")
    runs_by_suite = {suite: load_runs(args[0], suite) for suite in ("forward", "epoch")}
    if not any(runs_by_suite.values()):
        sys.exit(f"bench_targets: no forward or epoch records in {args[0]}")
    print("| target | medians of the processes (their range) | met |")
    print("|---|---|---|")
    for dtype, offset in (("f32", 0.0), ("int8", INT8_OFFSET)):
        for suite, model, rank, rows, noise, target in TARGETS:
            line = target_line(runs_by_suite, suite, dtype, model, rank, rows, noise, target - offset)
            if line:
                print(line)
    for line in peak_lines(runs_by_suite):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
