#!/usr/bin/env bash
set -u
[ -d bundle ] || tar -xJf build-bundle/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/bundle/lib
d=/tmp/nanovllm_gpu/qwen3-0.6b; ref=/tmp/ref06.json
bundle/bin/nanovllm-mkmodel --preset qwen3-0.6b --seed 1 --threads 16 --tokenizer-dir bundle/tokenizer $d >/dev/null 2>&1
python3 scripts/make_gpu_reference.py $d $ref > /tmp/ref.log 2>&1 || { echo ref failed; tail -5 /tmp/ref.log; }
for mask in 7 0 1 2 4 3 5 6; do
  r=$(NANOVLLM_PDL_MASK=$mask NANOVLLM_GPU_MODEL_DIR=$d NANOVLLM_GPU_REFERENCE=$ref timeout 90 bundle/tests/gpu_generation_test --gtest_filter='*TinyKv*' 2>&1 | grep -E "tiny cache|PASSED|FAILED  \]" | tr '\n' ' ')
  echo "mask $mask: $r"
done
