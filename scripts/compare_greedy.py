#!/usr/bin/env python3
"""Greedy results of two or more nanovllm-launch runs of the same prompts file, compared with
the first: per file, how many requests (completion indexes) have the same token ids, and at
which token each other one first diverges. Native lines are compared by token_ids, OpenAI
batch lines by their logprobs' tokens where they have them, else by their choices. Where both runs of a line carry top logprobs (native
"logprobs": N; a batch completion's "logprobs": N, a batch chat's "top_logprobs": N), a divergence is judged by vLLM's rule for greedy runs (its tests'
check_logprobs_close): at the first differing token, each run's token must be among the other
run's top logprobs there (a near-tie that rounding may flip); such a line counts as close.
The last line printed is the last file's verdict.

Usage: compare_greedy.py BASE.jsonl OTHER.jsonl [OTHER.jsonl ...]
"""
import json
import os
import sys


def tokens_and_tops(r):
    """(tokens, top sets) of one result line: each generated token and the set of tokens in
    its position's top logprobs, as strings (ids for native lines, token texts for OpenAI batch
    lines: a completion's logprobs.tokens / top_logprobs, a chat's logprobs.content); (None,
    None) when the line carries no logprobs."""
    if r.get("logprobs"):  # native: [{id: {logprob, rank, ...}}] beside token_ids
        return [str(t) for t in r["token_ids"]], [set(p) for p in r["logprobs"]]
    choices = ((r.get("response") or {}).get("body") or {}).get("choices") or [{}]
    lp = choices[0].get("logprobs") or {}
    if lp.get("tokens") is not None:  # /v1/completions
        return lp["tokens"], [set(p or {}) for p in lp.get("top_logprobs") or []]
    if lp.get("content") is not None:  # /v1/chat/completions
        return ([c["token"] for c in lp["content"]],
                [{t["token"] for t in c.get("top_logprobs") or []} for c in lp["content"]])
    return None, None


def load(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        body = (r.get("response") or {}).get("body") or {}
        ids = r.get("token_ids")
        tokens, tops = tokens_and_tops(r)
        # What must be equal: the token ids; a batch line's tokens when it has logprobs (its
        # choices then hold logprob values, which rounding moves), else its choices.
        same_as = ids if ids is not None else tokens if tokens is not None else body.get("choices")
        out[(r.get("custom_id", r.get("id")), r.get("index", 0))] = (same_as, (tokens, tops))
    return out


def near_tie(a, b):
    """For two runs' (tokens, tops) that differ: (position of the first difference, whether
    each run's token there is in the other's top logprobs), or None without logprobs."""
    (ta, pa), (tb, pb) = a, b
    if ta is None or tb is None:
        return None
    i = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
    if i >= len(pa) or i >= len(pb) or i >= len(ta) or i >= len(tb):
        return None
    return i, ta[i] in pb[i] and tb[i] in pa[i]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    base = load(sys.argv[1])
    for path in sys.argv[2:]:
        other = load(path)
        same = sum(1 for k in base if base[k][0] == other.get(k, (None,))[0])
        firsts, close, judged = [], 0, 0
        for k in base:
            a, b = base[k], other.get(k, (None, None))
            if a[0] == b[0]:
                close += 1
                continue
            if isinstance(a[0], list) and isinstance(b[0], list) and not (
                    a[0] and isinstance(a[0][0], dict)):  # tokens, not batch choices
                firsts.append(next((i for i, (x, y) in enumerate(zip(a[0], b[0])) if x != y),
                                   min(len(a[0]), len(b[0]))))
            tie = near_tie(a[1], b[1]) if b[1] is not None else None
            if tie is not None:
                judged += 1
                close += tie[1]
                if not tie[1]:
                    print(f"  {k}: diverges at token {tie[0]} without a near-tie")
        verdict = f"{same}/{len(base)} identical; first divergences at tokens {firsts}"
        if judged:
            verdict += f"; {close}/{len(base)} close by vLLM's rule ({judged} judged)"
        print(f"{os.path.basename(path)} vs {os.path.basename(sys.argv[1])}: {verdict}")


if __name__ == "__main__":
    main()
