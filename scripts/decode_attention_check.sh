#!/usr/bin/env bash
# On the GPU machine (from the repository root, with the bundle): the tensor-core decode
# attention (kernels/cuda/decode_attention_mma.cuh) against the lane-group kernel in whole runs,
# one GPU, for issues 33 and 34 (correctness is the other scripts': attention_cuda_test runs every
# decode case on both kernels in fp8_check.sh's kernels and regress phases, gpu_generation_test in
# run_gpu_checks.sh (bf16) and fp8_check.sh's generation phase; fp8 beside bf16 is fp8_check.sh's
# speed and long phases).
#   speed: nanovllm-bench per preset with NANOVLLM_DECODE_ATTENTION=lanes, then with the default
#          (mma), in the same call: nano-vllm's workload, batch 1 / 16 / 64 / 256 x 512/512,
#          256 x 128/128, the decode step at 16 / 64 / 256;
#   ncu:   (only when named) per preset and cache, ncu's speed-of-light, warp-state, occupancy
#          and instruction sections of two decode-attention launches of an eager decode step at
#          batch 60, context 1024, for each kernel (lanes, mma). The cache is held to 300 blocks:
#          ncu backs device memory up for each replay, which did not finish with a 120 GiB cache.
# Usage: DA_CHECK_PHASES="speed ncu" bash scripts/decode_attention_check.sh qwen3-0.6b [qwen3-8b ...]
# Logs and JSONs go to a scratch folder, packed after every phase into
# $OUT/decode_attention_check.tgz (the device tool returns only a few files of $OUT).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -ge 1 ] || { echo "usage: decode_attention_check.sh PRESET..." >&2; exit 2; }
source scripts/gpu_check_env.sh
final=$out
out=$(mktemp -d /tmp/da_check.XXXXXX)
pack() { tar -czf "$final/decode_attention_check.tgz" -C "$out" .; }
phases=" ${DA_CHECK_PHASES:-speed} "
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

for preset in "$@"; do
  make_model "$preset"
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
