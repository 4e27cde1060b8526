#!/usr/bin/env bash
# On the GPU machine (from the repository root, with the bundle): kill -9 of rank 1 while a
# --tp run decodes, with the peer-memory all-reduce on (its kernels spin on flags in peer
# memory; a wait that exceeds 10 s traps on the device). For --tp 2 and, where 4 GPUs are
# visible, --tp 4: seconds from the kill to the launcher's exit, what it names, the finished
# lines kept, and that nvidia-smi shows none of our processes afterwards.
# Usage: bash scripts/tp_failure_check.sh PRESET   (logs in $OUT or /tmp)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset=${1:?usage: tp_failure_check.sh PRESET}
source scripts/gpu_check_env.sh
make_model "$preset"
for tp in 2 4; do
  [ "$gpus" -ge "$tp" ] || continue
  log=$out/kill_tp$tp.log results=$out/kill_tp$tp.jsonl
  "$bundle/bin/nanovllm-launch" "$work/$preset" bench/data/nanovllm_workload.jsonl --device cuda \
    --tp "$tp" -o "$results" >"$log" 2>&1 &
  launcher=$!
  for _ in $(seq 900); do grep -q 'rank 0: model loaded' "$log" && [ -s "$results" ] && break; sleep 0.1; done
  victim=$(grep -o 'rank 1 started (pid [0-9]*)' "$log" | grep -o '[0-9]*)' | tr -d ')')
  peer=$(grep -o 'peer-memory all-reduce over[^;]*' "$log" | head -1)
  t0=$(date +%s.%N); kill -9 "$victim"; wait "$launcher"; rc=$?; t1=$(date +%s.%N)
  sleep 1
  left=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)
  echo "tp $tp (${peer:-peer path: see $log}): kill -9 rank 1 (pid $victim) -> launcher exit $rc" \
    "after $(python3 -c "print(f'{$t1-$t0:.2f}')") s; $(grep -o 'nanovllm-launch: rank 1 (pid [0-9]*) was killed by signal 9' "$log" | head -1);" \
    "$(wc -l <"$results") finished lines kept; GPU processes left: $left"
done
