#!/usr/bin/env bash
# On the GPU machine (from the repository root, with the bundle): tensor parallelism in the
# whole runtime, at --tp 1, 2 and 4 (as the GPUs allow), with the peer-memory all-reduce
# ("peer") and with --disable-custom-all-reduce ("nccl"). Phases (TP_CHECK_PHASES, default
# "greedy bench knockout"; TP_CHECK_WAYS, default "peer nccl"):
#   greedy    nanovllm-launch on the examples, token ids compared with --tp 1's;
#   bench     nanovllm-bench --tp 1,2[,4] on nano-vllm's workload and the decode step (the
#             nccl way skips tp 1, the same run as peer's);
#   knockout  the decode step again with --knock-out-all-reduce at every tp above 1: beside the
#             bench phase's peer figures, the all-reduces' share of the step inside its graph;
#   latency   batch 1 (512 prompt / 512 output tokens: TPOT) and a 32k-token prompt (TTFT:
#             the prefill rate), per tp, with the ratios to tp 1.
# Usage: bash scripts/tp_peer_check.sh PRESET [RUNS]
# Logs and JSONs go to /tmp/tp_check_PRESET (kept across calls, so phases may run apart: the
# knockout reads the bench phase's JSON), packed after every phase into $OUT/tp_check_PRESET.tgz
# (or /tmp): the device tool returns only a few files of $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset=${1:?usage: tp_peer_check.sh PRESET [RUNS]}
runs=${2:-1}
source scripts/gpu_check_env.sh
final=$out
out=/tmp/tp_check_$preset
mkdir -p "$out"
pack() { tar -czf "$final/tp_check_$preset.tgz" -C "$out" .; }
phases=" ${TP_CHECK_PHASES:-greedy bench knockout} "
has() { [[ "$phases" == *" $1 "* ]]; }
ways=${TP_CHECK_WAYS:-peer nccl}
make_model "$preset"
tps=1; for t in 2 4 8; do [ "$gpus" -ge "$t" ] && tps="$tps,$t"; done
multi=${tps#1,}  # the sizes above 1
bench=("$bundle/bin/nanovllm-bench" "$work/$preset" --device cuda --runs "$runs")
way_flag() { [ "$1" = nccl ] && echo --disable-custom-all-reduce; }

if has greedy; then
  for tp in ${tps//,/ }; do
    for way in $ways; do
      [ "$tp" = 1 ] && [ $way = nccl ] && continue
      in_background timeout 300 "$bundle/bin/nanovllm-launch" "$work/$preset" examples/prompts.jsonl \
        --device cuda --tp "$tp" --temperature 0 $(way_flag $way) \
        -o "$out/greedy_tp${tp}_$way.jsonl" >"$out/greedy_tp${tp}_$way.log" 2>&1
      echo "launch tp$tp $way rc=$? $(grep -o 'peer-memory all-reduce over.*\|through NCCL only' \
        "$out/greedy_tp${tp}_$way.log" | head -1)"
    done
  done
  python3 scripts/compare_greedy.py "$out/greedy_tp1_peer.jsonl" "$out"/greedy_tp[248]_*.jsonl
fi
pack

# Per tp of a bench JSON: nano-vllm's workload and the decode step.
summarize() {
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d.get("per_tp", [d]):
    w = {x["name"]: x for x in r["workloads"]}.get("nanovllm", {}).get("median", {})
    s = r.get("decode_step") or {}
    ph = s.get("phases_ms") or {}
    print(f"  {sys.argv[2]} tp {r['tp']}: nanovllm {w.get('output_tok_s', 0):.0f} out tok/s "
          f"({w.get('pct_of_limit') or 0:.1f} % of limit); decode step b{s.get('batch')} "
          f"{s.get('step_ms', 0):.3f} ms (limit {s.get('limit_ms') or 0:.3f}), eager all_reduce "
          f"{ph.get('all_reduce', 0):.3f} of {s.get('eager_step_ms', 0):.3f} ms")
PY
}
if has bench; then
  for way in $ways; do
    sizes=$tps; [ $way = nccl ] && sizes=$multi
    in_background timeout 500 "${bench[@]}" --tp "$sizes" --sampling model-defaults \
      --workloads nanovllm,decode-step $(way_flag $way) --json "$out/bench_$way.json" \
      >"$out/bench_$way.txt" 2>"$out/bench_$way.err"
    echo "bench $preset $way rc=$?"
    summarize "$out/bench_$way.json" "$way"
  done
fi
pack

if has knockout && [ "$multi" != 1 ]; then
  in_background timeout 300 "${bench[@]}" --tp "$multi" --sampling model-defaults --workloads decode-step \
    --knock-out-all-reduce --json "$out/bench_knockout.json" >"$out/bench_knockout.txt" \
    2>"$out/bench_knockout.err"
  echo "bench $preset knockout rc=$?"
  python3 - "$out/bench_peer.json" "$out/bench_knockout.json" <<'PY'
import json, sys
def steps(path):
    try:
        d = json.load(open(path))
    except (OSError, ValueError):
        return {}
    return {r["tp"]: r.get("decode_step") or {} for r in d.get("per_tp", [d])}
full, knocked = steps(sys.argv[1]), steps(sys.argv[2])
for tp, k in sorted(knocked.items()):
    f = full.get(tp, {})
    if not f.get("step_ms") or not k.get("step_ms"):
        print(f"  tp {tp}: no decode step to compare")
        continue
    ar = f["step_ms"] - k["step_ms"]
    print(f"  tp {tp}: decode step b{f.get('batch')} {f['step_ms']:.3f} ms, all-reduces knocked "
          f"out {k['step_ms']:.3f} ms: all-reduce {ar:.3f} ms = {100 * ar / f['step_ms']:.1f} % "
          f"of the step in its graph (eager profile: {(f.get('phases_ms') or {}).get('all_reduce', 0):.3f} ms)")
PY
fi
pack

if has latency; then
  in_background timeout 300 "${bench[@]}" --tp "$tps" --workloads latency --input-len 512 --output-len 512 \
    --json "$out/bench_latency.json" >"$out/bench_latency.txt" 2>"$out/bench_latency.err"
  echo "bench $preset latency 512/512 rc=$?"
  in_background timeout 300 "${bench[@]}" --tp "$tps" --workloads latency --input-len 32768 --output-len 1 \
    --max-model-len 33024 --json "$out/bench_prefill32k.json" >"$out/bench_prefill32k.txt" \
    2>"$out/bench_prefill32k.err"
  echo "bench $preset prefill 32k rc=$?"
  python3 - "$out/bench_latency.json" "$out/bench_prefill32k.json" <<'PY'
import json, sys
def medians(path):
    try:
        d = json.load(open(path))
    except (OSError, ValueError):
        return {}
    return {r["tp"]: r["workloads"][0]["median"] for r in d.get("per_tp", [d]) if r["workloads"]}
lat, pre = medians(sys.argv[1]), medians(sys.argv[2])
for tp in sorted(set(lat) | set(pre)):
    t, p = lat.get(tp, {}), pre.get(tp, {})
    t1, p1 = lat.get(1, {}), pre.get(1, {})
    tpot, ttft = t.get("tpot_ms"), p.get("ttft_ms")
    r_tpot = f"{tpot / t1['tpot_ms']:.3f}x tp 1" if tpot and t1.get("tpot_ms") else "-"
    r_pre = f"{p1['ttft_ms'] / ttft:.2f}x tp 1's rate" if ttft and p1.get("ttft_ms") else "-"
    print(f"  tp {tp}: batch-1 TPOT {tpot or 0:.3f} ms ({r_tpot}); 32k prompt TTFT "
          f"{ttft or 0:.1f} ms = {32768 / (ttft or 1) * 1e3:.0f} tok/s ({r_pre})")
PY
fi
pack
