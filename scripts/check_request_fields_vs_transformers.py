#!/usr/bin/env python3
"""logprobs, prompt_logprobs and repetition_penalty of nanovllm-launch against transformers.

Usage: python3 scripts/check_request_fields_vs_transformers.py LAUNCH MODEL_DIR OUT_DIR

Runs on the GPU machine (run_gpu_checks.sh, phase "fields-hf") on a random-weight model
folder written by nanovllm-mkmodel. Writes OUT_DIR/requests.jsonl (token-id prompts, greedy):
  - "lp*": logprobs 5 and prompt_logprobs 5, max_tokens 24;
  - "rep*": repetition_penalty 1.3 and logprobs 1, max_tokens 32;
runs LAUNCH --device cuda on it, then transformers on the same model in FP32 (the reference)
and BF16 (the noise level a bf16 engine is held to), eager attention, one sequence at a time:
  - teacher forcing over prompt + our completion: log_softmax at every position, against our
    prompt_logprobs (prompt tokens 1..) and logprobs (completion tokens): max / p99 absolute
    difference of the chosen token's logprob, the share of equal ranks, of equal top-5 sets;
  - repetition penalty: transformers' RepetitionPenaltyLogitsProcessor on the FP32 logits of
    our own sequence (teacher-forced) gives its greedy token at each step: ours must be it,
    except where its top-2 gap (penalized, FP32) is within the BF16 noise (a near-tie); also
    generate(repetition_penalty=1.3) from the prompt, how many first tokens agree.
Prints one summary line per figure; exit 1 when a check fails its bound.
"""
import json
import random
import subprocess
import sys

import torch
from transformers import AutoModelForCausalLM
from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

TOP = 5
PENALTY = 1.3


def make_requests(vocab):
    rng = random.Random(1717)
    hi = min(vocab, 151643) - 1
    reqs = []
    for i in range(6):
        n = rng.randint(16, 160)
        reqs.append({"id": f"lp{i}", "prompt_token_ids": [rng.randint(0, hi) for _ in range(n)],
                     "temperature": 0, "max_tokens": 24, "ignore_eos": True,
                     "logprobs": TOP, "prompt_logprobs": TOP})
    for i in range(4):
        base = [rng.randint(0, hi) for _ in range(8)]
        ids = (base * 6)[: rng.randint(24, 48)]  # a repetitive prompt: the penalty bites
        reqs.append({"id": f"rep{i}", "prompt_token_ids": ids, "temperature": 0,
                     "max_tokens": 32, "ignore_eos": True, "repetition_penalty": PENALTY,
                     "logprobs": 1})
    return reqs


def chosen(entry, tok):
    """(logprob, rank, top ids) of token `tok` in one vLLM-shaped logprobs dict (the chosen
    token and the top N, keyed by id)."""
    ranked = sorted((v["rank"], int(k)) for k, v in entry.items())
    mine = entry[str(tok)]
    return mine["logprob"], mine["rank"], [t for _, t in ranked[:TOP]]


