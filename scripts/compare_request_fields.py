"""Compares two nanovllm-launch result files of examples/request_fields.jsonl (greedy: stop
strings, stop ids, min_tokens, n, special tokens) request by request and choice by choice:
token ids, text, finish and stop reasons must be identical. Prints each difference, then one
line "<a> vs <b> request fields: N/M identical (K in b)"; exit 1 if any differs.

Usage: python3 compare_request_fields.py A.jsonl B.jsonl [NAME_A NAME_B]
"""
import json
import sys


def load(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if "custom_id" in r:
            for c in r["response"]["body"]["choices"]:
                out[(r["custom_id"], c["index"])] = (
                    c["finish_reason"], c["stop_reason"], c.get("message", c.get("text")))
        else:
            out[(r["id"], r["index"])] = (
                r["token_ids"], r["text"], r["finish_reason"], r["stop_reason"])
    return out


def main():
    name_a, name_b = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else ("a", "b")
    a, b = load(sys.argv[1]), load(sys.argv[2])
    same = [k for k in a if a[k] == b.get(k)]
    for k in a:
        if a[k] != b.get(k):
            print(f"{k}: {name_a} {a[k]} {name_b} {b.get(k)}")
    print(f"{name_a} vs {name_b} request fields: {len(same)}/{len(a)} identical ({len(b)} in {name_b})")
    return 0 if len(same) == len(a) == len(b) else 1


if __name__ == "__main__":
    sys.exit(main())
