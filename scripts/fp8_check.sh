#!/usr/bin/env bash
# On the GPU machine (from the repository root, with the bundle and the kernel test binaries
# in build-mini/): the fp8 KV cache (issue 34) on one GPU.
#   1. kernels: the fp8 cases of attention_cuda_test and rotary_cuda_test (every kernel that
#      touches the cache against the CPU reference); phase regress: their bf16 cases and
#      decode_attention_new_token_cuda_test (the kernels' bf16 paths changed with fp8);
#   2. accuracy: scripts/check_fp8_kv_vs_transformers.py on PRESET (bf16 and fp8 caches
#      against transformers FP32 on 1k / 8k / 32k prompts, transformers BF16 alone and with
#      the same E4M3 rows beside them; about 75 s on the 8B shape);
#   generation: gpu_generation_test with NANOVLLM_GPU_KV_CACHE_DTYPE=fp8 against a fresh
#      transformers reference (scripts/make_gpu_reference.py): prefix caching, chunked
#      prefill, CUDA graphs and preemption on an fp8 cache, and its figures against FP32;
#   fields: examples/request_fields.jsonl on the tiny preset with an fp8 cache, --device cuda
#      against --device cpu (the CPU reference backend's fp8 cache): n > 1 forks, which share
#      their prompt's blocks, stop strings and ids, min_tokens (scripts/compare_request_fields.py);
#   3. speed: nanovllm-bench with --kv-cache-dtype bfloat16 and fp8, each: 256 x 512/512
#      (fixed), nano-vllm's workload, the decode step at batch 8 and 256 (context 1024), and
#      the blocks each cache gets; phase long: the decode step at batch 8 and context 32768
#      and the long workload (prefill of 4k-32k prompts).
# Usage: bash scripts/fp8_check.sh PRESET   (FP8_CHECK_PHASES picks phases; FP8_CHECK_CACHE=int8
# checks --kv-cache-dtype int8 the same way: its kernel test cases, accuracy, generation,
# fields, long and speed runs, with "fp8" in the logs' names standing for it;
# FP8_CHECK_SPEED_DTYPES="bfloat16 fp8 int8" times all three caches in one speed phase)
# Logs and JSONs go to a scratch folder, packed after every phase into $OUT/fp8_check_logs.tgz
# (or /tmp): the device tool returns only a few files of $OUT, and one archive loses none.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset=${1:?usage: fp8_check.sh PRESET}
source scripts/gpu_check_env.sh
final=$out
out=$(mktemp -d /tmp/fp8_check.XXXXXX)
pack() { tar -czf "$final/fp8_check_logs.tgz" -C "$out" .; }
phases=" ${FP8_CHECK_PHASES:-kernels accuracy fields speed regress long generation} "
cache=${FP8_CHECK_CACHE:-fp8}  # the 8-bit cache checked: fp8 or int8
filter='*Fp8*'
[ "$cache" = int8 ] && filter='*Int8*'

has() { [[ "$phases" == *" $1 "* ]]; }

if has kernels; then
  for t in attention_cuda_test rotary_cuda_test; do
    timeout 60 "build-mini/$t" --gtest_filter="$filter" >"$out/$t.fp8.log" 2>&1
    echo "$t fp8: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.fp8.log" | tr '\n' ' ')"
    grep -E 'Failure|error:|Expected|Which is|rel_l2|max_abs' "$out/$t.fp8.log" | head -20
  done
fi
pack

make_model "$preset"
if has accuracy; then
  timeout 420 python3 scripts/check_fp8_kv_vs_transformers.py "$bundle/bin/nanovllm-launch" \
    "$work/$preset" "$out" "$cache" >"$out/accuracy.log" 2>&1
  echo "accuracy: rc=$?"
  grep -v '^\s*$' "$out/accuracy.log" | tail -12
fi
pack

if has regress; then
  for t in attention_cuda_test rotary_cuda_test decode_attention_new_token_cuda_test; do
    timeout 60 "build-mini/$t" --gtest_filter='-*Fp8*' >"$out/$t.log" 2>&1
    echo "$t bf16: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')"
  done
fi
pack

if has long; then
  for dt in bfloat16 "$cache"; do
    timeout 90 "$bundle/bin/nanovllm-bench" "$work/$preset" --kv-cache-dtype "$dt" --runs 1 \
      --workloads decode-step,long --decode-batch 8 --decode-context 32768 --max-model-len 40960 \
      --json "$out/bench_long_$dt.json" >"$out/bench_long_$dt.log" 2>&1
    echo "bench long $dt: rc=$?"
    grep -E '^long|decode step \(|prefill prompt' "$out/bench_long_$dt.log" | head -6
  done
fi
pack

if has generation; then
  ref="$out/reference_$preset.json"
  timeout 150 python3 scripts/make_gpu_reference.py "$work/$preset" "$ref" >"$out/reference.log" 2>&1
  echo "reference: rc=$?"
  NANOVLLM_GPU_KV_CACHE_DTYPE=$cache NANOVLLM_GPU_MODEL_DIR="$work/$preset" \
    NANOVLLM_GPU_REFERENCE="$ref" timeout 150 build-mini/gpu_generation_test >"$out/generation_fp8.log" 2>&1
  echo "gpu_generation_test fp8: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/generation_fp8.log" | tr '\n' ' ')"
  grep -E '^\[ +(OK|FAILED) +\]|^\[qwen|tolerances|mean' "$out/generation_fp8.log" | head -30
  grep -A8 'Failure' "$out/generation_fp8.log" | cut -c1-300 | head -60
fi
pack

if has fields; then
  make_model tiny
  for dev in cuda cpu; do
    timeout 150 "$bundle/bin/nanovllm-launch" "$work/tiny" examples/request_fields.jsonl \
      --device "$dev" --kv-cache-dtype "$cache" -o "$out/fields_fp8_$dev.jsonl" \
      >"$out/fields_fp8_$dev.log" 2>&1
    echo "fields fp8 $dev: rc=$?"
  done
  python3 scripts/compare_request_fields.py "$out/fields_fp8_cuda.jsonl" \
    "$out/fields_fp8_cpu.jsonl" cuda cpu
fi
pack

if has speed; then
  for dt in ${FP8_CHECK_SPEED_DTYPES:-bfloat16 $cache}; do
    timeout 150 "$bundle/bin/nanovllm-bench" "$work/$preset" --kv-cache-dtype "$dt" --runs 1 \
      --workloads fixed,nanovllm,decode-step --num-seqs 256 --input-len 512 --output-len 512 \
      --decode-batch 8,256 --decode-context 1024 --json "$out/bench_$dt.json" >"$out/bench_$dt.log" 2>&1
    echo "bench $dt: rc=$?"
    grep -E 'KV cache:|^fixed|^nanovllm |decode step \(' "$out/bench_$dt.log" | head -8
  done
fi
pack
