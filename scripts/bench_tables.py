#!/usr/bin/env python3
"""Markdown tables from `eggroll bench --json FILE` records (forward, update, epoch suites).

    scripts/bench_tables.py forward.json [epoch.json ...]

One table per suite: the case, plain inference and EGGROLL rows/s, their ratio, and the plain
inference's multiply-add rate as G/s and as a fraction of the peak the run measured.
"""
import json
import sys


def rate(v):
    return f"{v / 1e6:.3f} M" if v >= 1e6 else f"{v / 1e3:.1f} k"


def table(records):
    suite = records[0]["suite"]
    rows = [f"| model | dtype | N | r | R | noise | inference rows/s | {'EGGROLL' if suite == 'forward' else suite} rows/s "
            f"| ratio | inference G MAC/s | of peak |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        rows.append(f"| {r['model']} | {r['dtype']} | {r['population']} | {r['rank']} | {r['rows_per_member']} "
                    f"| {r['noise']} | {rate(r['inference_rows_per_s'])} | {rate(r['eggroll_rows_per_s'])} "
                    f"| {r['ratio']:.3f} | {r['gmacs']:.1f} | {100 * r['peak_fraction']:.0f}% |")
    return "\n".join(rows)


def main(paths):
    for path in paths:
        with open(path) as f:
            records = [r for r in json.load(f) if "ratio" in r and "inference_rows_per_s" in r]
        if records:
            print(table(records))
            print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
