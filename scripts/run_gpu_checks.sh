#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with the bundle built by
# scripts/build_bundle.sh. Phases (arguments; default: all, in this order):
#   kernels  every GPU kernel test binary, each test case alone under a timeout
#   bench    every kernel benchmark
#   model    per preset (NANOVLLM_GPU_PRESETS, default "qwen3-0.6b qwen3-1.7b"): write the
#            random-weight model (nanovllm-mkmodel, seed 1), make the transformers reference
#            (scripts/make_gpu_reference.py, FP32 + BF16), run gpu_generation_test against it
#   launch   nanovllm-launch --device cuda on examples/prompts.jsonl (tiny model with the real
#            tokenizer, then the first preset's model): exit 0 and one result per request
#            (run right after the first preset, so a slow second preset cannot starve it);
#            then examples/request_fields.jsonl on the tiny model, --device cuda vs cpu
#   fields-hf  on the first preset's model (written by phase model, or here): logprobs,
#            prompt_logprobs and repetition_penalty of nanovllm-launch against transformers
#            (scripts/check_request_fields_vs_transformers.py)
#   long-hf  on the first preset's model: 8k / 32k prompts with plain RoPE and 64k / 120k with
#            YaRN (--rope-scaling) against transformers at sampled positions
#            (scripts/check_long_context_vs_transformers.py; not in the default phases: ~2 min)
#   startup  on the first preset's model: the start-up sweep (--max-num-seqs 1, 2, 3, 5, 7, and
#            1 with --enforce-eager, each on examples/prompts.jsonl: exit 0, every result), then
#            the examples at --tp 1, 2 and 4 where that many GPUs are visible (no "CUDA graphs
#            use ... more" warning on any rank; the graphs' measured memory beside the estimate),
#            then the launcher's closing summary beside nanovllm-bench on nano-vllm's workload
#            (their generation throughputs within 3 %)
#   tp       per preset (NANOVLLM_GPU_TP_PRESETS, default "qwen3-0.6b"), on >= 2 GPUs: greedy
#            nanovllm-launch --tp 1 and --tp 2 on the examples (token ids compared per request,
#            the first divergence reported), then nanovllm-bench --tp 1,2 (nano-vllm's
#            workload and the decode step, whose all_reduce phase is the per-step figure);
#            skipped, saying so, on one GPU
# Logs go to $OUT (when set) or bundle/logs; a summary table is printed last (and kept in
# summary.txt as it grows). A global budget (NANOVLLM_GPU_BUDGET seconds, default 540) caps
# every step's timeout so the summary is printed before a 600 s device call ends.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bundle=${NANOVLLM_BUNDLE_DIR:-bundle}
# The bundle travels as build-bundle/bundle.tar.xz (scripts/build_bundle.sh) when bundle/ is
# too big to carry as it is.
if [ ! -d "$bundle" ] && [ -f build-bundle/bundle.tar.xz ]; then
  tar -C "$(dirname "$bundle")" -xJf build-bundle/bundle.tar.xz
