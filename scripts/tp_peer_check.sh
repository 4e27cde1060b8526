#!/usr/bin/env bash
# On the GPU machine (from the repository root, with the bundle): tensor parallelism in the
# whole runtime, at --tp 1, 2 and 4 (as the GPUs allow), with the peer-memory all-reduce
# ("peer"), with --disable-custom-all-reduce ("nccl"), with --disable-shard-sampling
# ("gather": the logits gathered to rank 0 every step) and, in the latency phase only, with
# --knock-out-all-reduce ("knockout": no all-reduce at all, wrong outputs: the 32k prompt's
# all-reduce share). Phases
# (TP_CHECK_PHASES, default "greedy bench knockout"; TP_CHECK_WAYS, default "peer nccl"):
#   greedy    nanovllm-launch on the examples made greedy (temperature 0, no sampling fields,
#             5 top logprobs asked for), token ids compared with --tp 1's and
#             divergences judged by vLLM's near-tie rule (scripts/compare_greedy.py);
#   long      greedy on 8 prompts of about 3,000 tokens (prefill steps of 16k tokens, whose
#             all-reduces go through NCCL), 32 tokens each, every way, against --tp 1;
#   sampled   the examples with Qwen3's sampling (t 0.6, top-k 20, top-p 0.95, seeded) at every
#             tp above 1, sampled from shards and gathered: the token ids must be identical;
#   bench     nanovllm-bench --tp 1,2[,4] on nano-vllm's workload and the decode step at batch
#             256 and 12 (12 runs the padded graph of 16: its profiled pass once hung the ranks;
#             the summary reads 256) (the nccl way skips tp 1, the same run as peer's);
#   knockout  the decode step again with --knock-out-all-reduce at every tp above 1: beside the
#             bench phase's peer figures, the all-reduces' share of the step inside its graph;
#   latency   batch 1 (512 prompt / 512 output tokens: TPOT) and a 32k-token prompt (TTFT:
#             the prefill rate), per tp, with the ratios to tp 1; ways other than peer time
#             the 32k prompt only, above tp 1, against peer's tp 1.
# TP_CHECK_EXTRA: flags added to every launch and bench (e.g. "--kv-cache-dtype fp8": the same
# checks on an fp8 cache); its runs keep their logs apart (TP_CHECK_TAG, default "extra").
# Usage: bash scripts/tp_peer_check.sh PRESET [RUNS]
# Logs and JSONs go to /tmp/tp_check_PRESET[_TAG] (kept across calls, so phases may run apart:
# the knockout reads the bench phase's JSON), packed after every phase into
# $OUT/tp_check_PRESET[_TAG].tgz (or /tmp): the device tool returns only a few files of $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset=${1:?usage: tp_peer_check.sh PRESET [RUNS]}
runs=${2:-1}
source scripts/gpu_check_env.sh
final=$out
read -r -a extra <<<"${TP_CHECK_EXTRA:-}"
name=tp_check_$preset${TP_CHECK_EXTRA:+_${TP_CHECK_TAG:-extra}}
out=/tmp/$name
mkdir -p "$out"
pack() { tar -czf "$final/$name.tgz" -C "$out" .; }
phases=" ${TP_CHECK_PHASES:-greedy bench knockout} "
has() { [[ "$phases" == *" $1 "* ]]; }
ways=${TP_CHECK_WAYS:-peer nccl}
make_model "$preset"
tps=1; for t in 2 4 8; do [ "$gpus" -ge "$t" ] && tps="$tps,$t"; done
multi=${tps#1,}  # the sizes above 1
bench=("$bundle/bin/nanovllm-bench" "$work/$preset" --device cuda --runs "$runs" "${extra[@]}")
launch=("$bundle/bin/nanovllm-launch" "$work/$preset" "${extra[@]}")
way_flag() {
  case $1 in
    nccl) echo --disable-custom-all-reduce ;;
    gather) echo --disable-shard-sampling ;;
    knockout) echo --knock-out-all-reduce ;;
  esac
}
# `run_bench TAG LIMIT FLAGS...`: nanovllm-bench on the preset, $out/TAG.{json,txt,err}.
run_bench() {
  local tag=$1 limit=$2
  shift 2
  in_background timeout "$limit" "${bench[@]}" "$@" --json "$out/$tag.json" >"$out/$tag.txt" \
    2>"$out/$tag.err"
  echo "bench $preset $tag rc=$?"
}

if has greedy; then
  python3 -c '
import json, sys
with open(sys.argv[1], "w") as f:
    for line in open("examples/prompts.jsonl"):
        r = json.loads(line)
        req = r.get("body", r)  # an OpenAI batch line: its body
        for k in ("top_p", "top_k", "min_p", "seed"):
            req.pop(k, None)
        req["temperature"] = 0
        if "messages" in req and "body" in r:  # /v1/chat/completions
            req.update(logprobs=True, top_logprobs=5)
        else:
            req["logprobs"] = 5
        f.write(json.dumps(r) + "\n")
