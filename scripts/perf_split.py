#!/usr/bin/env python3
"""Splits a call-graph profile of `eggroll bench --suite forward` between its two timed calls.

Reads `perf script` output of a `perf record --call-graph dwarf` run from stdin and counts each
sample's leaf symbol under the caller it runs for (ForwardRunner::inference, ::perturbed, or
other: the peak suite, the table's read rate). The bench times both calls over the same rows, so
the two columns' totals, scaled by the calls each made, give the ratio it prints.

    perf script -i perf.data | scripts/perf_split.py [--top N]
"""
import argparse
import collections
import re
import sys

CALLERS = ("perturbed", "inference")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=12, help="symbols listed per caller")
    args = ap.parse_args()
    tallies = {name: collections.Counter() for name in CALLERS + ("other",)}
    frames = []

    def flush():
        if not frames:
            return
        caller = next((name for f in frames for name in CALLERS if "ForwardRunner::" + name in f), "other")
        tallies[caller][frames[0]] += 1

    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            flush()
            frames.clear()
        elif line[0] in "\t ":
            parts = line.strip().split(" ", 1)
            if len(parts) == 2:
                frames.append(re.sub(r" \(.*\)$", "", re.sub(r"\+0x[0-9a-f]+ \(.*\)$", "", parts[1])))
    flush()
    for name in ("inference", "perturbed", "other"):
        counts = tallies[name]
        total = sum(counts.values())
        print(f"{name}: {total} samples")
        for sym, n in counts.most_common(args.top):
            print(f"  {n:6d} {100.0 * n / max(total, 1):5.1f}%  {sym[:150]}")


if __name__ == "__main__":
    main()
