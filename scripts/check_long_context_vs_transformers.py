#!/usr/bin/env python3
"""Long context (issue 19) of nanovllm-launch against transformers, on the GPU machine.

Usage: python3 scripts/check_long_context_vs_transformers.py LAUNCH MODEL_DIR OUT_DIR

MODEL_DIR: a random-weight Qwen3 folder from nanovllm-mkmodel (40960 positions). Two runs of
LAUNCH --device cuda, every request greedy with prompt_logprobs 5 and logprobs 5 (random token
prompts, no special tokens):
  plain RoPE, --max-model-len 40960: prompts of 8192 and 32000 tokens, 16 generated tokens;
  YaRN, --rope-scaling factor 4 over 32768, --max-model-len 131072: prompts of 64000 and
  120000 tokens, 8 generated tokens.
transformers (sdpa attention, no KV cache) computes the hidden states of prompt + our
completion in FP32 (the reference) and BF16 (the noise a bf16 engine is held to); only a few
hundred sampled positions are projected to logits (full logits of 120k rows would not fit).
Per run and position range: top-1 agreement and top-5 set agreement with FP32, and the
|logprob| deviation of the prompt's (or our) next token, next to transformers' own BF16
figures; our generated tokens must be FP32's argmax except at near-ties (a top-2 gap within
twice the BF16 deviation of that row). YaRN in transformers 5 uses the factor as given (4);
transformers 4 would recompute it, so the YaRN part needs transformers >= 5.
Prints one line per figure and "long context vs transformers: ok|FAILED"; exit 1 on failure.
"""
import json
import os
import random
import subprocess
import sys
import time

# 120k-token activations in FP32: let the allocator grow segments instead of fragmenting.
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

TOP = 5
SAMPLED = 300
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def run_ours(launch, model_dir, out, name, prompts, max_tokens, flags):
    path = f"{out}/long_{name}_requests.jsonl"
    with open(path, "w") as f:
        for rid, ids in prompts.items():
            f.write(json.dumps({"id": rid, "prompt_token_ids": ids, "temperature": 0,
                                "max_tokens": max_tokens, "ignore_eos": True,
                                "logprobs": TOP, "prompt_logprobs": TOP}) + "\n")
    res = f"/tmp/long_{name}_results.jsonl"
    t0 = time.time()
    proc = subprocess.run([launch, model_dir, path, "--device", "cuda", "-o", res] + flags,
                          capture_output=True, text=True)
    print(f"[{name}] nanovllm-launch rc {proc.returncode} in {time.time() - t0:.1f} s: "
          + " | ".join(l for l in proc.stderr.splitlines() if "done:" in l or "KV cache" in l))
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        raise SystemExit(1)
    return {r["id"]: r for r in map(json.loads, open(res))}


def no_gqa_in_sdpa():
    """transformers hands grouped-query attention to sdpa (enable_gqa), which only the flash
    kernel takes: FP32 then falls back to the math kernel, whose [heads, L, L] scores do not fit
    at 32k+. Repeating the kv heads instead lets FP32 use the memory-efficient kernel."""
    try:
        import transformers.integrations.sdpa_attention as sdpa
        sdpa.use_gqa_in_sdpa = lambda *args, **kwargs: False
    except (ImportError, AttributeError):
        pass


def load(model_dir, dtype, yarn):
    config = AutoConfig.from_pretrained(model_dir)
    if yarn:
        params = dict(YARN, rope_theta=getattr(config, "rope_theta", None) or
                      config.rope_parameters["rope_theta"])
        if hasattr(config, "rope_parameters"):
            config.rope_parameters = params
        else:
            config.rope_scaling = dict(YARN)
    return AutoModelForCausalLM.from_pretrained(model_dir, config=config, dtype=dtype,
                                                attn_implementation="sdpa").cuda().eval()


def chosen(entry, tok):
    """Our logprob of `tok` and our top ids, best first, from one vLLM-shaped entry."""
    ranked = sorted((v["rank"], int(k)) for k, v in entry.items())
    return entry[str(tok)]["logprob"], [t for _, t in ranked[:TOP]]


