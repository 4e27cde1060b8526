#!/usr/bin/env bash
# On the GPU machine (from the repository root, with the bundle): nano-vllm's bench.py flow
# through the Python API (python/nanovllm over bundle/bin/libnanovllm.so) beside
# nanovllm-bench on the same workload (bench/data/nanovllm_workload.jsonl: 256 requests, their
# prompt token ids and max_tokens, temperature 0.6, ignore_eos), at tensor_parallel_size 1 and,
# where 2 GPUs are visible, 2. Prints both output tok/s and their ratio.
# Usage: bash scripts/python_api_check.sh PRESET   (logs in $OUT or /tmp)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset=${1:?usage: python_api_check.sh PRESET}
source scripts/gpu_check_env.sh
export NANOVLLM_LIB=$PWD/$bundle/bin/libnanovllm.so NANOVLLM_WORKER=$PWD/$bundle/bin/nanovllm-worker
export PYTHONPATH=$PWD/python
make_model "$preset"
tps=1; [ "$gpus" -ge 2 ] && tps="1 2"
for tp in $tps; do
  timeout 300 python3 - "$work/$preset" "$tp" >"$out/python_tp$tp.txt" 2>"$out/python_tp$tp.err" <<'PY'
# nano-vllm's bench.py, its workload read from the committed file instead of drawn again.
import json, sys, time
from nanovllm import LLM, SamplingParams
model, tp = sys.argv[1], int(sys.argv[2])
lines = [json.loads(l) for l in open("bench/data/nanovllm_workload.jsonl")]
llm = LLM(model, tensor_parallel_size=tp)
prompt_token_ids = [j["prompt_token_ids"] for j in lines]
sampling_params = [SamplingParams(temperature=0.6, ignore_eos=True, max_tokens=j["max_tokens"])
                   for j in lines]
llm.generate(["Benchmark: "], SamplingParams())
t = time.time()
outputs = llm.generate(prompt_token_ids, sampling_params, use_tqdm=False)
t = time.time() - t
total = sum(len(o["token_ids"]) for o in outputs)
assert total == sum(j["max_tokens"] for j in lines), total
print(f"python tp {tp}: {total} tok, {t:.2f} s, {total / t:.1f} out tok/s")
PY
  echo "python rc=$? $(cat "$out/python_tp$tp.txt")"
  timeout 300 "$bundle/bin/nanovllm-bench" "$work/$preset" --device cuda --tp "$tp" --runs 1 \
    --workloads nanovllm --json "$out/bench_py_tp$tp.json" >"$out/bench_py_tp$tp.txt" 2>&1
  bench=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({w['name']: w for w in d['workloads']}['nanovllm']['median']['output_tok_s'])" "$out/bench_py_tp$tp.json")
  py=$(grep -o '[0-9.]* out tok/s' "$out/python_tp$tp.txt" | grep -o '^[0-9.]*')
  echo "tp $tp: nanovllm-bench $bench out tok/s, Python API $py: $(python3 -c "print(f'{$py/$bench:.3f}x')" 2>/dev/null)"
done
