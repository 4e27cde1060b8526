#!/usr/bin/env python3
"""Summaries of scripts/tp_peer_check.sh's nanovllm-bench JSONs, one line per tp.

  tp_check_summary.py bench WAY BENCH.json
      nano-vllm's workload and the decode step (with the eager profile's all-reduce);
  tp_check_summary.py knockout FULL.json KNOCKED.json
      the decode step beside the run with --knock-out-all-reduce: the all-reduces' share of
      the step inside its CUDA graph;
  tp_check_summary.py latency LATENCY.json PREFILL32K.json [BASE_PREFILL32K.json]
      batch-1 TPOT and a 32k-token prompt's TTFT, each as a ratio to tp 1 (the 32k prompt's
      tp 1 from BASE when given: a run of another way above tp 1 only).
A file that is missing or unreadable (its run failed) counts as no configurations.
"""
import json
import sys


def per_tp(path):
    """The bench JSON's results by tp ({} when the run wrote none)."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return {}
    return {r["tp"]: r for r in d.get("per_tp", [d])}


def decode_step(result):
    return result.get("decode_step") or {}


def bench(way, path):
    for tp, r in sorted(per_tp(path).items()):
        w = {x["name"]: x for x in r["workloads"]}.get("nanovllm", {}).get("median", {})
        s = decode_step(r)
        ph = s.get("phases_ms") or {}
        step = (f"decode step b{s.get('batch')} {s.get('step_ms', 0):.3f} ms (limit "
                f"{s.get('limit_ms') or 0:.3f}), eager all_reduce {ph.get('all_reduce', 0):.3f} of "
                f"{s.get('eager_step_ms', 0):.3f} ms" if s.get("step_ms") else
                "no decode step ran the whole batch (too few KV blocks?)")
        print(f"  {way} tp {tp}: nanovllm {w.get('output_tok_s', 0):.0f} out tok/s "
              f"({w.get('pct_of_limit') or 0:.1f} % of limit); {step}")


def knockout(full_path, knocked_path):
    full = per_tp(full_path)
    for tp, r in sorted(per_tp(knocked_path).items()):
        f, k = decode_step(full.get(tp, {})), decode_step(r)
        if not f.get("step_ms") or not k.get("step_ms"):
            print(f"  tp {tp}: no decode step to compare")
            continue
        ar = f["step_ms"] - k["step_ms"]
        eager = (f.get("phases_ms") or {}).get("all_reduce", 0)
        print(f"  tp {tp}: decode step b{f.get('batch')} {f['step_ms']:.3f} ms, all-reduces "
              f"knocked out {k['step_ms']:.3f} ms: all-reduce {ar:.3f} ms = "
              f"{100 * ar / f['step_ms']:.1f} % of the step in its graph (eager profile: "
              f"{eager:.3f} ms)")


def latency(latency_path, prefill_path, base_prefill_path=None):
    def medians(path):
        return {tp: r["workloads"][0]["median"] for tp, r in per_tp(path).items()
                if r["workloads"]}
    lat, pre = medians(latency_path), medians(prefill_path)
    t1 = lat.get(1, {})
    p1 = medians(base_prefill_path).get(1, {}) if base_prefill_path else pre.get(1, {})
    for tp in sorted(set(lat) | set(pre)):
        tpot, ttft = lat.get(tp, {}).get("tpot_ms"), pre.get(tp, {}).get("ttft_ms")
        r_tpot = f"{tpot / t1['tpot_ms']:.3f}x tp 1" if tpot and t1.get("tpot_ms") else "-"
        r_pre = f"{p1['ttft_ms'] / ttft:.2f}x tp 1's rate" if ttft and p1.get("ttft_ms") else "-"
        print(f"  tp {tp}: batch-1 TPOT {tpot or 0:.3f} ms ({r_tpot}); 32k prompt TTFT "
              f"{ttft or 0:.1f} ms = {32768 / (ttft or 1) * 1e3:.0f} tok/s ({r_pre})")


if __name__ == "__main__":
    commands = {"bench": bench, "knockout": knockout, "latency": latency}
    if len(sys.argv) not in (4, 5) or sys.argv[1] not in commands or (
            len(sys.argv) == 5 and sys.argv[1] != "latency"):
        sys.exit(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
