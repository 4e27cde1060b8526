#!/usr/bin/env bash
# On the GPU machine (from the repository root, with the bundle): the peer-memory all-reduce in
# the whole runtime. Greedy nanovllm-launch on the examples at --tp 1, 2 and 4 (as the GPUs
# allow), with the peer path and with --disable-custom-all-reduce, token ids compared with
# --tp 1; then nanovllm-bench --tp 1,2[,4] on nano-vllm's workload and the decode step, both
# ways. Usage: bash scripts/tp_peer_check.sh PRESET [RUNS]   (logs and JSON in $OUT or /tmp)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset=${1:?usage: tp_peer_check.sh PRESET [RUNS]}
runs=${2:-1}
source scripts/gpu_check_env.sh
make_model "$preset"
tps=1; for t in 2 4; do [ "$gpus" -ge "$t" ] && tps="$tps,$t"; done
for tp in ${tps//,/ }; do
  for way in peer nccl; do
    flag=(); [ $way = nccl ] && flag=(--disable-custom-all-reduce)
    [ "$tp" = 1 ] && [ $way = nccl ] && continue
    timeout 200 "$bundle/bin/nanovllm-launch" "$work/$preset" examples/prompts.jsonl --device cuda \
      --tp "$tp" --temperature 0 "${flag[@]}" -o "$out/greedy_tp${tp}_$way.jsonl" >"$out/greedy_tp${tp}_$way.log" 2>&1
    echo "launch tp$tp $way rc=$? $(grep -o 'peer-memory all-reduce over.*\|through NCCL only' "$out/greedy_tp${tp}_$way.log" | head -1)"
  done
done
python3 scripts/compare_greedy.py "$out/greedy_tp1_peer.jsonl" "$out"/greedy_tp[24]_*.jsonl
for way in peer nccl; do
  flag=(); [ $way = nccl ] && flag=(--disable-custom-all-reduce)
  timeout 400 "$bundle/bin/nanovllm-bench" "$work/$preset" --device cuda --tp "$tps" --runs "$runs" \
    --sampling model-defaults --workloads nanovllm,decode-step "${flag[@]}" \
    --json "$out/bench_${preset}_$way.json" >"$out/bench_${preset}_$way.txt" 2>"$out/bench_${preset}_$way.err"
  echo "bench $preset $way rc=$?"
  python3 - "$out/bench_${preset}_$way.json" "$way" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d.get("per_tp", [d]):
    w = {x["name"]: x for x in r["workloads"]}.get("nanovllm", {}).get("median", {})
    s = r.get("decode_step") or {}
    ph = s.get("phases_ms") or {}
    print(f"  {sys.argv[2]} tp {r['tp']}: nanovllm {w.get('output_tok_s', 0):.0f} out tok/s "
          f"({w.get('pct_of_limit') or 0:.1f} % of limit); decode step b{s.get('batch')} "
          f"{s.get('step_ms', 0):.3f} ms (limit {s.get('limit_ms', 0):.3f}), eager all_reduce "
          f"{ph.get('all_reduce', 0):.3f} of {s.get('eager_step_ms', 0):.3f} ms")
PY
done
