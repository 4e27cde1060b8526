#!/usr/bin/env python3
"""nano-vllm's benchmark workloads as nanovllm-launch prompts.jsonl lines (issue 13).

Usage:
  python3 scripts/make_nanovllm_workload.py [-o bench/data/nanovllm_workload.jsonl]
  python3 scripts/make_nanovllm_workload.py --long > long.jsonl

Default mode rewrites bench/data/nanovllm_workload.jsonl, the workload of nano-vllm's
bench.py drawn exactly as it draws it (Python's Mersenne Twister, seed 0):
  256 prompts of randint(100, 1024) ids each randint(0, 10000); then, after all prompts,
  max_tokens = randint(100, 1024) per request; temperature 0.6, ignore_eos.
The file is committed so the C++ benchmark needs no Python; this script is how it was made
and how to check it (expected: sum max_tokens 133966, sum prompt tokens 142827).

--long prints (to stdout, never committed: about 6 MiB) the chunked-prefill `long` workload:
  seed 0; 64 prompts of randint(4096, 32768) ids, then max_tokens = randint(64, 512) each
  (expected: sum max_tokens 19796, sum prompt tokens 1289860, longest prompt 31995).

The check sums go to stderr, with "ok" or "MISMATCH" against the expected values; the exit
status is 1 on a mismatch.
"""
import argparse
import json
import os
import random
import sys

# name -> (num_seqs, prompt length range, max_tokens range, expected sums)
WORKLOADS = {
    "nanovllm": dict(num_seqs=256, input_len=(100, 1024), output_len=(100, 1024),
                     expect={"sum_max_tokens": 133966, "sum_prompt_tokens": 142827}),
    "long": dict(num_seqs=64, input_len=(4096, 32768), output_len=(64, 512),
                 expect={"sum_max_tokens": 19796, "sum_prompt_tokens": 1289860,
                         "max_prompt_len": 31995}),
}
TEMPERATURE = 0.6
VOCAB_HIGH = 10000  # randint(0, 10000): both ends inclusive, as in bench.py


def draw(num_seqs, input_len, output_len):
    """The draws in bench.py's order: every prompt first, then every max_tokens."""
    random.seed(0)
    prompts = [[random.randint(0, VOCAB_HIGH) for _ in range(random.randint(*input_len))]
               for _ in range(num_seqs)]
    max_tokens = [random.randint(*output_len) for _ in range(num_seqs)]
    return prompts, max_tokens


def lines(name, prompts, max_tokens):
    for i, (ids, n) in enumerate(zip(prompts, max_tokens)):
        req = {"id": f"{name}-{i}", "prompt_token_ids": ids, "max_tokens": n,
               "temperature": TEMPERATURE, "ignore_eos": True}
        yield json.dumps(req, separators=(",", ":")) + "\n"


def check_sums(prompts, max_tokens):
    lens = [len(p) for p in prompts]
    return {"count": len(prompts), "sum_max_tokens": sum(max_tokens),
            "sum_prompt_tokens": sum(lens), "min_prompt_len": min(lens),
            "max_prompt_len": max(lens), "first_prompt_len": lens[0],
            "first_prompt_ids": prompts[0][:5], "first_max_tokens": max_tokens[0]}


def report(name, sums, expect):
    ok = all(sums[k] == v for k, v in expect.items())
    print(f"{name}: " + ", ".join(f"{k}={v}" for k, v in sums.items()), file=sys.stderr)
    print(f"{name}: expected " + ", ".join(f"{k}={v}" for k, v in expect.items()) +
          (" -> ok" if ok else " -> MISMATCH"), file=sys.stderr)
    return ok


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--long", action="store_true",
                    help="print the chunked-prefill `long` workload to stdout instead")
    ap.add_argument("-o", "--out", default=os.path.join(root, "bench", "data",
                                                         "nanovllm_workload.jsonl"))
    args = ap.parse_args()

    name = "long" if args.long else "nanovllm"
    w = WORKLOADS[name]
    prompts, max_tokens = draw(w["num_seqs"], w["input_len"], w["output_len"])
    if args.long:
        sys.stdout.writelines(lines(name, prompts, max_tokens))
        sys.stdout.flush()
    else:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(lines(name, prompts, max_tokens))
        print(f"wrote {args.out}", file=sys.stderr)
    return 0 if report(name, check_sums(prompts, max_tokens), w["expect"]) else 1


if __name__ == "__main__":
    sys.exit(main())