def compare(name, ours, prompts, models, failures, rng):
    for rid, ids in prompts.items():
        o = ours[rid]
        seq = ids + o["token_ids"]
        n = len(ids)
        positions = sorted(rng.sample(range(n - 1), min(SAMPLED, n - 1)))  # prompt rows
        gen = list(range(n - 1, len(seq) - 1))  # rows predicting our generated tokens
        rows = positions + gen
        lp = {}
        for tag, model in models.items():
            with torch.no_grad():
                h = model.model(torch.tensor([seq], device="cuda")).last_hidden_state[0]
                lp[tag] = torch.log_softmax(model.lm_head(h[rows]).float(), dim=-1)
                del h
        ref, bf = lp["fp32"], lp["bf16"]
        ranges = [(0, 8192), (8192, 32768), (32768, 65536), (65536, 1 << 30)]
        for lo, hi in ranges:
            sel = [i for i, p in enumerate(positions) if lo <= p < hi]
            if not sel:
                continue
            dev, bdev, top1, btop1, top5, btop5 = [], [], 0, 0, 0, 0
            for i in sel:
                p = positions[i]
                tok = seq[p + 1]
                value, top = chosen(o["prompt_logprobs"][p + 1], tok)
                dev.append(abs(value - ref[i][tok].item()))
                bdev.append(abs(bf[i][tok].item() - ref[i][tok].item()))
                ref_top = torch.topk(ref[i], TOP).indices.tolist()
                top1 += int(top[0] == ref_top[0])
                btop1 += int(torch.argmax(bf[i]).item() == ref_top[0])
                top5 += set(top) == set(ref_top)
                btop5 += set(torch.topk(bf[i], TOP).indices.tolist()) == set(ref_top)
            d, b = torch.tensor(dev), torch.tensor(bdev)
            print(f"[{name}] {rid} positions [{lo}, {min(hi, n)}): {len(sel)} sampled; top-1 = "
                  f"fp32: ours {top1}, hf bf16 {btop1}; top-5 set = fp32: ours {top5}, hf bf16 "
                  f"{btop5}; |logprob dev| mean ours {d.mean():.4f} hf bf16 {b.mean():.4f}, "
                  f"max ours {d.max():.4f} hf bf16 {b.max():.4f}")
            if d.mean() > 2 * b.mean() + 0.05 or top1 < btop1 - max(2, len(sel) // 20):
                failures.append(f"{name} {rid} [{lo}, {hi}): outside the bf16 noise")
        agree = 0
        for k, r in enumerate(gen):
            j = len(positions) + k
            top2 = torch.topk(ref[j], 2)
            tok = o["token_ids"][k]
            if int(top2.indices[0]) == tok:
                agree += 1
                continue
            gap = (top2.values[0] - top2.values[1]).item()
            bound = 2 * (bf[j] - ref[j]).abs().max().item()
            if gap > bound:
                failures.append(f"{name} {rid} token {k}: ours {tok}, fp32 argmax "
                                f"{int(top2.indices[0])}, gap {gap:.4f} > near-tie {bound:.4f}")
            break  # the first disagreement (a near-tie) ends the greedy comparison
        print(f"[{name}] {rid} greedy: {agree}/{len(gen)} generated tokens are fp32's argmax "
              f"before the first near-tie")


def main():
    launch, model_dir, out = sys.argv[1:4]
    no_gqa_in_sdpa()
    rng = random.Random(1919)
    vocab = json.load(open(f"{model_dir}/config.json"))["vocab_size"]
    hi = min(vocab, 151643) - 1
    ids = lambda n: [rng.randint(0, hi) for _ in range(n)]  # noqa: E731
    failures = []
    plain = {"p8k": ids(8192), "p32k": ids(32000)}
    ours = run_ours(launch, model_dir, out, "plain", plain, 16, ["--max-model-len", "40960"])
    models = {"fp32": load(model_dir, torch.float32, False),
              "bf16": load(model_dir, torch.bfloat16, False)}
    compare("plain", ours, plain, models, failures, rng)
    del models
    torch.cuda.empty_cache()
    major = int(transformers.__version__.split(".")[0])
    if major < 5:
        failures.append(f"transformers {transformers.__version__}: YaRN needs >= 5")
    else:
        yarn = {"y64k": ids(64000), "y120k": ids(120000)}
        ours = run_ours(launch, model_dir, out, "yarn", yarn, 8,
                        ["--max-model-len", "131072", "--rope-scaling", json.dumps(YARN)])
        models = {"fp32": load(model_dir, torch.float32, True),
                  "bf16": load(model_dir, torch.bfloat16, True)}
        compare("yarn", ours, yarn, models, failures, rng)
    for f in failures:
        print("FAIL", f)
    print(f"long context vs transformers: {'ok' if not failures else 'FAILED'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
