#!/usr/bin/env python3
"""Chart of a nanovllm-bench result: python3 scripts/plot_bench.py BENCH.json [-o BENCH.png]

Draws, side by side: (a) per workload the median output throughput (whiskers: the slowest
and fastest run) and the median "% of limit"; (b) the decode step split into its phases as
one stacked bar, with the limit model's time for the same step as a line. matplotlib only
(Debian's python3-matplotlib); writes a PNG.

The benchmark JSON (written by nanovllm-bench; bench/README.md is the reference):
{
  "machine": {                     # measured by bench/machine_limits.h; every field null on CPU
    "device": str, "sm_count": int,
    "copy_bandwidth_gbs": float,   # GB/s, bytes read + written, 1e9 bytes
    "bf16_tflops": float           # dense BF16 GEMM, 1e12 FLOP/s
  },
  "model": {"name": str, "hidden_size": int, "intermediate_size": int,
            "num_hidden_layers": int, "num_attention_heads": int,
            "num_key_value_heads": int, "head_dim": int, "vocab_size": int,
            "tie_word_embeddings": bool},
  "tp": int,
  "workloads": [{
    "name": str,                   # "nanovllm", "long", ...
    "num_requests": int, "prompt_tokens": int, "output_tokens": int,
    "runs": [RUN, ...],            # one per repetition, in order
    "median": RUN,                 # the median of each field over the runs
    "spread_pct": float,           # 100 * (max - min) / median of output_tok_s over the runs
    "limit_breakdown_s": {op: s}   # optional: bench/limit_model.h's run_breakdown
  }],
  "decode_step": {                 # one steady decode step, measured alone
    "batch": int, "context": int,
    "step_ms": float,              # wall time of the step
    "limit_ms": float | null,      # the limit model's time for it
    "sampling_cost_pct": float,    # 100 * (step_ms - greedy_step_ms) / step_ms
    "host_share_pct": float,       # 100 * phases_ms.host / step_ms
    "phases_ms": {"attention", "gemm", "elementwise", "all_reduce", "sampling", "host": float}
  }
}
RUN = {"elapsed_s", "requests_per_s", "total_tok_s", "output_tok_s": float,
       "limit_s": float | null, "pct_of_limit": float | null}   # 100 * limit_s / elapsed_s
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # no display on the benchmark machines
import matplotlib.pyplot as plt  # noqa: E402

PHASES = ["attention", "gemm", "elementwise", "all_reduce", "sampling", "host"]
PHASE_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#cccccc"]


def title_of(bench):
    machine = bench.get("machine") or {}
    model = bench.get("model") or {}
    parts = [model.get("name") or "model", f"tp={bench.get('tp', 1)}",
             machine.get("device") or "CPU"]
    if machine.get("copy_bandwidth_gbs") and machine.get("bf16_tflops"):
        parts.append(f"{machine['copy_bandwidth_gbs']:.0f} GB/s copy, "
                     f"{machine['bf16_tflops']:.0f} TFLOP/s bf16")
    return " | ".join(parts)


def plot_throughput(ax, workloads):
    names = [w["name"] for w in workloads]
    med = [w["median"]["output_tok_s"] for w in workloads]
    lo = [m - min(r["output_tok_s"] for r in w["runs"]) if w.get("runs") else 0
          for m, w in zip(med, workloads)]
    hi = [max(r["output_tok_s"] for r in w["runs"]) - m if w.get("runs") else 0
          for m, w in zip(med, workloads)]
    bars = ax.bar(names, med, yerr=[lo, hi], capsize=4, color="#4c72b0")
    for bar, w in zip(bars, workloads):
        label = f"{bar.get_height():,.0f}"
        if w.get("spread_pct") is not None:
            label += f"\nspread {w['spread_pct']:.1f}%"
        ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8, xytext=(0, 3),
                    textcoords="offset points")
    ax.set_ylabel("output tokens / s (median)")
    ax.set_title("(a) output throughput (whiskers: slowest, fastest run)")
    ax.margins(y=0.2)


def plot_pct_of_limit(ax, workloads):
    names = [w["name"] for w in workloads]
    pct = [w["median"].get("pct_of_limit") for w in workloads]
    if all(p is None for p in pct):
        ax.text(0.5, 0.5, "no limit\n(CPU backend)", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
    else:
        bars = ax.bar(names, [p or 0 for p in pct], color="#55a868")
        for bar, p in zip(bars, pct):
            ax.annotate("n/a" if p is None else f"{p:.0f}%",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8, xytext=(0, 3),
                        textcoords="offset points")
        ax.axhline(100, color="black", lw=0.8, ls="--")
        ax.set_ylim(0, max(110, max(p or 0 for p in pct) * 1.15))
    ax.set_ylabel("% of limit (limit time / measured time)")
    ax.set_title("(a) % of limit")


def plot_decode_step(ax, step):
    if not step:
        ax.text(0.5, 0.5, "no decode step", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        return
    phases = step.get("phases_ms") or {}
    values = [(p, phases.get(p) or 0.0) for p in PHASES]
    other = step["step_ms"] - sum(v for _, v in values)
    if other > 1e-3 * step["step_ms"]:
        values.append(("other", other))  # time no phase accounts for
    bottom = 0.0
    for (name, ms), color in zip(values, PHASE_COLORS):
        if ms <= 0:
            continue
        ax.bar([0], [ms], bottom=bottom, color=color, width=0.5,
               label=f"{name} {ms:.2f} ms ({100 * ms / step['step_ms']:.0f}%)")
        bottom += ms
    if step.get("limit_ms"):
        ax.axhline(step["limit_ms"], color="black", lw=1, ls="--",
                   label=f"limit {step['limit_ms']:.2f} ms")
    ax.set_xticks([0])
    ax.set_xticklabels([f"batch {step['batch']}\ncontext {step['context']}"])
    ax.set_xlim(-0.6, 1.8)  # room for the legend on the right
    ax.set_ylabel("ms per decode step")
    ax.set_title(f"(b) decode step: {step['step_ms']:.2f} ms")
    ax.legend(loc="upper right", fontsize=7)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench_json")
    ap.add_argument("-o", "--out", help="PNG path (default: BENCH_JSON with .png)")
    args = ap.parse_args()
    with open(args.bench_json, encoding="utf-8") as f:
        bench = json.load(f)
    out = args.out or os.path.splitext(args.bench_json)[0] + ".png"

    workloads = bench.get("workloads") or []
    fig, axes = plt.subplots(1, 3, figsize=(15, 5), gridspec_kw={"width_ratios": [2, 2, 2]})
    if workloads:
        plot_throughput(axes[0], workloads)
        plot_pct_of_limit(axes[1], workloads)
    plot_decode_step(axes[2], bench.get("decode_step"))
    fig.suptitle(title_of(bench))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
