"""nano-vllm's own scripts, as they are written, on the tiny model (CPU backend): example.py
(chat prompts through the tokenizer, generate with a progress bar) and bench.py (random token
ids, a warm-up, generate without a bar); then the extras: chat(), n > 1, logprobs, stop."""

import random
import time

import pytest

from conftest import SMALL
from nanovllm import LLM, SamplingParams


@pytest.fixture(scope="module")
def llm(tiny_model):
    with LLM(tiny_model, enforce_eager=True, tensor_parallel_size=1, **SMALL) as llm:
        yield llm


def test_example_py(llm, capsys):
    tokenizer = llm.get_tokenizer()
    sampling_params = SamplingParams(temperature=0.6, max_tokens=16)
    prompts = ["introduce yourself", "list all prime numbers within 100", "hi"]
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}],
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=True,
        )
        for prompt in prompts
    ]
    assert prompts[0] == "<|im_start|>user\nintroduce yourself<|im_end|>\n<|im_start|>assistant\n"
    outputs = llm.generate(prompts, sampling_params)
    assert len(outputs) == len(prompts)
    for output in outputs:
        assert isinstance(output["text"], str)
        assert all(isinstance(t, int) for t in output["token_ids"])
        assert 1 <= len(output["token_ids"]) <= 16
        assert output["finish_reason"] in ("stop", "length")
        assert output["text"] == tokenizer.decode(output["token_ids"], skip_special_tokens=True)
    bar = capsys.readouterr().err
    assert "Generating: 100%|" in bar and "| 3/3 [" in bar and "toks/s]" in bar


def test_bench_py(llm, capsys):
    rng = random.Random(0)
    num_seqs = 8
    prompt_token_ids = [[rng.randint(0, 10000) for _ in range(rng.randint(10, 100))]
                        for _ in range(num_seqs)]
    sampling_params = [SamplingParams(temperature=0.6, ignore_eos=True,
                                      max_tokens=rng.randint(10, 100)) for _ in range(num_seqs)]
    llm.generate(["Benchmark: "], SamplingParams())
    t = time.time()
    outputs = llm.generate(prompt_token_ids, sampling_params, use_tqdm=False)
    t = time.time() - t
    assert [len(o["token_ids"]) for o in outputs] == [sp.max_tokens for sp in sampling_params]
    assert all(o["finish_reason"] == "length" for o in outputs)
    total_tokens = sum(sp.max_tokens for sp in sampling_params)
    print(f"Total: {total_tokens}tok, Time: {t:.2f}s, Throughput: {total_tokens / t:.2f}tok/s")
    err = capsys.readouterr().err
    assert err.count("Generating:") >= 1  # the warm-up's bar only
    assert f"{num_seqs}/{num_seqs}" not in err


def test_vllm_prompt_dicts_and_one_params_per_prompt(llm):
    greedy = SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    by_list = llm.generate([[11, 12, 13]], greedy, use_tqdm=False)
    by_dict = llm.generate([{"prompt_token_ids": [11, 12, 13]}], [greedy], use_tqdm=False)
    flat = llm.generate([11, 12, 13], greedy, use_tqdm=False)
    assert by_list == by_dict == flat
    assert len(by_list[0]["token_ids"]) == 5


def test_tokenizer_as_transformers_spells_it(llm):
    tokenizer = llm.get_tokenizer()
    ids = tokenizer.encode("Hello world")
    assert ids and all(isinstance(t, int) for t in ids)
    assert tokenizer.decode(ids) == "Hello world"
    messages = [{"role": "user", "content": "hi"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert tokenizer.apply_chat_template(messages, add_generation_prompt=True) == \
        tokenizer.encode(text)  # transformers' default: tokenize=True
    assert not tokenizer.apply_chat_template(messages, tokenize=False).endswith(
        "assistant\n")  # transformers' default: no generation prompt
    no_think = tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True, enable_thinking=False)
    assert no_think.endswith("<think>\n\n</think>\n\n")
    im_end = tokenizer.encode("<|im_end|>")
    assert len(im_end) == 1
    assert tokenizer.decode(im_end + ids, skip_special_tokens=True) == "Hello world"
    assert tokenizer.decode(im_end + ids) == "<|im_end|>Hello world"
    assert isinstance(tokenizer.eos_token_id, int)


def test_chat_one_conversation_or_several(llm):
    conv = [{"role": "user", "content": "hi"}]
    sp = SamplingParams(temperature=0, max_tokens=8)
    one = llm.chat(conv, sp, use_tqdm=False)
    two = llm.chat([conv, conv], sp, use_tqdm=False)
    assert len(one) == 1 and len(two) == 2
    assert one[0]["token_ids"] == two[0]["token_ids"] == two[1]["token_ids"]
    assert "reasoning_content" in one[0]
    # The same tokens as generating from the rendered template.
    text = llm.get_tokenizer().apply_chat_template(conv, tokenize=False,
                                                   add_generation_prompt=True)
    assert llm.generate(text, sp, use_tqdm=False)[0]["token_ids"] == one[0]["token_ids"]


def test_n_completions_logprobs_and_stop(llm):
    # A high temperature: the tiny model's peaked distributions would otherwise give every
    # completion the same tokens.
    sp = SamplingParams(temperature=30.0, top_k=50, max_tokens=6, n=3, seed=7, logprobs=2,
                        prompt_logprobs=1, ignore_eos=True)
    out = llm.generate([[1, 2, 3, 4]], sp, use_tqdm=False)[0]
    assert [o["index"] for o in out["outputs"]] == [0, 1, 2]
    assert out["token_ids"] == out["outputs"][0]["token_ids"]
    assert len({tuple(o["token_ids"]) for o in out["outputs"]}) == 3  # each its own seed
    assert all(len(o["token_ids"]) == 6 and len(o["logprobs"]) == 6 for o in out["outputs"])
    assert isinstance(out["cumulative_logprob"], float)
    assert len(out["prompt_logprobs"]) == 4  # vLLM's: None for the first prompt token
    assert out == llm.generate([[1, 2, 3, 4]], sp, use_tqdm=False)[0]  # seeded: reproducible

    first = llm.generate([[1, 2, 3]], SamplingParams(temperature=0, max_tokens=4,
                                                     ignore_eos=True), use_tqdm=False)[0]
    stop_id = first["token_ids"][1]
    stopped = llm.generate([[1, 2, 3]], SamplingParams(temperature=0, max_tokens=4,
                                                       stop_token_ids=[stop_id]),
                           use_tqdm=False)[0]
    assert stopped["token_ids"][-1] == stop_id and len(stopped["token_ids"]) <= 2
    assert stopped["finish_reason"] == "stop" and stopped["stop_reason"] == stop_id
