#!/usr/bin/env python3
"""Hugging Face transformers reference for the GPU generation checks (issue 6).

Usage: python3 scripts/make_gpu_reference.py MODEL_DIR OUT.json [--steps 128] [--device cuda]

For the model folder MODEL_DIR (written by `nanovllm-mkmodel`), builds a deterministic set
of prompts (token ids: 32 base prompts of 16..256 tokens, some sharing prefixes, one exact
duplicate, plus 4 copies with token 1 changed) and runs transformers twice, in FP32 (the
reference) and in BF16 (the expected bf16 noise level), eager attention, recording:
  - teacher forcing: the top-5 (token, logprob) at every prompt position;
  - greedy: `steps` tokens, each with the top-5 (token, logprob) of its step;
  - bf16 only: its logprobs at the fp32 top-5 tokens of every prompt position.
The prompts are left-padded into one batch with an attention mask and explicit position
ids; the greedy loop is written out (no generate()) so nothing depends on generation
defaults. Summary figures of bf16 against fp32 go into the JSON's "hf_bf16_vs_fp32".
"""
import argparse
import json
import random
import sys
import time

import torch
from transformers import AutoModelForCausalLM

TOP = 5
BASE_SEED = 20240611


def make_prompts(vocab_size):
    """36 prompts: [{"name", "ids", "perturbed_of"}]. Token ids avoid the special range."""
    rng = random.Random(BASE_SEED)
    hi = min(vocab_size, 151643) - 1  # Qwen3's special tokens start at 151643

    def rand_ids(n):
        return [rng.randint(0, hi) for _ in range(n)]

    lengths = [16 + (240 * i) // 31 for i in range(32)]  # 16 .. 256
    rng.shuffle(lengths)
    prompts = [{"name": f"p{i:02d}_len{n}", "ids": rand_ids(n), "perturbed_of": -1}
               for i, n in enumerate(lengths)]
    # Shared prefixes (prefix caching hits with 16-token blocks): p00..p03 share 100 tokens,
    # p04..p05 share 200; p06 repeats p07 exactly (every block cached, last one recomputed).
    shared = rand_ids(100)
    for i in range(4):
        p = prompts[i]
        tail = rand_ids(8 + 20 * i)
        p["ids"] = shared + tail
        p["name"] = f"p{i:02d}_shared100_len{len(p['ids'])}"
    shared = rand_ids(200)
    for i in (4, 5):
        p = prompts[i]
        p["ids"] = shared + rand_ids(17 + 30 * (i - 4))
        p["name"] = f"p{i:02d}_shared200_len{len(p['ids'])}"
    prompts[6]["ids"] = list(prompts[7]["ids"])
    prompts[6]["name"] = f"p06_dup_of_p07_len{len(prompts[6]['ids'])}"
    # Perturbed copies: token 1 changed, for the "attention matters" check.
    by_len = sorted(range(8, 32), key=lambda i: len(prompts[i]["ids"]))
    for src in (by_len[4], by_len[10], by_len[17], by_len[-1]):
        ids = list(prompts[src]["ids"])
        ids[1] = (ids[1] + 7919) % hi
        prompts.append({"name": prompts[src]["name"] + "_tok1", "ids": ids, "perturbed_of": src})
    assert all(16 <= len(p["ids"]) <= 256 for p in prompts)
    return prompts


def load(model_dir, dtype, device):
    kwargs = {"attn_implementation": "eager"}
    try:  # transformers 5 names it dtype; 4.x torch_dtype
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, **kwargs)
    except TypeError:
        model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=dtype, **kwargs)
    return model.to(device).eval()


def top_entries(logprobs):
    """[n, V] f32 log-softmax -> [n][TOP] of [token, logprob]."""
    values, tokens = torch.topk(logprobs, TOP, dim=-1)
    return [[[int(t), round(float(v), 6)] for t, v in zip(tr, vr)]
            for tr, vr in zip(tokens.tolist(), values.tolist())]