' "$out/greedy_prompts.jsonl"
  for tp in ${tps//,/ }; do
    for way in $ways; do
      [ "$tp" = 1 ] && [ $way = nccl ] && continue
      in_background timeout 300 "${launch[@]}" "$out/greedy_prompts.jsonl" \
        --device cuda --tp "$tp" $(way_flag $way) \
        -o "$out/greedy_tp${tp}_$way.jsonl" >"$out/greedy_tp${tp}_$way.log" 2>&1
      echo "launch tp$tp $way rc=$? $(grep -o 'peer-memory all-reduce over.*\|through NCCL only' \
        "$out/greedy_tp${tp}_$way.log" | head -1)"
    done
  done
  python3 scripts/compare_greedy.py "$out/greedy_tp1_peer.jsonl" "$out"/greedy_tp[248]_*.jsonl
fi
pack

if has long; then
  # Eight prompts of 2,400 pseudo-random words (seeded), about 3,000 tokens each.
  python3 -c '
import json, random, sys
rng = random.Random(5)
words = ["river", "stone", "light", "garden", "number", "silver", "window", "engine", "paper",
         "cloud", "market", "winter", "signal", "forest", "letter", "bridge", "planet", "music"]
with open(sys.argv[1], "w") as f:
    for i in range(8):
        text = " ".join(rng.choice(words) for _ in range(2400))
        f.write(json.dumps({"prompt": text, "max_tokens": 32}) + "\n")
' "$out/long_prompts.jsonl"
  for tp in ${tps//,/ }; do
    for way in $ways; do
      { [ "$tp" = 1 ] && [ $way != peer ]; } || [ $way = knockout ] && continue
      in_background timeout 300 "${launch[@]}" \
        "$out/long_prompts.jsonl" --device cuda --tp "$tp" --temperature 0 $(way_flag $way) \
        -o "$out/long_tp${tp}_$way.jsonl" >"$out/long_tp${tp}_$way.log" 2>&1
      echo "launch long tp$tp $way rc=$?"
    done
  done
  python3 scripts/compare_greedy.py "$out/long_tp1_peer.jsonl" "$out"/long_tp[248]_*.jsonl
fi
pack

if has sampled; then
  for tp in ${multi//,/ }; do
    for way in peer gather; do
      in_background timeout 300 "${launch[@]}" examples/prompts.jsonl \
        --device cuda --tp "$tp" --temperature 0.6 --top-k 20 --top-p 0.95 --seed 7 \
        $(way_flag $way) -o "$out/sampled_tp${tp}_$way.jsonl" >"$out/sampled_tp${tp}_$way.log" 2>&1
      echo "launch sampled tp$tp $way rc=$? $(grep -o '[0-9]* of [0-9]* sampling steps' \
        "$out/sampled_tp${tp}_$way.log" | head -1)"
    done
    python3 scripts/compare_greedy.py "$out/sampled_tp${tp}_gather.jsonl" \
      "$out/sampled_tp${tp}_peer.jsonl"
  done
fi
pack

if has bench; then
  for way in $ways; do
    sizes=$tps; [ $way != peer ] && sizes=$multi
    run_bench "bench_$way" 500 --tp "$sizes" --sampling model-defaults \
      --workloads nanovllm,decode-step --decode-batch 256,12 $(way_flag $way)
    python3 scripts/tp_check_summary.py bench "$way" "$out/bench_$way.json"
  done
fi
pack

if has knockout && [ "$multi" != 1 ]; then
  run_bench bench_knockout 300 --tp "$multi" --sampling model-defaults --workloads decode-step \
    --knock-out-all-reduce
  python3 scripts/tp_check_summary.py knockout "$out/bench_peer.json" "$out/bench_knockout.json"
fi
pack

if has latency; then
  for way in $ways; do
    if [ $way = peer ]; then
      run_bench bench_latency 300 --tp "$tps" --workloads latency --input-len 512 --output-len 512
      run_bench bench_prefill32k 300 --tp "$tps" --workloads latency --input-len 32768 \
        --output-len 1 --max-model-len 33024
      python3 scripts/tp_check_summary.py latency "$out/bench_latency.json" \
        "$out/bench_prefill32k.json"
    else
      run_bench "bench_prefill32k_$way" 300 --tp "$multi" --workloads latency --input-len 32768 \
        --output-len 1 --max-model-len 33024 $(way_flag $way)
      echo "  $way:"
      python3 scripts/tp_check_summary.py latency /dev/null "$out/bench_prefill32k_$way.json" \
        "$out/bench_prefill32k.json"
    fi
  done
fi
pack
