#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with the bundle built by
# scripts/build_bundle.sh: GPU summary, every GPU test binary, every kernel benchmark.
# Logs go to $OUT (when set) or bundle/logs; a summary table is printed last.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
logs=${OUT:-bundle/logs}
mkdir -p "$logs"
export LD_LIBRARY_PATH="$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv \
  2>&1 | tee "$logs/nvidia_smi.txt"

declare -a rows
case_timeout=${NANOVLLM_CASE_TIMEOUT:-30}
# Each test case runs alone under a timeout, line-buffered, so a hang costs one case, not all.
for name in elementwise_cuda_test linear_cuda_test sampler_cuda_test attention_cuda_test \
    $(ls bundle/tests | grep -v -x -e elementwise_cuda_test -e linear_cuda_test \
      -e sampler_cuda_test -e attention_cuda_test); do
  t=bundle/tests/$name
  [ -x "$t" ] || continue
  passed=0 failed=0 skipped=0 hung=0
  start=$(date +%s)
  for tc in $("$t" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}'); do
    timeout "$case_timeout" stdbuf -oL -eL "$t" --gtest_filter="$tc" >>"$logs/$name.log" 2>&1
    rc=$?
    if [ $rc -eq 124 ]; then hung=$((hung + 1)); echo "HUNG $tc" | tee -a "$logs/$name.log"
    elif [ $rc -ne 0 ]; then failed=$((failed + 1)); echo "FAILED $tc (rc $rc)"
    elif grep -q "^\[  SKIPPED \] $tc" "$logs/$name.log"; then skipped=$((skipped + 1))
    else passed=$((passed + 1)); fi
  done
  grep -E '^\[  FAILED|Failure|Expected|Which is|actual|rel_l2|HUNG|error' "$logs/$name.log" | head -n 40
  rows+=("$(printf '%-28s %4ss  passed=%-3s failed=%-3s hung=%-3s skipped=%s' "$name" \
    "$(( $(date +%s) - start ))" "$passed" "$failed" "$hung" "$skipped")")
done
for b in bundle/bench/*; do
  name=$(basename "$b")
  start=$(date +%s)
  timeout "${NANOVLLM_BENCH_TIMEOUT:-150}" stdbuf -oL "$b" 2>&1 | tee "$logs/$name.log" | grep -v '^JSON '
  rc=${PIPESTATUS[0]}
  rows+=("$(printf '%-28s rc=%-3s %4ss  (bench)' "$name" "$rc" "$(( $(date +%s) - start ))")")
done

echo
echo "=== summary ==="
for r in "${rows[@]}"; do echo "$r"; done
grep -h '^JSON' "$logs"/*_bench.log 2>/dev/null | sed 's/^JSON //' > "$logs/bench.jsonl" || true
