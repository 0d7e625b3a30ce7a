#!/usr/bin/env python3
"""The innermost multiply-add loops of a compiled object, and what else they hold.

    scripts/fma_loops.py build/src/CMakeFiles/eggroll.dir/backend/cpu/cpu_float_avx2.cpp.o [--all] [--match TEXT]

Disassembles the object (objdump -d -C) and, per function, finds its innermost loops (a backward
branch with no other backward branch inside) that hold at least 8 multiply-adds (vfmadd*,
vpmaddwd, vpmaddubsw, vpdpbusd). Each line gives the loop's instructions, its multiply-adds, its
stack references (%rsp: spilled values, for the loops of a kernel's tile) and its vector
register-to-register moves. Without --all only the loops with a stack reference or more than two
moves are listed; --match keeps the functions whose name holds TEXT.
"""
import argparse
import re
import subprocess
import sys

MULTIPLY_ADD = re.compile(r"\t(vfmadd|vfnmadd|vpmaddwd|vpmaddubsw|vpdpbusd)")
REGISTER_MOVE = re.compile(r"\tvmov(aps|ups|dqa|dqu)\S*\s+%[xyz]mm[0-9]+,%[xyz]mm[0-9]+$")
BRANCH = re.compile(r"\tj[a-z]+\s+([0-9a-f]+)")


def functions(obj):
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", obj], capture_output=True, text=True,
                          check=True).stdout
    name, body = None, []
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
        elif name and re.match(r"\s+[0-9a-f]+:", line):
            body.append(line)
    if name:
        yield name, body


def innermost_loops(body):
    address = [int(line.split(":")[0], 16) for line in body]
    index = {a: i for i, a in enumerate(address)}
    loops = []
    for i, line in enumerate(body):
        m = BRANCH.search(line)
        if m and int(m.group(1), 16) < address[i] and int(m.group(1), 16) in index:
            loops.append((index[int(m.group(1), 16)], i))
    for j, i in loops:
        if not any(j <= j2 and i2 <= i and (j2, i2) != (j, i) for j2, i2 in loops):
            yield body[j:i + 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("object")
    ap.add_argument("--all", action="store_true", help="every loop, not only those with spills or moves")
    ap.add_argument("--match", default="", help="only functions whose name holds this text")
    args = ap.parse_args()
    for name, body in functions(args.object):
        if args.match not in name:
            continue
        for loop in innermost_loops(body):
            fma = sum(bool(MULTIPLY_ADD.search(line)) for line in loop)
            if fma < 8:
                continue
            stack = sum("%rsp" in line for line in loop)
            moves = sum(bool(REGISTER_MOVE.search(line)) for line in loop)
            if args.all or stack or moves > 2:
                print(f"{name[:160]}\n    instructions {len(loop)}, multiply-adds {fma}, stack {stack}, moves {moves}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
