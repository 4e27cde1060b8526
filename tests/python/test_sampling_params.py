"""SamplingParams' checks at construction (no engine needed): nano-vllm's and vLLM's spellings
accepted, bad values refused with the engine's wording. test_errors.py checks the same values
against the engine itself."""

import math

import pytest

from nanovllm import SamplingParams

# (keyword arguments, words the ValueError must contain)
BAD = [
    (dict(temperature=-1), "temperature must be a finite number >= 0"),
    (dict(temperature=math.nan), "temperature must be a finite number >= 0"),
    (dict(temperature="hot"), "temperature must be a number"),
    (dict(top_p=0), "top_p must be in (0, 1]"),
    (dict(top_p=1.5), "top_p must be in (0, 1]"),
    (dict(top_k=-2), "top_k must be -1 or 0 (disabled) or a positive count, got -2"),
    (dict(top_k=2.0), "top_k must be an integer"),
    (dict(min_p=1.5), "min_p must be in [0, 1]"),
    (dict(max_tokens=0), "max_tokens must be at least 1, got 0"),
    (dict(max_tokens=True), "max_tokens must be an integer"),
    (dict(max_tokens=2**31), "max_tokens is too large"),
    (dict(n=0), "n must be in [1, 64], got 0"),
    (dict(n=65), "n must be in [1, 64], got 65"),
    (dict(repetition_penalty=0), "repetition_penalty must be a finite number > 0 (1 = off), got 0"),
    (dict(presence_penalty=2.5), "presence_penalty must be in [-2, 2], got 2.5"),
    (dict(frequency_penalty=-3), "frequency_penalty must be in [-2, 2], got -3"),
    (dict(min_tokens=-1), "min_tokens must be an integer >= 0, got -1"),
    (dict(min_tokens=10, max_tokens=5), "min_tokens must be less than or equal to max_tokens=5, "
                                        "got 10"),
    (dict(logprobs=21), "logprobs must be in [0, 20], got 21"),
    (dict(prompt_logprobs=-1), "prompt_logprobs must be in [0, 20], got -1"),
    (dict(logprobs=1.0), "logprobs must be an integer in [0, 20]"),
    (dict(stop=""), "stop is empty"),
    (dict(stop=["a", ""]), "stop[1] is empty"),
    (dict(stop=["x"] * 33), "stop has 33 stop strings; at most 32 are allowed"),
    (dict(stop=5), "stop must be a string or a list of strings"),
    (dict(stop_token_ids=[1, -2]), "stop_token_ids[1] token id -2 is outside the vocabulary"),
    (dict(stop_token_ids=list(range(33))), "stop_token_ids has 33 token ids; at most 32"),
    (dict(logit_bias={5: 101}), "logit_bias.5 must be in [-100, 100], got 101"),
    (dict(logit_bias={"x": 1}), "logit_bias.x the key must be a token id"),
    (dict(logit_bias={"05": 1, 5: 2}), "token id 5 is given twice"),
    (dict(seed=1.5), "seed must be an integer"),
    (dict(ignore_eos=1), "ignore_eos must be True or False"),
    (dict(skip_special_tokens="no"), "skip_special_tokens must be True or False"),
]


@pytest.mark.parametrize("kwargs,words", BAD, ids=[str(k) for k, _ in BAD])
def test_bad_values_are_value_errors_naming_the_field(kwargs, words):
    with pytest.raises(ValueError) as e:
        SamplingParams(**kwargs)
    assert words in str(e.value)


def test_nano_vllm_positional_fields_and_defaults():
    p = SamplingParams(0.6, 256, True)
    assert (p.temperature, p.max_tokens, p.ignore_eos) == (0.6, 256, True)
    d = SamplingParams()
    assert (d.temperature, d.max_tokens, d.ignore_eos, d.n) == (1.0, 64, False, 1)


def test_vllm_fields_only_by_keyword_and_unknown_ones_refused():
    with pytest.raises(TypeError):
        SamplingParams(1.0, 16, False, 0.9)  # top_p is keyword-only
    with pytest.raises(TypeError, match="best_of"):
        SamplingParams(best_of=2)


def test_greedy_and_edges_accepted():
    SamplingParams(temperature=0, top_p=1, top_k=0, min_p=1, min_tokens=64, n=64,
                   logprobs=0, prompt_logprobs=20, presence_penalty=-2, frequency_penalty=2,
                   logit_bias={0: -100, "7": 100}, seed=-1, stop="x", max_tokens=None)
    SamplingParams(seed=2**64 - 1)


def test_request_fields_send_sampling_fields_always_and_others_when_set():
    fields = SamplingParams(temperature=0.6, max_tokens=16).to_request_fields()
    assert fields == {"temperature": 0.6, "top_p": 1.0, "top_k": -1, "min_p": 0.0,
                      "repetition_penalty": 1.0, "ignore_eos": False, "max_tokens": 16}
    fields = SamplingParams(seed=3, stop=["\n"], n=2, logprobs=1, logit_bias={9: 1.5},
                            max_tokens=None).to_request_fields()
    assert "max_tokens" not in fields  # the engine's default: the context room left
    assert fields["seed"] == 3 and fields["stop"] == ["\n"] and fields["n"] == 2
    assert fields["logprobs"] == 1 and fields["logit_bias"] == {"9": 1.5}
