#!/usr/bin/env python3
"""Golden outputs of Hugging Face transformers for a model folder (runs on the GPU machine).

    python3 scripts/make_reference_fixtures.py MODEL_DIR OUT.json [--device cuda] [--bf16-check]

Loads MODEL_DIR (a folder written by nanovllm-mkmodel, or any Qwen3 folder) with
AutoModelForCausalLM in float32 and eager attention, offline (local_files_only), and writes
for a fixed set of token-id prompts (lengths 1..200, some sharing prefixes, ids spread over
the vocabulary):
  - teacher-forced top-5 (token, logprob) at every prompt position,
  - a 32-token greedy continuation (argmax, eos not special: never stops, never masked),
    with the chosen token's logprob and the top-1/top-2 logprob gap at each step,
  - a perturbed copy of the longer prompts (token 1 changed) with its last-position top-5,
    which shows how much attention to earlier tokens matters,
  - the versions, the device and the folder's preset and seed (config.json's
    "nanovllm_mkmodel").
--bf16-check also runs the model in bfloat16 and records how often its argmax agrees with
float32 (a proxy for how stable greedy comparisons between two implementations are).
"""
import argparse
import json
import os
import random
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

TOP_K = 5
GREEDY_TOKENS = 32
MAX_REGULAR_ID = 151642  # ids above are Qwen's special tokens


def make_prompts():
    """Deterministic prompts: ids from a fixed-seed generator, a few hand-picked edges."""
    rng = random.Random(20240601)

    def ids(n):
        return [rng.randint(0, MAX_REGULAR_ID) for _ in range(n)]

    base64 = ids(64)
    base200 = ids(200)
    return [
        {"name": "len1", "ids": [9707]},
        {"name": "len7_edges", "ids": [0, 1, 151642, 100, 75000, 151000, 2]},
        {"name": "len33", "ids": ids(33)},
        {"name": "len64", "ids": base64},
        {"name": "len80_prefix_len64", "ids": base64 + ids(16)},
        {"name": "len200", "ids": base200},
        {"name": "len150_prefix_len200", "ids": base200[:120] + ids(30)},
        {"name": "len17_repeats", "ids": [42, 42, 42, 1000, 1000, 42] + ids(11)},
    ]


def load(model_dir, dtype, device):
    kwargs = dict(attn_implementation="eager", local_files_only=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, **kwargs)
    except TypeError:  # transformers 4.x spells it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=dtype, **kwargs)
    return model.to(device).eval()


@torch.no_grad()
def logprobs_of(model, ids, device):
    x = torch.tensor([ids], dtype=torch.long, device=device)
    logits = model(input_ids=x).logits[0].float()  # [len, vocab]
    return torch.log_softmax(logits, dim=-1)


def top_k(logprobs_row):
    v, i = torch.topk(logprobs_row, TOP_K)
    return [[int(t), round(float(lp), 5)] for t, lp in zip(i.tolist(), v.tolist())]


@torch.no_grad()
def greedy(model, ids, device):
    """Argmax decoding with the KV cache; eos is an ordinary token here."""
    x = torch.tensor([ids], dtype=torch.long, device=device)
    out = model(input_ids=x, use_cache=True)
    past, steps = out.past_key_values, []
    logits = out.logits[0, -1].float()
    for _ in range(GREEDY_TOKENS):
        lp = torch.log_softmax(logits, dim=-1)
        v, i = torch.topk(lp, 2)
        tok = int(i[0])
        steps.append({"token": tok, "logprob": round(float(v[0]), 5),
                      "gap": round(float(v[0] - v[1]), 5)})
        out = model(input_ids=torch.tensor([[tok]], device=device), past_key_values=past,
                    use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1].float()
    return steps


def perturb(ids):
    changed = list(ids)
    changed[1] = (changed[1] + 7777) % (MAX_REGULAR_ID + 1)
    return changed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out_json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--bf16-check", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # a float32 reference, not tf32
    torch.backends.cudnn.allow_tf32 = False

    with open(os.path.join(args.model_dir, "config.json")) as f:
        config = json.load(f)
    model = load(args.model_dir, torch.float32, args.device)
    prompts = make_prompts()
    results = []
    for p in prompts:
        lp = logprobs_of(model, p["ids"], args.device)
        entry = {"name": p["name"], "prompt_token_ids": p["ids"],
                 "teacher_forced_top5": [top_k(row) for row in lp],
                 "greedy": greedy(model, p["ids"], args.device)}
        if len(p["ids"]) >= 8:
            changed = perturb(p["ids"])
            plp = logprobs_of(model, changed, args.device)[-1]
            orig_top = [t for t, _ in entry["teacher_forced_top5"][-1]]
            entry["perturbed"] = {
                "prompt_token_ids": changed, "last_top5": top_k(plp),
                # how far the original last-position top-5 tokens moved
                "max_abs_logprob_change": round(
                    float((plp[orig_top] - lp[-1][orig_top]).abs().max()), 4)}
        results.append(entry)

    out = {
        "model_dir": os.path.abspath(args.model_dir),
        "mkmodel": config.get("nanovllm_mkmodel"),
        "architecture": config.get("architectures", ["?"])[0],
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "device": (torch.cuda.get_device_name(0) if args.device.startswith("cuda")
                   else args.device),
        "dtype": "float32", "attention": "eager",
        "top_k": TOP_K, "greedy_tokens": GREEDY_TOKENS,
        "prompts": results,
    }
    if args.bf16_check:
        out["bf16_check"] = bf16_check(args, prompts, results)
    with open(args.out_json, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"wrote {args.out_json}: {len(results)} prompts", file=sys.stderr)


def bf16_check(args, prompts, results):
    model = load(args.model_dir, torch.bfloat16, args.device)
    tf_total = tf_agree = 0
    greedy_agree = []
    gaps = []
    for p, r in zip(prompts, results):
        lp = logprobs_of(model, p["ids"], args.device)
        ref = [row[0][0] for row in r["teacher_forced_top5"]]
        tf_total += len(ref)
        tf_agree += sum(int(a == b) for a, b in zip(lp.argmax(-1).tolist(), ref))
        gaps += [row[0][1] - row[1][1] for row in r["teacher_forced_top5"]]
        mine = [s["token"] for s in greedy(model, p["ids"], args.device)]
        theirs = [s["token"] for s in r["greedy"]]
        n = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), len(mine))
        greedy_agree.append(n)
    gaps.sort()
    return {"teacher_forced_argmax_agreement": round(tf_agree / tf_total, 4),
            "greedy_tokens_agreeing_before_first_difference": greedy_agree,
            "top1_top2_gap_quantiles_nats": {q: round(gaps[int(q * (len(gaps) - 1))], 3)
                                             for q in (0.01, 0.05, 0.1, 0.5)}}


if __name__ == "__main__":
    main()
