#!/usr/bin/env bash
# Two builds' libraries under one build/bench/update_throughput binary, in alternating processes:
#   scripts/update_ab.sh OLD_LIBDIR ROUNDS [update_throughput arguments...]
# e.g. scripts/update_ab.sh /tmp/old/build/src 6 --dtype int8 --shapes 512x64,64x512 --ranks 1,4 --reps 9
# A is the library in OLD_LIBDIR (a build of the old tree: its build/src), B this tree's build. Per
# shape and rank it prints the median over the rounds of each side's ms (each round's figure is
# itself a median of its reps), B / A, and each side's fastest round. Both libraries must share the
# backend's interface (the binary is this tree's). Threads: 2, as the benchmark protocol.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ] || [ ! -d "$1" ] || ! [ "$2" -ge 1 ] 2>/dev/null; then
  echo "usage: scripts/update_ab.sh OLD_LIBDIR ROUNDS [update_throughput arguments...]" >&2
  echo "  (OLD_LIBDIR: a folder holding the old libeggroll.so; ROUNDS >= 1)" >&2
  exit 2
fi
if [ ! -x build/bench/update_throughput ]; then
  echo "update_ab.sh: build/bench/update_throughput is not built (cmake --build build)" >&2
  exit 2
fi
old=$1
rounds=$2
shift 2
for _ in $(seq "$rounds"); do
  LD_LIBRARY_PATH=$old OMP_NUM_THREADS=2 build/bench/update_throughput "$@" | tail -n +2 | sed 's/^/A /'
  OMP_NUM_THREADS=2 build/bench/update_throughput "$@" | tail -n +2 | sed 's/^/B /'
done | python3 -c '
import collections, statistics as st, sys
ms = collections.defaultdict(list)
for line in sys.stdin:
    side, shape, rank, _, t = line.split()[:5]
    ms[(shape, rank, side)].append(float(t))
for shape, rank in sorted({(k[0], k[1]) for k in ms}):
    a, b = ms[(shape, rank, "A")], ms[(shape, rank, "B")]
    print(f"{shape} r{rank} A {st.median(a):.3f} B {st.median(b):.3f} B/A {st.median(b) / st.median(a):.3f} "
          f"min A {min(a):.3f} B {min(b):.3f}")
'
