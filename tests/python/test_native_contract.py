"""launcher/c_api.h as written, called through nanovllm._native.Engine (below LLM): the shapes
and meanings the package relies on, each checked where a misreading would go unnoticed
higher up (a progress bar's rates, an error's index, the tokenizer's eos)."""

import pytest

from conftest import SMALL
from nanovllm._native import Engine

GREEDY = {"temperature": 0, "max_tokens": 5, "ignore_eos": True}


@pytest.fixture(scope="module")
def engine(tiny_model):
    e = Engine(dict(SMALL, model=tiny_model))
    yield e
    e.close()


def run(engine, requests, first_index):
    assert engine.add_requests(requests, first_index) == len(requests)
    steps = []
    while True:
        steps.append(engine.step())
        if steps[-1]["unfinished"] == 0:
            return steps


def test_info_has_the_documented_keys(engine):
    info = engine.info()
    for key in ("max_model_len", "max_num_seqs", "num_kvcache_blocks", "block_size",
                "eos_token_ids", "vocab_size", "tensor_parallel_size", "device", "worker_pids",
                "segment"):
        assert key in info, f"nv_engine_info lacks {key!r}: {info}"
    assert (info["max_model_len"], info["block_size"], info["num_kvcache_blocks"]) == (256, 16, 96)
    assert info["eos_token_ids"] and all(isinstance(t, int) for t in info["eos_token_ids"])
    assert (info["device"], info["worker_pids"], info["segment"]) == ("cpu", [], "")


def test_step_token_counts_are_the_steps_own(engine):
    """'Runs one engine step. Returns ... "prefill_tokens": N, "decode_tokens": N': this
    step's tokens, so over a call they add up to the prompts and the completions."""
    prompts = [[1, 2, 3, 4, 5, 6, 7], [8, 9, 10]]
    for first_index in (0, 100):  # a second call: counts must not carry over
        steps = run(engine, [dict(GREEDY, prompt_token_ids=p) for p in prompts], first_index)
        outputs = [o for s in steps for o in s["outputs"]]
        assert sorted(o["id"] for o in outputs) == [str(first_index), str(first_index + 1)]
        prefill = sum(s["prefill_tokens"] for s in steps)
        decode = sum(s["decode_tokens"] for s in steps)
        assert prefill <= sum(map(len, prompts)), [s["prefill_tokens"] for s in steps]
        assert decode <= 2 * GREEDY["max_tokens"], [s["decode_tokens"] for s in steps]
        assert all(s["decode_tokens"] <= len(prompts) for s in steps), steps


def test_bad_element_is_named_by_its_index_in_the_list(engine):
    """'on the first invalid element nothing is queued and *error is a ValueError whose
    message names the element ("request 3: ...")'."""
    with pytest.raises(ValueError) as e:
        engine.add_requests([dict(GREEDY, prompt_token_ids=[1]), dict(GREEDY, temperature=-1,
                                                                      prompt_token_ids=[2])], 40)
    assert str(e.value).startswith("request 1: "), str(e.value)


def test_bad_option_value_names_the_keyword(tiny_model):
    """'a bad value a ValueError naming it' (the keyword, as the caller spelled it)."""
    with pytest.raises(ValueError) as e:
        Engine(dict(SMALL, model=tiny_model, max_model_len=-5))
    assert "max_model_len" in str(e.value), str(e.value)


def test_unknown_option_is_a_type_error_naming_it(tiny_model):
    with pytest.raises(TypeError, match="no_such_option"):
        Engine(dict(SMALL, model=tiny_model, no_such_option=1))
