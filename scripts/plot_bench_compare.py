#!/usr/bin/env python3
"""Before/after chart of nanovllm-bench results:
python3 scripts/plot_bench_compare.py LABEL=A.json LABEL=B.json [...] -o OUT.png

Draws, side by side: (a) per workload present in any file, the median output throughput of
each file (bars, with "% of limit" written on them); (b) the decode step time per batch size
(`decode_steps`, or the single `decode_step` where a file has no list) as one line per file,
with the limit model's time of the last file as a dashed line. Files are drawn in the order
given; the fields are those of bench/README.md's "The benchmark JSON". matplotlib only.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display on the benchmark machines
import matplotlib.pyplot as plt  # noqa: E402


def load(spec):
    label, sep, path = spec.partition("=")
    if not sep:
        label, path = spec, spec
    try:
        with open(path) as f:
            return label, json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"plot_bench_compare: {path}: {e}")


def steps_of(bench):
    steps = bench.get("decode_steps") or ([bench["decode_step"]] if bench.get("decode_step") else [])
    return sorted((s["batch"], s["step_ms"], s.get("limit_ms")) for s in steps if s)


def plot_workloads(ax, runs):
    names = []
    for _, bench in runs:
        for w in bench.get("workloads", []):
            if w["name"] not in names:
                names.append(w["name"])
    width = 0.8 / len(runs)
    for i, (label, bench) in enumerate(runs):
        by_name = {w["name"]: w["median"] for w in bench.get("workloads", [])}
        xs = [j + i * width for j, n in enumerate(names) if n in by_name]
        meds = [by_name[n] for n in names if n in by_name]
        bars = ax.bar(xs, [m["output_tok_s"] for m in meds], width, label=label)
        for bar, m in zip(bars, meds):
            if m.get("pct_of_limit") is not None:
                ax.annotate(f"{m['pct_of_limit']:.0f}%", (bar.get_x() + bar.get_width() / 2,
                                                         bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))])
    ax.set_xticklabels(names, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("output tokens/s (median; % of limit above)")
    ax.legend(fontsize=8)


def plot_steps(ax, runs):
    for label, bench in runs:
        steps = steps_of(bench)
        if steps:
            ax.plot([s[0] for s in steps], [s[1] for s in steps], marker="o", label=label)
    limit = [s for s in steps_of(runs[-1][1]) if s[2] is not None]
    if limit:
        ax.plot([s[0] for s in limit], [s[2] for s in limit], "k--", label="limit model")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("decode batch")
    ax.set_ylabel("decode step, ms")
    ax.legend(fontsize=8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench_json", nargs="+", help="LABEL=PATH (or PATH, labelled by itself)")
    ap.add_argument("-o", "--out", required=True, help="PNG path")
    ap.add_argument("--title", default="", help="figure title")
    args = ap.parse_args()
    runs = [load(spec) for spec in args.bench_json]
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8))
    plot_workloads(a, runs)
    plot_steps(b, runs)
    if args.title:
        fig.suptitle(args.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
