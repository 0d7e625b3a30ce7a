#!/usr/bin/env python3
"""Compare two builds of eggroll on the same `eggroll bench` command, in alternating processes.

    scripts/bench_ab.py --a OLD/apps/eggroll/eggroll --b build/apps/eggroll/eggroll --rounds 3 \\
        -- --suite forward --dtypes f32 --models medium --ranks 4 --rows 16

On a shared, noisy machine one process of each build says little: a case moves by tens of
percent between processes. This runs the command `rounds` times per build, A and B alternating,
and prints per case the median over the rounds of each build's ratio (EGGROLL or epoch or update
against plain inference, measured inside each process), of its plain-inference rate and of its
EGGROLL (forward, epoch or update) rate. When a change speeds up plain inference too, the ratio
alone hides it: read the rates. For `--suite lm` the two rate columns are the int8 GEMM's G MAC/s
at the model's shape mix and the population step's member-tokens/s. For `--suite update` and
`--suite epoch` a second table gives each build's seconds per update (or epoch), every round's:
an update of a few milliseconds moves its ratio less than the noise of plain inference does.

The host's memory system is shared with other machines, and its load changes over minutes: a
forward that reads its factors from memory (one row per member) ran 1.5 times as long for minutes
at a time, in both builds. `--split OPTION` (repeatable, e.g. `--split models --split populations`)
runs every combination of that option's values in its own pair of processes, A then B, so that
the two builds of one case are measured minutes apart at most; a third table then lists every
round's ratio of each case.
"""
import itertools
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(binary, bench_args, path):
    subprocess.run([binary, "bench", *bench_args, "--json", path], check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)


def case_key(rec):
    return (rec["model"], rec["dtype"], rec["population"], rec["rank"], rec["rows_per_member"], rec["noise"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="the first eggroll binary (the baseline)")
    p.add_argument("--b", required=True, help="the second eggroll binary")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--split", action="append", default=[], metavar="OPTION",
                   help="an eggroll bench option (models, populations, ...) whose values run in processes of their own")
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="after --: the arguments of eggroll bench")
    args = p.parse_args()
    bench_args = [a for a in args.bench_args if a != "--"]
    if not bench_args:
        p.error("give the eggroll bench arguments after --")
    ratios = {"a": {}, "b": {}}
    infer = {"a": {}, "b": {}}
    egg = {"a": {}, "b": {}}
    seconds = {"a": {}, "b": {}}  # update_s or epoch_s, where the suite reports them
    order = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for part, part_args in enumerate(split_runs(bench_args, args.split)):
                for side, binary in (("a", args.a), ("b", args.b)):
                    for rec in run(binary, part_args, os.path.join(tmp, f"{side}{r}_{part}.json")):
                        if "ratio" not in rec:
                            continue
                        k = case_key(rec)
                        if k not in order:
                            order.append(k)
                        ratios[side].setdefault(k, []).append(rec["ratio"])
                        # the lm suite's records: the GEMM's G MAC/s and the step's member-tokens/s
                        infer[side].setdefault(k, []).append(rec.get("inference_rows_per_s", rec.get("gemm_gmacs")))
                        egg_rate = rec.get("eggroll_rows_per_s", rec.get("member_tokens_per_s"))
                        egg[side].setdefault(k, []).append(egg_rate)
                        if "update_s" in rec or "epoch_s" in rec:
                            seconds[side].setdefault(k, []).append(rec.get("update_s", rec.get("epoch_s")))
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    print(f"| case ({args.rounds} rounds, medians) | A ratio | B ratio | A inference rows/s | B inference rows/s "
          "| A EGGROLL rows/s | B EGGROLL rows/s |")
    print("|---|---|---|---|---|---|---|")
    for k in order:
        label = label_of(k)
        a, b = ratios["a"].get(k), ratios["b"].get(k)
        if not a or not b:
            continue
        print(f"| {label} | {statistics.median(a):.3f} | {statistics.median(b):.3f} | "
              f"{statistics.median(infer['a'][k]):.4g} | {statistics.median(infer['b'][k]):.4g} | "
              f"{statistics.median(egg['a'][k]):.4g} | {statistics.median(egg['b'][k]):.4g} |")
    if any(seconds["a"].values()):
        print_rounds(order, seconds, "seconds (each round, sorted)", "{:.4g}", sort=True)
    if args.split:
        print_rounds(order, ratios, "ratio (each round, in order)", "{:.3f}", sort=False)


def label_of(k):
    return f"{k[0]} {k[1]} N={k[2]} r={k[3]} R={k[4]} {k[5]}"


def print_rounds(order, values, what, fmt, sort):
    """A table of every round's value of each case, A's and B's."""
    print(f"\n| case | A {what} | B {what} |")
    print("|---|---|---|")
    for k in order:
        a, b = values["a"].get(k), values["b"].get(k)
        if a and b:
            a, b = (sorted(a), sorted(b)) if sort else (a, b)
            print(f"| {label_of(k)} | {', '.join(fmt.format(x) for x in a)} | {', '.join(fmt.format(x) for x in b)} |")


def split_runs(bench_args, names):
    """The bench arguments once per combination of the values of the options in `names`."""
    if not names:
        return [bench_args]
    values = {}
    for name in names:
        flag = "--" + name
        if flag not in bench_args:
            raise SystemExit(f"--split {name}: the bench arguments have no {flag}")
        i = bench_args.index(flag) + 1
        j = i
        while j < len(bench_args) and not bench_args[j].startswith("--"):
            j += 1
        values[flag] = (i, j, bench_args[i:j])
    runs = []
    for combo in itertools.product(*(v[2] for v in values.values())):
        out = list(bench_args)
        # replace from the last option back, so that earlier positions stay valid
        for (flag, (i, j, _)), value in sorted(zip(values.items(), combo), key=lambda e: -e[0][1][0]):
            out[i:j] = [value]
        runs.append(out)
    return runs


if __name__ == "__main__":
    main()
