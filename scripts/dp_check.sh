#!/usr/bin/env bash
# On the GPU machine (from the repository root, with the bundle; NANOVLLM_BUNDLE_TOOLS_ONLY=1
# scripts/build_bundle.sh is enough): data parallelism in the whole runtime, on as many GPUs
# as are visible (2, 4 or 8).
#   1. nano-vllm's workload (bench/data/nanovllm_workload.jsonl, 256 requests) repeated once
#      per replica, through nanovllm-launch --data-parallel-size 1, 2[, 4[, 8]] on PRESET: the
#      summary's output tok/s, the ratio to dp 1, and when every replica had loaded;
#   2. nanovllm-bench --dp 1,2[,4[,8]] on PRESET (nano-vllm's workload, once; % of limit);
#   3. kill -9 of replica 1's rank 0 mid-run: seconds until the launcher exits, the replica
#      and rank it names, and that nvidia-smi shows none of our processes afterwards;
#   4. with a second preset (the 8B shape): nanovllm-bench --layouts over every split of the
#      GPUs into replicas x --tp (dp N x tp 1, ..., dp 1 x tp N) beside one GPU.
# Usage: bash scripts/dp_check.sh PRESET [PRESET_8B]
# Logs go to /tmp/dp_check, packed after every phase into $OUT/dp_check.tgz (or /tmp): the
# device tool returns only a few files of $OUT.
# DP_CHECK_PHASES picks phases (default "launch bench kill layouts").
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset=${1:?usage: dp_check.sh PRESET [PRESET_8B]}
big=${2:-}
source scripts/gpu_check_env.sh
final=$out
out=/tmp/dp_check
mkdir -p "$out"
pack() { tar -czf "$final/dp_check.tgz" --exclude='work_x*' -C "$out" .; }
# The workload k times over, ids made unique per copy (the results are keyed by id).
repeat_workload() {
  python3 - "$1" "$2" <<'PY'
import json, sys
k, dst = int(sys.argv[1]), sys.argv[2]
lines = [json.loads(l) for l in open("bench/data/nanovllm_workload.jsonl")]
with open(dst, "w") as f:
    for c in range(k):
        for j in lines:
            j = dict(j, id=f"{j['id']}-{c}")
            f.write(json.dumps(j) + "\n")
PY
}
# One run: prints "<tag>: rc, output tok/s, when all replicas loaded"; log in $out/<tag>.log.
run() {
  local tag=$1 model=$2 prompts=$3; shift 3
  local t0=$(date +%s.%N)
  in_background timeout 300 "$bundle/bin/nanovllm-launch" "$work/$model" "$prompts" \
    --device cuda -o "$out/$tag.jsonl" "$@" >"$out/$tag.log" 2>&1
  local rc=$? t1=$(date +%s.%N)
  local tput=$(grep -o 'throughput: [0-9.]* output tok/s' "$out/$tag.log" | tail -1 | grep -o '[0-9.]*' | head -1)
  local loaded=$(grep -o 'all [0-9]* replicas loaded [0-9.]* s after fork' "$out/$tag.log" | head -1)
  local startup=$(grep -o '\[launcher\] \[info\] start-up [0-9.]* s' "$out/$tag.log" | head -1 | grep -o '[0-9.]* s')
  echo "$tag: rc=$rc, ${tput:-?} output tok/s, lines $(wc -l <"$out/$tag.jsonl" 2>/dev/null), wall $(python3 -c "print(f'{$t1-$t0:.1f}')") s, start-up ${startup:-?}${loaded:+, $loaded}"
  echo "$tput" >"$out/$tag.tput"
}
ratio() { python3 -c "import sys; a, b = (open(p).read().strip() for p in sys.argv[1:]); print(f'{float(b)/float(a):.3f}x' if a and b else '?')" "$out/$1.tput" "$out/$2.tput"; }

phases=" ${DP_CHECK_PHASES:-launch bench kill layouts} "
has() { [[ "$phases" == *" $1 "* ]]; }
# The bench's summary rows: configuration, out tok/s, % of limit, ratio.
bench_rows() {
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d.get("per_tp", [d]):
    w = {x["name"]: x for x in r["workloads"]}.get("nanovllm", {}).get("median", {})
    print(f"  tp {r['tp']} x dp {r.get('dp', 1)}: {w.get('output_tok_s', 0):.0f} out tok/s "
          f"({w.get('pct_of_limit') or 0:.1f} % of limit)")
PY
}

# nanovllm-bench on nano-vllm's workload, once: `bench_run TAG MODEL TIMEOUT FLAGS...` prints
# its configurations' rows and its table; output in $out/TAG.{json,txt,err}.
bench_run() {
  local tag=$1 model=$2 limit=$3
  shift 3
  in_background timeout "$limit" "$bundle/bin/nanovllm-bench" "$work/$model" --device cuda \
    --workloads nanovllm --runs 1 "$@" --json "$out/$tag.json" >"$out/$tag.txt" 2>"$out/$tag.err"
  echo "bench $model $* rc=$?"
  bench_rows "$out/$tag.json"
  tail -n 12 "$out/$tag.txt"
}

make_model "$preset"
dps=1; for d in 2 4 8; do [ "$gpus" -ge "$d" ] && dps="$dps $d"; done
has launch && for d in $dps; do
  repeat_workload "$d" "$out/work_x$d.jsonl"
  run "${preset}_dp$d" "$preset" "$out/work_x$d.jsonl" --data-parallel-size "$d"
  [ "$d" = 1 ] || echo "  ${preset} dp $d vs dp 1 (work x$d): $(ratio "${preset}_dp1" "${preset}_dp$d")"
done
pack

has bench && bench_run "bench_dp_$preset" "$preset" 420 --dp "${dps// /,}"
pack

# kill -9 of replica 1's rank 0 while it decodes.
if has kill && [ "$gpus" -ge 2 ]; then
  [ -f "$out/work_x2.jsonl" ] || repeat_workload 2 "$out/work_x2.jsonl"
  "$bundle/bin/nanovllm-launch" "$work/$preset" "$out/work_x2.jsonl" --device cuda \
    --data-parallel-size 2 -o "$out/kill.jsonl" >"$out/kill.log" 2>&1 &
  kill_mid_run 'replica 1 rank 0' "$out/kill.log" "$out/kill.jsonl" $!
fi
pack

if has layouts && [ -n "$big" ] && [ "$gpus" -ge 2 ]; then
  make_model "$big"
  layouts=dp1xtp1
  for t in 1 2 4 8; do [ "$gpus" -ge "$t" ] && [ $((gpus % t)) = 0 ] && layouts="$layouts,dp$((gpus / t))xtp$t"; done
  bench_run "bench_layouts_$big" "$big" 540 --layouts "$layouts"
fi
pack
