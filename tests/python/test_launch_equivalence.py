"""generate() answers as nanovllm-launch does, token for token, on the same requests: greedy,
sampling with a per-request seed, and sampling with the seed the engine derives from the
request id and the LLM's seed (request i of a fresh LLM's first call has id "i", so the
launch's prompts file names its lines "0".."k-1"); at tensor_parallel_size 1 and 2 (one
worker process)."""

import json
import os
import subprocess

import pytest

from conftest import LAUNCH_FLAGS, SMALL, program, unique_prefix
from nanovllm import LLM, SamplingParams

BASE_SEED = 1234
PROMPTS = ["Tell me about the sea", [5, 6, 7, 8, 9, 10], "Hello", [100, 2000, 30000]]
# The tiny model's next-token distributions are sharply peaked (nanovllm-mkmodel --help): at
# ordinary temperatures sampling picks the greedy token whatever the seed. A high temperature
# over the top 50 makes every draw depend on the seed, so a wrong seed shows.
UNSEEDED = SamplingParams(temperature=30.0, top_k=50, max_tokens=12, ignore_eos=True)
GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)


def seeded(i):
    return SamplingParams(temperature=30.0, top_p=0.95, top_k=40, max_tokens=12, seed=1000 + i,
                          ignore_eos=True)


def prompt_field(prompt):
    return {"prompt": prompt} if isinstance(prompt, str) else {"prompt_token_ids": prompt}


def launch(model, tp, lines, tmp_path):
    prompts = tmp_path / f"prompts-tp{tp}.jsonl"
    out = tmp_path / f"out-tp{tp}.jsonl"
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = dict(os.environ, NANOVLLM_SHM_PREFIX=unique_prefix())
    run = subprocess.run([program("NANOVLLM_LAUNCH"), model, str(prompts), "-o", str(out),
                          "--tp", str(tp), "--seed", str(BASE_SEED), "--enforce-eager",
                          *LAUNCH_FLAGS], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return {r["id"]: r["token_ids"] for r in map(json.loads, out.read_text().splitlines())}


@pytest.mark.parametrize("tp", [1, 2])
def test_generate_equals_launch(tiny_model, shm_prefix, tmp_path, tp):
    lines = []
    for i, p in enumerate(PROMPTS):
        lines.append(dict(prompt_field(p), id=str(i), **UNSEEDED.to_request_fields()))
        lines.append(dict(prompt_field(p), id=f"g{i}", **GREEDY.to_request_fields()))
        lines.append(dict(prompt_field(p), id=f"s{i}", **seeded(i).to_request_fields()))
    expected = launch(tiny_model, tp, lines, tmp_path)

    with LLM(tiny_model, tensor_parallel_size=tp, seed=BASE_SEED, enforce_eager=True,
             **SMALL) as llm:
        unseeded = llm.generate(PROMPTS, UNSEEDED, use_tqdm=False)  # ids "0".."3"
        greedy = llm.generate(PROMPTS, GREEDY, use_tqdm=False)
        with_seed = llm.generate(PROMPTS, [seeded(i) for i in range(len(PROMPTS))],
                                 use_tqdm=False)
        # A second unseeded call has other ids, so other seeds: not a replay of the first.
        again = llm.generate(PROMPTS, UNSEEDED, use_tqdm=False)

    for i in range(len(PROMPTS)):
        assert unseeded[i]["token_ids"] == expected[str(i)], f"unseeded prompt {i}"
        assert greedy[i]["token_ids"] == expected[f"g{i}"], f"greedy prompt {i}"
        assert with_seed[i]["token_ids"] == expected[f"s{i}"], f"seeded prompt {i}"
        assert len(unseeded[i]["token_ids"]) == 12
    # Sampling that could tell seeds apart: not greedy, and the seeds differ per request.
    for sampled in (unseeded, with_seed, again):
        assert [o["token_ids"] for o in sampled] != [o["token_ids"] for o in greedy]
    assert all(a["token_ids"] != u["token_ids"] for a, u in zip(again, unseeded))