def main():
    launch, model_dir, out = sys.argv[1:4]
    cfg = json.load(open(f"{model_dir}/config.json"))
    reqs = make_requests(cfg["vocab_size"])
    with open(f"{out}/fields_hf_requests.jsonl", "w") as f:
        for r in reqs:
            f.write(json.dumps(r) + "\n")
    res_path = f"{out}/fields_hf_results.jsonl"
    subprocess.run([launch, model_dir, f"{out}/fields_hf_requests.jsonl", "--device", "cuda",
                    "-o", res_path, "--max-num-seqs", "16"], check=True)
    ours = {}
    for line in open(res_path):
        r = json.loads(line)
        ours[r["id"]] = r
    models = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        models[name] = AutoModelForCausalLM.from_pretrained(
            model_dir, torch_dtype=dtype, attn_implementation="eager").cuda().eval()

    def logprobs_of(name, ids):
        with torch.no_grad():
            logits = models[name](torch.tensor([ids], device="cuda")).logits[0].float()
        return logits, torch.log_softmax(logits, dim=-1)

    diffs, noise, ranks, tops, bf_ranks, bf_tops = [], [], [], [], [], []
    failures = []
    for r in reqs:
        o = ours[r["id"]]
        if o.get("error"):
            failures.append(f"{r['id']}: error {o['error']}")
            continue
        prompt = r["prompt_token_ids"]
        seq = prompt + o["token_ids"]
        _, ref = logprobs_of("fp32", seq)
        _, bf = logprobs_of("bf16", seq)
        entries = []  # (position whose logits predict the token, our entry)
        if r.get("prompt_logprobs") is not None:
            pl = o["prompt_logprobs"]
            assert pl[0] is None and len(pl) == len(prompt), r["id"]
            entries += [(i - 1, pl[i]) for i in range(1, len(prompt))]
        lp = o["logprobs"]
        assert len(lp) == len(o["token_ids"]), r["id"]
        entries += [(len(prompt) - 1 + k, lp[k]) for k in range(len(lp))]
        for pos, e in entries:
            tok = seq[pos + 1]
            assert str(tok) in e, (r["id"], pos)
            value, rank, top = chosen(e, tok)
            row = ref[pos]
            diffs.append(abs(value - row[tok].item()))
            noise.append(abs(bf[pos][tok].item() - row[tok].item()))
            ref_rank = int((row >= row[tok]).sum().item())
            ranks.append(rank == ref_rank)
            bf_ranks.append(int((bf[pos] >= bf[pos][tok]).sum().item()) == ref_rank)
            if r.get("prompt_logprobs") is not None:
                ref_top = set(torch.topk(row, TOP).indices.tolist())
                tops.append(set(top) == ref_top)
                bf_tops.append(set(torch.topk(bf[pos], TOP).indices.tolist()) == ref_top)
    diffs_t, noise_t = torch.tensor(diffs), torch.tensor(noise)
    q = lambda t, p: torch.quantile(t, p).item()  # noqa: E731
    print(f"logprob |ours - hf fp32|: max {diffs_t.max():.4f} p99 {q(diffs_t, 0.99):.4f} "
          f"mean {diffs_t.mean():.5f} over {len(diffs)} positions; hf bf16 vs fp32: max "
          f"{noise_t.max():.4f} p99 {q(noise_t, 0.99):.4f} mean {noise_t.mean():.5f}")
    print(f"rank equal to hf fp32: ours {sum(ranks)}/{len(ranks)}, hf bf16 {sum(bf_ranks)}; "
          f"top-{TOP} set equal: ours {sum(tops)}/{len(tops)}, hf bf16 {sum(bf_tops)}")
    # Within the bf16 engine's own noise: p99 within 2x transformers' bf16 p99, max within 4x.
    if q(diffs_t, 0.99) > 2 * q(noise_t, 0.99) + 1e-3 or diffs_t.max() > 4 * noise_t.max() + 1e-3:
        failures.append("logprobs outside the bf16 noise bound")

    proc = RepetitionPenaltyLogitsProcessor(PENALTY)
    agree_steps, total_steps, near_ties = 0, 0, 0
    gen_agree = []
    for r in reqs:
        if "repetition_penalty" not in r:
            continue
        o = ours[r["id"]]
        prompt = r["prompt_token_ids"]
        seq = prompt + o["token_ids"]
        logits, _ = logprobs_of("fp32", seq)
        bf_logits, _ = logprobs_of("bf16", seq)
        for k, tok in enumerate(o["token_ids"]):
            pos = len(prompt) - 1 + k
            context = torch.tensor([seq[: pos + 1]], device="cuda")
            pen = proc(context, logits[pos : pos + 1].clone())[0]
            pen_bf = proc(context, bf_logits[pos : pos + 1].clone())[0]
            top2 = torch.topk(pen, 2)
            gap = (top2.values[0] - top2.values[1]).item()
            tie_bound = 2 * (pen_bf - pen).abs().max().item()
            total_steps += 1
            if int(top2.indices[0]) == tok:
                agree_steps += 1
            elif gap <= tie_bound:
                near_ties += 1  # every step is teacher-forced on our context: go on
            else:
                failures.append(f"{r['id']} step {k}: ours {tok}, penalized hf argmax "
                                f"{int(top2.indices[0])}, gap {gap:.4f} > near-tie {tie_bound:.4f}")
        with torch.no_grad():
            gen = models["fp32"].generate(torch.tensor([prompt], device="cuda"), do_sample=False,
                                          repetition_penalty=PENALTY, max_new_tokens=32,
                                          min_new_tokens=32)[0][len(prompt):].tolist()
        same = 0
        while same < min(len(gen), len(o["token_ids"])) and gen[same] == o["token_ids"][same]:
            same += 1
        gen_agree.append(f"{r['id']} {same}/{len(o['token_ids'])}")
    print(f"repetition_penalty {PENALTY}: our greedy token = argmax of "
          f"RepetitionPenaltyLogitsProcessor(hf fp32 logits) at {agree_steps}/{total_steps} "
          f"steps, {near_ties} near-ties; generate() from the prompt agrees for the first "
          f"tokens of: {', '.join(gen_agree)}")
    for f in failures:
        print("FAIL", f)
    print(f"request fields vs transformers: {'ok' if not failures else 'FAILED'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
