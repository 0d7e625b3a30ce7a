#!/usr/bin/env python3
"""Markdown tables from `eggroll bench --json FILE` records (forward, update, epoch suites).

    scripts/bench_tables.py forward.json [epoch.json ...]
    scripts/bench_tables.py --median forward.json forward_2.json forward_3.json

One table per suite: the case, plain inference and EGGROLL rows/s, their ratio, and the plain
inference's multiply-add rate as G/s and as a fraction of the peak the run measured (at its start,
and, where the records have it, the peak timed alongside the case).

With --median, the files are runs of the same suite (separate processes of one command) and
each case's row is the run whose ratio is the median of the runs' ratios (the lower middle one
for an even count), so a row's rates and ratio come from one process. On a shared machine a
case can move by tens of percent between processes; the median of three is what
docs/results.md reports.
"""
import json
import statistics
import sys

def rate(v):
    return f"{v / 1e6:.3f} M" if v >= 1e6 else f"{v / 1e3:.1f} k"


def case_key(r):
    return (r["model"], r["dtype"], r["population"], r["rank"], r["rows_per_member"], r["noise"])


def table(records):
    suite = records[0]["suite"]
    # the peak timed alongside each case, where the records have it (older records do not)
    alongside = any("peak_alongside_fraction" in r for r in records)
    rows = [f"| model | dtype | N | r | R | noise | inference rows/s | {'EGGROLL' if suite == 'forward' else suite} rows/s "
            f"| ratio | inference G MAC/s | of peak |" + (" of peak alongside |" if alongside else ""),
            "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if alongside else "")]
    for r in records:
        row = (f"| {r['model']} | {r['dtype']} | {r['population']} | {r['rank']} | {r['rows_per_member']} "
               f"| {r['noise']} | {rate(r['inference_rows_per_s'])} | {rate(r['eggroll_rows_per_s'])} "
               f"| {r['ratio']:.3f} | {r['gmacs']:.1f} | {100 * r['peak_fraction']:.0f}% |")
        if alongside:
            row += f" {100 * r['peak_alongside_fraction']:.0f}% |" if "peak_alongside_fraction" in r else " - |"
        rows.append(row)
    return "\n".join(rows)


def load(path):
    try:
        with open(path) as f:
            records = json.load(f)
    except OSError as e:
        sys.exit(f"bench_tables: cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        sys.exit(f"bench_tables: {path} is not JSON ({e}); expected the file of `eggroll bench --json FILE`")
    if not isinstance(records, list):
        sys.exit(f"bench_tables: {path} holds no list of records; expected the file of `eggroll bench --json FILE`")
    return [r for r in records if isinstance(r, dict) and "ratio" in r and "inference_rows_per_s" in r]


def medians(runs):
    """Per case of the first run, the record of the run with the median ratio."""
    by_case = [{case_key(r): r for r in run} for run in runs]
    out = []
    for first in runs[0]:
        key = case_key(first)
        same = [cases[key] for cases in by_case if key in cases]
        if {r["suite"] for r in same} != {first["suite"]}:
            sys.exit(f"bench_tables: the files mix suites for case {key}")
        middle = statistics.median_low(r["ratio"] for r in same)
        out.append(next(r for r in same if r["ratio"] == middle))
    return out


def main(args):
    if args and args[0] == "--median":
        runs = [load(p) for p in args[1:]]
        if not runs:
            sys.exit(__doc__)
        if not runs[0]:
            sys.exit(f"bench_tables: {args[1]} has no forward, update or epoch records")
        print(table(medians(runs)))
        return
    for path in args:
        records = load(path)
        if records:
            print(table(records))
            print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
