#!/usr/bin/env bash
# On the GPU machine (from the repository root, with the bundle): kill -9 of rank 1 while a
# --tp run decodes, with the peer-memory all-reduce on (its kernels spin on flags in peer
# memory; a wait that exceeds 10 s traps on the device). For --tp 2 and, where 4 GPUs are
# visible, --tp 4 and 8: seconds from the kill to the launcher's exit, what it names, the finished
# lines kept, and that nvidia-smi shows none of our processes afterwards.
# Usage: bash scripts/tp_failure_check.sh PRESET   (logs in $OUT or /tmp)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset=${1:?usage: tp_failure_check.sh PRESET}
source scripts/gpu_check_env.sh
make_model "$preset"
for tp in 2 4 8; do
  [ "$gpus" -ge "$tp" ] || continue
  log=$out/kill_tp$tp.log results=$out/kill_tp$tp.jsonl
  "$bundle/bin/nanovllm-launch" "$work/$preset" bench/data/nanovllm_workload.jsonl --device cuda \
    --tp "$tp" -o "$results" >"$log" 2>&1 &
  echo -n "tp $tp: "
  kill_mid_run 'rank 1' "$log" "$results" $!  # not in $(...): it waits for the launcher
  peer=$(grep -o 'peer-memory all-reduce over[^;]*' "$log" | head -1)
  echo "  (${peer:-no peer-memory all-reduce: see $log})"
done
