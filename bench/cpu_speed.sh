#!/usr/bin/env bash
# The CPU speed figures of docs/results.md: every suite of `eggroll bench`, the GEMM comparison and
# the PyTorch baseline, one after another (about 25 minutes on 2 cores). The forward, epoch, update
# and lm suites run three times, in separate processes (forward.json, forward_2.json,
# forward_3.json, ...): a case moves by tens of percent between processes on a shared machine, so
# the tables take each case's median run (scripts/bench_tables.py --median). Outputs (text and
# JSON) go to $OUT (default /tmp/eggroll-bench). Needs a build, and for the last two libdnnl-dev,
# libopenblas-dev, libopenblas0-openmp and python3-torch (skipped, with a message, without them).
# Run from anywhere: bench/cpu_speed.sh
set -u
cd "$(dirname "$0")/.."
E=build/apps/eggroll/eggroll
O=${OUT:-/tmp/eggroll-bench}; mkdir -p $O
$E bench --suite peak --json $O/peak.json > $O/peak.txt 2>&1
$E bench --suite forward --dtypes f32 int8 --models small --populations 4096 --ranks 1 4 --rows 1 16 --noise generator table --reps 7 --json $O/forward_small.json > $O/forward_small.txt 2>&1
for run in 1 2 3; do
  k=$([ $run = 1 ] && echo "" || echo _$run)
  $E bench --suite forward --dtypes f32 int8 --models medium large --populations 256 4096 --ranks 1 4 --rows 1 16 --noise generator table --reps 7 --json $O/forward$k.json > $O/forward$k.txt 2>&1
  $E bench --suite epoch --dtypes f32 int8 --models medium large --populations 1024 4096 --ranks 1 4 --rows 1 16 --reps 5 --json $O/epoch$k.json > $O/epoch$k.txt 2>&1
  $E bench --suite update --dtypes f32 int8 --models medium large --populations 1024 4096 --ranks 1 4 --rows 16 --reps 5 --json $O/update$k.json > $O/update$k.txt 2>&1
  $E bench --suite lm --json $O/lm$k.json > $O/lm$k.txt 2>&1
done
$E bench --suite memory --json $O/memory.json > $O/memory.txt 2>&1
build/bench/forward_breakdown --models medium,large --ranks 1,4 --noise generator,table --members 2048 --reps 20 > $O/breakdown.txt 2>&1
build/bench/forward_breakdown --models medium,large --ranks 1,4 --noise generator --members 2048 --rows 16 --chunk 128 --reps 10 > $O/breakdown_r16.txt 2>&1
# OpenBLAS's SkylakeX kernels are timed beside its default choice only where the CPU has AVX-512
# (forced on a CPU without it, they stop on an illegal instruction)
CORETYPES=default
grep -qw avx512f /proc/cpuinfo && CORETYPES=default,SkylakeX
if [ -x build/bench/gemm_compare ]; then
  build/bench/gemm_compare --json $O/gemm_default.json > $O/gemm_default.txt 2>&1
  [ $CORETYPES = default ] || OPENBLAS_CORETYPE=SkylakeX build/bench/gemm_compare --json $O/gemm_skx.json > $O/gemm_skx.txt 2>&1
else
  echo "cpu_speed.sh: build/bench/gemm_compare not built (needs libdnnl-dev and libopenblas-dev): skipped" >&2
fi
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "cpu_speed.sh: python3-torch not installed: bench/torch_baseline.py skipped" >&2
  exit 0
fi
# PyTorch's peak fractions against the fp32 peak this machine measured above
PEAK=$(/usr/bin/python3 -c "import json, sys
print(max(r['gmacs'] for r in json.load(open(sys.argv[1])) if r['dtype'] == 'f32'))" $O/peak.json)
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=1073741824:glibc.malloc.arena_max=1 /usr/bin/python3 bench/torch_baseline.py --peak-gmacs $PEAK --models medium large --populations 1024 4096 --ranks 1 4 --rows 1 16 --coretypes $CORETYPES --json $O/torch.json > $O/torch.txt 2>&1
