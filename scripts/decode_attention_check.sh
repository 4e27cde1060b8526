#!/usr/bin/env bash
# On the GPU machine (from the repository root, with the bundle and the kernel test binaries
# in build-mini/): the tensor-core decode attention (kernels/cuda/decode_attention_mma.cuh)
# against the lane-group kernel, one GPU, for issues 33 and 34.
#   tests:      attention_cuda_test's decode cases (both kernels against the CPU reference,
#               bf16 and fp8, in every split mode and in a replayed graph) and
#               decode_attention_new_token_cuda_test;
#   generation: gpu_generation_test on PRESETS' first shape against a fresh transformers
#               reference, with a bf16 and with an fp8 cache (the default kernel: mma);
#   speed:      nanovllm-bench per preset with NANOVLLM_DECODE_ATTENTION=lanes, then with the
#               default (mma), in the same call: nano-vllm's workload, batch 1 / 16 / 64 / 256
#               x 512/512, 256 x 128/128, the decode step at 16 / 64 / 256;
#   fp8:        per preset, --kv-cache-dtype bfloat16 then fp8 (both mma): 256 x 512/512,
#               nano-vllm's workload, the decode step at 8 and 256, and batch 8 at 32k context;
#   ncu:        (only when named) per preset and cache, ncu's speed-of-light, warp-state,
#               occupancy and instruction sections of two decode-attention launches of an eager
#               decode step at batch 60, context 1024, for each kernel (lanes, mma). The cache
#               is held to 300 blocks: ncu backs device memory up for each replay, which did not
#               finish with a 120 GiB cache.
# Usage: DA_CHECK_PHASES="tests generation speed fp8" bash scripts/decode_attention_check.sh
#        qwen3-0.6b [qwen3-8b ...]
# Logs and JSONs go to a scratch folder, packed after every phase into
# $OUT/decode_attention_check.tgz (the device tool returns only a few files of $OUT).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -ge 1 ] || { echo "usage: decode_attention_check.sh PRESET..." >&2; exit 2; }
source scripts/gpu_check_env.sh
final=$out
out=$(mktemp -d /tmp/da_check.XXXXXX)
pack() { tar -czf "$final/decode_attention_check.tgz" -C "$out" .; }
phases=" ${DA_CHECK_PHASES:-tests generation speed fp8} "
has() { [[ "$phases" == *" $1 "* ]]; }
bench() {  # bench NAME PRESET [ENV=VALUE...] -- ARGS...: one nanovllm-bench run, timed out alone
  local name=$1 preset=$2
  shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  in_background env "${envs[@]}" timeout 240 "$bundle/bin/nanovllm-bench" "$work/$preset" --runs 1 \
    --sampling model-defaults --json "$out/$name.json" "$@" >"$out/$name.log" 2>&1
  echo "$name: rc=$?"
  grep -E '^(nanovllm|fixed|latency) |decode step \(|KV cache:' "$out/$name.log" | head -12
}

if has tests; then
  for t in attention_cuda_test decode_attention_new_token_cuda_test; do
    in_background timeout 200 "build-mini/$t" --gtest_filter='Decode*' >"$out/$t.log" 2>&1
    echo "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')"
    grep -E 'Failure|rel_l2|max_abs|Which is' "$out/$t.log" | head -10
  done
fi
pack

for preset in "$@"; do
  make_model "$preset"
  if has generation && [ "$preset" == "$1" ]; then
    ref="$out/reference_$preset.json"
    in_background timeout 200 python3 scripts/make_gpu_reference.py "$work/$preset" "$ref" \
      >"$out/reference.log" 2>&1
    echo "reference: rc=$?"
    for dt in bfloat16 fp8; do
      NANOVLLM_GPU_KV_CACHE_DTYPE=$dt NANOVLLM_GPU_MODEL_DIR="$work/$preset" \
        NANOVLLM_GPU_REFERENCE="$ref" in_background timeout 200 build-mini/gpu_generation_test \
        >"$out/generation_$dt.log" 2>&1
      echo "gpu_generation_test $dt: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/generation_$dt.log" | tr '\n' ' ')"
      grep -A6 'Failure' "$out/generation_$dt.log" | cut -c1-300 | head -30
    done
    pack
  fi
  if has speed; then
    for kernel in lanes mma; do
      bench "speed_${preset}_$kernel" "$preset" NANOVLLM_DECODE_ATTENTION=$kernel -- \
        --workloads nanovllm,fixed,latency,decode-step --num-seqs 16,64,256 --input-len 512 \
        --output-len 512 --decode-batch 16,64,256
      bench "speed_${preset}_${kernel}_128" "$preset" NANOVLLM_DECODE_ATTENTION=$kernel -- \
        --workloads fixed --num-seqs 256 --input-len 128 --output-len 128
    done
    pack
  fi
  if has fp8; then
    for dt in bfloat16 fp8; do
      bench "fp8_${preset}_$dt" "$preset" -- --kv-cache-dtype "$dt" \
        --workloads fixed,nanovllm,decode-step --num-seqs 256 --input-len 512 --output-len 512 \
        --decode-batch 8,256 --decode-context 1024
      bench "fp8_${preset}_${dt}_32k" "$preset" -- --kv-cache-dtype "$dt" --workloads decode-step \
        --decode-batch 8 --decode-context 32768 --max-model-len 33792
    done
    pack
  fi
  if has ncu; then
    for dt in bfloat16 fp8; do
      for kernel in lanes mma; do
        NANOVLLM_DECODE_ATTENTION=$kernel in_background timeout 240 \
          /usr/local/cuda/bin/ncu --target-processes all \
          --kernel-name regex:'decode_(whole|split)_kernel' --launch-skip 200 --launch-count 2 \
          --section SpeedOfLight --section WarpStateStats --section Occupancy \
          --section InstructionStats --section LaunchStats \
          "$bundle/bin/nanovllm-bench" "$work/$preset" --runs 1 --workloads decode-step \
          --decode-batch 60 --decode-context 1024 --enforce-eager --num-gpu-blocks-override 300 \
          --kv-cache-dtype "$dt" >"$out/ncu_${preset}_${dt}_$kernel.log" 2>&1
        echo "ncu $preset $dt $kernel: rc=$?"
        grep -E 'decode_(whole|split)_kernel|Duration|DRAM Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Instructions  ' \
          "$out/ncu_${preset}_${dt}_$kernel.log" | head -16
      done
    done
    pack
  fi
done
pack
