#!/usr/bin/env python3
"""The launcher's closing summary beside nanovllm-bench on the same workload (issue 30).

Usage: compare_launch_bench.py LAUNCH_LOG BENCH_JSON [WORKLOAD] [--tolerance PCT]

Reads the output tok/s of nanovllm-launch's summary line ("throughput: N output tok/s", over
the generation time: from the first engine step to the last) and the median output_tok_s of
the workload (default "nanovllm") in nanovllm-bench's JSON (output tokens over the time from
the first request added to the last finished). Prints both, their ratio, and exits 1 when they
differ by more than the tolerance (default 3 %): the two tools must mean the same thing by
throughput.
"""
import argparse
import json
import re
import sys


def launch_output_rate(log_path):
    rate = None
    for line in open(log_path, errors="replace"):
        m = re.search(r"throughput: ([0-9.]+) output tok/s", line)
        if m:
            rate = float(m.group(1))  # the last summary of the log
    return rate


def main():
    p = argparse.ArgumentParser()
    p.add_argument("launch_log")
    p.add_argument("bench_json")
    p.add_argument("workload", nargs="?", default="nanovllm")
    p.add_argument("--tolerance", type=float, default=3.0)
    a = p.parse_args()
    launch = launch_output_rate(a.launch_log)
    bench = json.load(open(a.bench_json))
    found = [w for w in bench["workloads"] if w["name"] == a.workload]
    median = found[0]["median"]["output_tok_s"] if found else None
    if launch is None or not median:
        print(f"missing figure: launcher {launch}, bench {median}")
        return 1
    diff = 100.0 * (launch - median) / median
    ok = abs(diff) <= a.tolerance
    print(f"launcher {launch:.0f} vs bench {median:.0f} output tok/s: {diff:+.1f} % "
          f"({'within' if ok else 'outside'} {a.tolerance:g} %)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
