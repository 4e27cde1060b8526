#!/usr/bin/env python3
"""Greedy results of two or more nanovllm-launch runs of the same prompts file, compared with
the first: per file, how many requests (completion indexes) have the same token ids, and at
which token each other one first diverges. Native lines are compared by token_ids, OpenAI
batch lines by their choices. The last line printed is the last file's verdict.

Usage: compare_greedy.py BASE.jsonl OTHER.jsonl [OTHER.jsonl ...]
"""
import json
import os
import sys


def load(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        body = (r.get("response") or {}).get("body") or {}
        ids = r.get("token_ids")
        out[(r.get("custom_id", r.get("id")), r.get("index", 0))] = (
            ids if ids is not None else body.get("choices"))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    base = load(sys.argv[1])
    for path in sys.argv[2:]:
        other = load(path)
        same = sum(1 for k in base if base[k] == other.get(k))
        firsts = []
        for k in base:
            a, b = base[k], other.get(k)
            if a != b and isinstance(a, list) and isinstance(b, list):
                firsts.append(next((i for i, (x, y) in enumerate(zip(a, b)) if x != y),
                                   min(len(a), len(b))))
        print(f"{os.path.basename(path)} vs {os.path.basename(sys.argv[1])}: {same}/{len(base)} "
              f"identical; first divergences at tokens {firsts}")


if __name__ == "__main__":
    main()