fi
logs=${OUT:-$bundle/logs}
work=${NANOVLLM_GPU_WORK:-/tmp/nanovllm_gpu}
phases=" ${*:-kernels bench model launch fields-hf} "
presets=${NANOVLLM_GPU_PRESETS:-qwen3-0.6b qwen3-1.7b}
budget=${NANOVLLM_GPU_BUDGET:-540}
mkdir -p "$logs" "$work"
export LD_LIBRARY_PATH="$(realpath -m "$bundle/lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NCCL: the GPU machine has libnccl.so.2 in pip's nvidia-nccl package, not on the loader path.
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'; then
  nccl_lib=$(python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0] + "/lib")' 2>/dev/null || true)
  [ -n "$nccl_lib" ] && [ -d "$nccl_lib" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_lib"
fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
t0=$(date +%s)
declare -a rows

has_phase() { [[ "$phases" == *" $1 "* ]]; }
remaining() { echo $(( budget - ($(date +%s) - t0) )); }
# The smaller of a step's own timeout and what is left of the budget (minus 15 s for the
# summary); 0 when nothing is left.
cap() { local r; r=$(( $(remaining) - 15 )); [ "$r" -lt 0 ] && r=0; echo $(( $1 < r ? $1 : r )); }
row() { rows+=("$1"); echo "$1" >>"$logs/summary.txt"; }

# step NAME TIMEOUT CMD...: runs CMD under the capped timeout, logs to $logs/NAME.log.
step() {
  local name=$1 limit; limit=$(cap "$2"); shift 2
  local log="$logs/${name// /_}.log" start rc
  if [ "$limit" -le 0 ]; then row "$(printf '%-34s  SKIPPED (budget spent)' "$name")"; return 1; fi
  echo "=== $name (timeout ${limit}s)"
  start=$(date +%s)
  timeout "$limit" stdbuf -oL -eL "$@" >"$log" 2>&1
  rc=$?
  local verdict=ok
  if [ $rc -eq 124 ]; then verdict="HUNG (timeout ${limit}s)"; elif [ $rc -ne 0 ]; then verdict="FAILED rc=$rc"; fi
  [ $rc -ne 0 ] && tail -n 20 "$log"
  row "$(printf '%-34s %4ss  %s' "$name" "$(( $(date +%s) - start ))" "$verdict")"
  return $rc
}

# run_cases NAME BINARY TIMEOUT: each test case alone under a timeout, line-buffered, so a
# hang costs one case, not all.
run_cases() {
  local name=$1 t=$2 per_case=$3 log="$logs/$1.log" passed=0 failed=0 skipped=0 hung=0 start limit rc
  start=$(date +%s)
  for tc in $("$t" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}'); do
    limit=$(cap "$per_case")
    if [ "$limit" -le 0 ]; then echo "BUDGET SPENT before $tc" | tee -a "$log"; hung=$((hung + 1)); continue; fi
    timeout "$limit" stdbuf -oL -eL "$t" --gtest_filter="$tc" >>"$log" 2>&1
    rc=$?
    if [ $rc -eq 124 ]; then hung=$((hung + 1)); echo "HUNG $tc" | tee -a "$log"
    elif [ $rc -ne 0 ]; then failed=$((failed + 1)); echo "FAILED $tc (rc $rc)"
    elif grep -q "^\[  SKIPPED \] $tc" "$log"; then skipped=$((skipped + 1))
    else passed=$((passed + 1)); fi
  done
  grep -E '^\[  FAILED|Failure|Expected|Which is|actual|rel_l2|HUNG|BUDGET|error' "$log" | head -n 40
  row "$(printf '%-34s %4ss  passed=%-3s failed=%-3s hung=%-3s skipped=%s' "$name" \
    "$(( $(date +%s) - start ))" "$passed" "$failed" "$hung" "$skipped")"
}

# ensure_model PRESET: $work/PRESET holds the preset's random-weight model (seed 1); written by
# nanovllm-mkmodel unless an earlier phase (model) already did.
ensure_model() {
  local preset=$1 tok=()
  [ -f "$work/$preset/config.json" ] && return 0
  [ -d "$bundle/tokenizer" ] && tok=(--tokenizer-dir "$bundle/tokenizer")
  step "mkmodel $preset" 240 "$bundle/bin/nanovllm-mkmodel" --preset "$preset" --seed 1 \
    --threads "$(nproc)" "${tok[@]}" "$work/$preset"
}

model_checks() {
  local preset=$1 dir="$work/$1" ref="$logs/reference_$1.json" tok=()
  [ -d "$bundle/tokenizer" ] && tok=(--tokenizer-dir "$bundle/tokenizer")
  if [ ! -x "$bundle/bin/nanovllm-mkmodel" ]; then row "$(printf '%-34s  MISSING' "nanovllm-mkmodel")"; return; fi
  step "mkmodel $preset" 240 "$bundle/bin/nanovllm-mkmodel" --preset "$preset" --seed 1 \
    --threads "$(nproc)" "${tok[@]}" "$dir" || return
  step "reference $preset" 300 python3 scripts/make_gpu_reference.py "$dir" "$ref" || return
  grep -h 'hf bf16 vs fp32' "$logs/reference_$preset.log"
  [ -x "$bundle/tests/gpu_generation_test" ] || { row "$(printf '%-34s  MISSING' gpu_generation_test)"; return; }
  NANOVLLM_GPU_MODEL_DIR="$dir" NANOVLLM_GPU_REFERENCE="$ref" \
    run_cases "gpu_generation_$preset" "$bundle/tests/gpu_generation_test" 150
}

# launch_check NAME MODEL_DIR: nanovllm-launch on the README's example prompts.
launch_check() {
  local name=$1 dir=$2 out="$logs/launch_$1.jsonl"
  step "launch $name" 150 "$bundle/bin/nanovllm-launch" "$dir" examples/prompts.jsonl \
    --device cuda -o "$out" || return
  python3 - "$out" examples/prompts.jsonl <<'EOF' >>"$logs/launch_${name}_check.log" 2>&1
import json, sys
results = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# OpenAI batch lines are named by custom_id (their "id" is the batch request id we made up).
def name(r):
    return r.get("custom_id", r.get("id"))
want = [name(json.loads(l)) for l in open(sys.argv[2]) if l.strip()]
got = [name(r) for r in results]
errors = [r for r in results if r.get("error") is not None]  # batch lines carry "error": null
print(f"{len(results)} results for {len(want)} requests, {len(errors)} errors")
sys.exit(0 if sorted(map(str, got)) == sorted(map(str, want)) and not errors else 1)
EOF
  local rc=$?
  row "$(printf '%-34s        %s: %s' "launch $name results" "$([ $rc -eq 0 ] && echo ok || echo FAILED)" \
    "$(tail -n 1 "$logs/launch_${name}_check.log")")"
}

# tp_checks PRESET: --tp 1 vs --tp 2 on the examples, greedy, then the benchmark's scaling.
tp_checks() {
  local preset=$1 dir="$work/$1"
  ensure_model "$preset" || return
  local tp
  for tp in 1 2; do
    step "tp$tp launch $preset" 200 "$bundle/bin/nanovllm-launch" "$dir" examples/prompts.jsonl \
      --device cuda --tp "$tp" --temperature 0 -o "$logs/tp${tp}_$preset.jsonl" || return
  done
  python3 scripts/compare_greedy.py "$logs/tp1_$preset.jsonl" "$logs/tp2_$preset.jsonl" \
    >"$logs/tp_${preset}_compare.log" 2>&1
  row "$(printf '%-34s        %s' "tp1 vs tp2 $preset" "$(tail -n 1 "$logs/tp_${preset}_compare.log")")"
  [ -x "$bundle/bin/nanovllm-bench" ] && step "tp bench $preset" 300 "$bundle/bin/nanovllm-bench" \
    "$dir" --device cuda --tp 1,2 --workloads nanovllm,decode-step --json "$logs/tp_bench_$preset.json"
}

# fields_check NAME MODEL_DIR: examples/request_fields.jsonl (greedy: stop strings, stop ids,
# min_tokens, n, special tokens) on --device cuda and --device cpu: the same results.
fields_check() {
  local name=$1 dir=$2 dev
  for dev in cuda cpu; do
    step "fields $dev $name" 150 "$bundle/bin/nanovllm-launch" "$dir" examples/request_fields.jsonl \
      --device "$dev" -o "$logs/fields_${dev}_$name.jsonl" || return
  done
  python3 scripts/compare_request_fields.py "$logs/fields_cuda_$name.jsonl" \
    "$logs/fields_cpu_$name.jsonl" cuda cpu >"$logs/fields_${name}_compare.log" 2>&1
  row "$(printf '%-34s        %s' "fields cuda vs cpu $name" "$(tail -n 1 "$logs/fields_${name}_compare.log")")"
}

# fields_hf_check PRESET: scripts/check_request_fields_vs_transformers.py on its model.
fields_hf_check() {
  local preset=$1 dir="$work/$1"
  ensure_model "$preset" || return
  step "fields-hf $preset" 300 python3 scripts/check_request_fields_vs_transformers.py \
    "$bundle/bin/nanovllm-launch" "$dir" "$logs"
  row "$(printf '%-34s        %s' "fields vs transformers $preset" \
    "$(grep -h 'request fields vs transformers' "$logs/fields-hf_$preset.log" | tail -n 1)")"
}

# long_hf_check PRESET: scripts/check_long_context_vs_transformers.py on its model.
long_hf_check() {
  local preset=$1 dir="$work/$1"
  ensure_model "$preset" || return
  step "long-hf $preset" 540 python3 \
    scripts/check_long_context_vs_transformers.py "$bundle/bin/nanovllm-launch" "$dir" "$logs"
  row "$(printf '%-34s        %s' "long context vs transformers $preset" \
    "$(grep -h 'long context vs transformers' "$logs/long-hf_$preset.log" | tail -n 1)")"
}

# launch_results_check NAME OUT: every request of examples/prompts.jsonl answered, no error.
launch_results_check() {
  python3 - "$2" examples/prompts.jsonl <<'EOF4' >"$logs/$1_check.log" 2>&1
import json, sys
results = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
name = lambda r: r.get("custom_id", r.get("id"))
want = sorted(str(name(json.loads(l))) for l in open(sys.argv[2]) if l.strip())
errors = [r for r in results if r.get("error") is not None]
print(f"{len(results)} results for {len(want)} requests, {len(errors)} errors")
sys.exit(0 if sorted(str(name(r)) for r in results) == want and not errors else 1)
EOF4
  local rc=$?
  row "$(printf '%-34s        %s: %s' "$1 results" "$([ $rc -eq 0 ] && echo ok || echo FAILED)" \
    "$(tail -n 1 "$logs/$1_check.log")")"
}

# startup_checks PRESET: issue 30's start-up sweep, graph-memory warnings at --tp 1/2/4, and the
# launcher's summary against nanovllm-bench on the same workload.
startup_checks() {
  local preset=$1 dir="$work/$1" n tp gpus
  ensure_model "$preset" || return
  for n in 1 2 3 5 7; do
    step "startup max-num-seqs $n" 120 "$bundle/bin/nanovllm-launch" "$dir" examples/prompts.jsonl \
      --device cuda --max-num-seqs "$n" -o "$logs/startup_seqs$n.jsonl" &&
      launch_results_check "startup_seqs$n" "$logs/startup_seqs$n.jsonl"
  done
  step "startup max-num-seqs 1 eager" 120 "$bundle/bin/nanovllm-launch" "$dir" examples/prompts.jsonl \
    --device cuda --max-num-seqs 1 --enforce-eager -o "$logs/startup_seqs1_eager.jsonl" &&
    launch_results_check "startup_seqs1_eager" "$logs/startup_seqs1_eager.jsonl"
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  # 520 short requests: max_num_seqs stays at its default 512, so all 36 decode graphs exist
  # (the launcher lowers max_num_seqs to the requests a file has, so the examples get fewer).
  python3 -c 'import json; [print(json.dumps({"id": f"r{i}", "prompt": f"Count: {i} {i+1}", "max_tokens": 4})) for i in range(520)]' \
    >"$work/many_prompts.jsonl"
  local file tag
  for tp in 1 2 4; do
    [ "${gpus:-0}" -ge "$tp" ] || { row "$(printf '%-34s  SKIPPED (%s GPUs)' "startup tp$tp" "${gpus:-0}")"; continue; }
    for file in examples/prompts.jsonl "$work/many_prompts.jsonl"; do
      tag=tp$tp; [[ $file == */many_prompts.jsonl ]] && tag=tp${tp}_many
      step "startup $tag" 200 "$bundle/bin/nanovllm-launch" "$dir" "$file" \
        --device cuda --tp "$tp" -o "$logs/startup_$tag.jsonl" || continue
      [[ $file == examples/* ]] && launch_results_check "startup_$tag" "$logs/startup_$tag.jsonl"
      row "$(printf '%-34s        %s graph warnings; %s' "startup $tag graphs" \
        "$(grep -c 'CUDA graphs use' "$logs/startup_$tag.log")" \
        "$(grep -o 'captured [0-9]* decode CUDA graphs.*' "$logs/startup_$tag.log" | sed 's/ (batch[^)]*)//' | sort -u | tr '\n' ';')")"
    done
  done
  [ -x "$bundle/bin/nanovllm-bench" ] || return
  # The same workload (nano-vllm's, model defaults) through both tools; bench's own data file.
  step "startup launch nanovllm workload" 200 "$bundle/bin/nanovllm-launch" "$dir" \
    "$bundle/share/nanovllm/bench/data/nanovllm_workload.jsonl" --device cuda --ignore-eos \
    -o "$logs/startup_workload.jsonl"
  step "startup bench nanovllm workload" 300 "$bundle/bin/nanovllm-bench" "$dir" --device cuda \
    --workloads nanovllm --json "$logs/startup_bench.json"
  python3 scripts/compare_launch_bench.py "$logs/startup_launch_nanovllm_workload.log" \
    "$logs/startup_bench.json" >"$logs/startup_compare.log" 2>&1
  row "$(printf '%-34s        %s' "launch summary vs bench" "$(tail -n 1 "$logs/startup_compare.log")")"
}

launch_checks() {
  if [ ! -x "$bundle/bin/nanovllm-launch" ]; then row "$(printf '%-34s  MISSING (not bundled)' nanovllm-launch)"; return; fi
  if [ ! -d "$bundle/tokenizer" ]; then row "$(printf '%-34s  SKIPPED (no tokenizer)' nanovllm-launch)"; return; fi
  if step "mkmodel tiny" 60 "$bundle/bin/nanovllm-mkmodel" --preset tiny --seed 1 \
      --tokenizer-dir "$bundle/tokenizer" "$work/tiny"; then
    launch_check tiny "$work/tiny"
    fields_check tiny "$work/tiny"
  fi
  local first; first=$(echo "$presets" | awk '{print $1}')
  if has_phase model && [ -f "$work/$first/tokenizer.json" ]; then launch_check "$first" "$work/$first"; fi
}

: >"$logs/summary.txt"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv \
  2>&1 | tee "$logs/nvidia_smi.txt"

if has_phase kernels; then
  # 60 s a case: attention_cuda_test's fp8 tile-edge case takes 37 s on an H200 and its
  # equal-lengths case 28 s (mostly their CPU references), past the 30 s this used to allow.
  case_timeout=${NANOVLLM_CASE_TIMEOUT:-60}
  for name in elementwise_cuda_test linear_cuda_test sampler_cuda_test attention_cuda_test \
      $(ls "$bundle/tests" | grep -v -x -e elementwise_cuda_test -e linear_cuda_test \
        -e sampler_cuda_test -e attention_cuda_test -e gpu_generation_test); do
    [ -x "$bundle/tests/$name" ] && run_cases "$name" "$bundle/tests/$name" "$case_timeout"
  done
fi
if has_phase bench; then
  for b in "$bundle"/bench/*; do
    name=$(basename "$b")
    limit=$(cap "${NANOVLLM_BENCH_TIMEOUT:-150}")
    [ "$limit" -le 0 ] && { row "$(printf '%-34s  SKIPPED (budget spent)' "$name")"; continue; }
    start=$(date +%s)
    timeout "$limit" stdbuf -oL "$b" 2>&1 | tee "$logs/$name.log" | grep -v '^JSON '
    rc=${PIPESTATUS[0]}
    row "$(printf '%-34s rc=%-3s %4ss  (bench)' "$name" "$rc" "$(( $(date +%s) - start ))")"
  done
  grep -h '^JSON' "$logs"/*_bench.log 2>/dev/null | sed 's/^JSON //' > "$logs/bench.jsonl" || true
fi
launched=0
if has_phase model; then
  for preset in $presets; do
    model_checks "$preset"
    if has_phase launch && [ $launched -eq 0 ]; then launch_checks; launched=1; fi
  done
fi
if has_phase launch && [ $launched -eq 0 ]; then launch_checks; fi
if has_phase fields-hf; then fields_hf_check "$(echo "$presets" | awk '{print $1}')"; fi
if has_phase long-hf; then long_hf_check "$(echo "$presets" | awk '{print $1}')"; fi
if has_phase startup; then startup_checks "$(echo "$presets" | awk '{print $1}')"; fi
if has_phase tp; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [ "${gpus:-0}" -lt 2 ]; then
    row "$(printf '%-34s  SKIPPED (%s GPU visible, needs 2)' "tp" "${gpus:-0}")"
  else
    for preset in ${NANOVLLM_GPU_TP_PRESETS:-qwen3-0.6b}; do tp_checks "$preset"; done
  fi
fi

echo
echo "=== figures ==="
grep -h -E '^\[(qwen3|tiny)[^]]*\] ' "$logs"/gpu_generation_*.log 2>/dev/null | sort -u
grep -h 'hf bf16 vs fp32' "$logs"/reference_*.log 2>/dev/null
echo
echo "=== summary ($(( $(date +%s) - t0 ))s in all) ==="
for r in "${rows[@]}"; do echo "$r"; done