@torch.no_grad()
def run(model, prompts, steps, device, fp32_tf_tokens=None):
    """Teacher-forced top-5 per prompt position and greedy top-5 per step, for all prompts."""
    lens = [len(p["ids"]) for p in prompts]
    b, width = len(prompts), max(lens)
    ids = torch.zeros(b, width, dtype=torch.long)
    mask = torch.zeros(b, width, dtype=torch.long)
    for i, p in enumerate(prompts):  # left padding
        ids[i, width - lens[i]:] = torch.tensor(p["ids"])
        mask[i, width - lens[i]:] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    head = model.lm_head

    out = model.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    hidden = out.last_hidden_state  # [b, width, hidden]
    results = [{"teacher_forced_top5": None, "greedy": []} for _ in prompts]
    for i in range(b):
        lp = torch.log_softmax(head(hidden[i, width - lens[i]:]).float(), dim=-1)  # [len, V]
        results[i]["teacher_forced_top5"] = top_entries(lp)
        if fp32_tf_tokens is not None:  # our logprobs at the fp32 reference's top-5 tokens
            idx = torch.tensor(fp32_tf_tokens[i], device=lp.device)  # [len, TOP]
            results[i]["logprobs_at_fp32_top5"] = [
                [round(float(v), 6) for v in row] for row in torch.gather(lp, 1, idx).tolist()]
    last = hidden[:, -1]
    past = out.past_key_values
    for _ in range(steps):
        lp = torch.log_softmax(head(last).float(), dim=-1)  # [b, V]
        tops = top_entries(lp)
        tok = lp.argmax(-1)  # [b]
        for i in range(b):
            results[i]["greedy"].append({"token": int(tok[i]), "top5": tops[i]})
        mask = torch.cat([mask, torch.ones(b, 1, dtype=mask.dtype, device=device)], dim=1)
        pos = pos[:, -1:] + 1
        out = model.model(input_ids=tok[:, None], attention_mask=mask, position_ids=pos,
                          past_key_values=past, use_cache=True)
        past, last = out.past_key_values, out.last_hidden_state[:, -1]
    if device == "cuda":
        torch.cuda.synchronize()
    return results


def greedy_close(a, b):
    """vLLM's check_logprobs_close: tokens equal until the first mismatch, where each side's
    token must be in the other's top-5. Returns (ok, number of equal leading tokens)."""
    for n, (sa, sb) in enumerate(zip(a, b)):
        if sa["token"] != sb["token"]:
            ok = (sa["token"] in [t for t, _ in sb["top5"]] and
                  sb["token"] in [t for t, _ in sa["top5"]])
            return ok, n
    return True, min(len(a), len(b))


def compare(fp32, bf16):
    positions = top1 = 0
    devs = []
    greedy_ok = greedy_full = 0
    agreed = []
    for rf, rb in zip(fp32, bf16):
        for want, got, at in zip(rf["teacher_forced_top5"], rb["teacher_forced_top5"],
                                 rb["logprobs_at_fp32_top5"]):
            positions += 1
            top1 += want[0][0] == got[0][0]
            devs += [abs(lp - e[1]) for lp, e in zip(at, want)]
        ok, n = greedy_close(rb["greedy"], rf["greedy"])
        greedy_ok += ok
        greedy_full += n == len(rf["greedy"])
        agreed.append(n)
    return {
        "positions": positions,
        "top1_agreement": top1 / positions,
        "logprob_abs_dev_max": max(devs),
        "logprob_abs_dev_mean": sum(devs) / len(devs),
        "logprob_abs_dev_p99": sorted(devs)[int(0.99 * (len(devs) - 1))],
        "greedy_prompts": len(fp32),
        "greedy_close_ok": greedy_ok,
        "greedy_identical": greedy_full,
        "greedy_mean_agreed_tokens": sum(agreed) / len(agreed),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    t0 = time.time()
    with open(f"{args.model_dir}/config.json") as f:
        config = json.load(f)
    prompts = make_prompts(config["vocab_size"])
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 means FP32
    torch.backends.cudnn.allow_tf32 = False

    timings = {}
    model = load(args.model_dir, torch.float32, args.device)
    t = time.time()
    fp32 = run(model, prompts, args.steps, args.device)
    timings["fp32_s"] = round(time.time() - t, 2)
    del model
    if args.device == "cuda":
        torch.cuda.empty_cache()
    model = load(args.model_dir, torch.bfloat16, args.device)
    t = time.time()
    tf_tokens = [[[e[0] for e in row] for row in r["teacher_forced_top5"]] for r in fp32]
    bf16 = run(model, prompts, args.steps, args.device, fp32_tf_tokens=tf_tokens)
    timings["bf16_s"] = round(time.time() - t, 2)
    del model

    stats = compare(fp32, bf16)
    doc = {
        "model_dir": args.model_dir,
        "mkmodel": config.get("nanovllm_mkmodel", {}),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "attn_implementation": "eager",
        "steps": args.steps,
        "hf_bf16_vs_fp32": stats,
        "timings": timings,
        "prompts": [dict(p, fp32=f, bf16=b) for p, f, b in zip(prompts, fp32, bf16)],
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{args.model_dir}: {len(prompts)} prompts x {args.steps} steps; hf bf16 vs fp32: "
          + ", ".join(f"{k} {v:.4g}" for k, v in stats.items())
          + f"; timings {timings}, total {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
