#!/usr/bin/env bash
# RL results: 5 seeds per config; env steps and wall time until the 100-episode eval reaches the
# target. Run from the repository root after a build: bench/rl_seeds.sh
B=${EGGROLL:-build/apps/eggroll/eggroll}
out=${OUT:-/tmp/eggroll-rl-bench}; mkdir -p "$out"
for cfg in cartpole acrobot pendulum; do
  for seed in 0 1 2 3 4; do
    rm -rf $out/b-$cfg-$seed
    /usr/bin/time -f "%e" -o $out/t-$cfg-$seed $B train configs/$cfg.toml --set run.seed=$seed --run-dir $out/b-$cfg-$seed > /dev/null 2>&1
    python3 - "$cfg" "$seed" "$out" <<'PY'
import json, sys
cfg, seed, out = sys.argv[1], sys.argv[2], sys.argv[3]
target = {"cartpole": 475, "acrobot": -100, "pendulum": -200}[cfg]
recs = [json.loads(l) for l in open(f"{out}/b-{cfg}-{seed}/metrics.jsonl")]
wall = open(f"{out}/t-{cfg}-{seed}").read().strip()
hit = next((r for r in recs if r.get("eval_mean_return", -1e9) >= target), None)
last = recs[-1]
if hit:
    print(f"{cfg} seed {seed}: reached {hit['eval_mean_return']:.1f} at epoch {hit['epoch']+1}, env_steps {int(hit['env_steps'])}, wall {hit['wall_s']:.1f} s; final {last['eval_mean_return']:.1f} (run {wall} s)")
else:
    print(f"{cfg} seed {seed}: NOT reached; final eval {last.get('eval_mean_return')} after {int(last['env_steps'])} env steps (run {wall} s)")
PY
  done
done
