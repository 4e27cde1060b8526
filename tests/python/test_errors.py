"""Errors are Python exceptions naming what is wrong, and leave nothing running: an unknown
LLM keyword (TypeError), bad sampling values (ValueError, in SamplingParams and, worded the
same, from the engine when a changed SamplingParams reaches it), prompts the model cannot take
(ValueError naming the request); after a refused call the LLM still works."""

import pytest

from conftest import SMALL, worker_pids
from nanovllm import LLM, SamplingParams
from test_sampling_params import BAD

# Values the engine itself sees (SamplingParams changed after construction): the field and the
# wording of SamplingParams' own message must both be in the engine's.
ENGINE_CHECKED = [
    ("temperature", -1), ("top_p", 0), ("top_k", -2), ("min_p", 1.5), ("max_tokens", 0),
    ("n", 0), ("n", 65), ("repetition_penalty", 0), ("presence_penalty", 2.5),
    ("logprobs", 21), ("stop", [""]), ("min_tokens", -1),
]


def python_message(field, value):
    with pytest.raises(ValueError) as e:
        SamplingParams(**{field: value})
    return str(e.value)


@pytest.fixture(scope="module")
def llm(tiny_model):
    with LLM(tiny_model, **SMALL) as llm:
        yield llm


def test_unknown_llm_keyword_is_a_type_error_naming_it(tiny_model, shm_prefix):
    with pytest.raises(TypeError, match="max_num_seq_typo"):
        LLM(tiny_model, max_num_seq_typo=3, **SMALL)
    with pytest.raises(TypeError, match="tensor_parallel"):
        LLM(tiny_model, tensor_parallel=2, **SMALL)


def test_bad_llm_value_is_a_value_error_naming_it(tiny_model, shm_prefix):
    with pytest.raises(ValueError, match="max_model_len"):
        LLM(tiny_model, **dict(SMALL, max_model_len=-5))
    with pytest.raises(TypeError, match="max_num_seqs"):
        LLM(tiny_model, **dict(SMALL, max_num_seqs=object()))


def test_bad_sampling_params_fail_at_construction():
    for kwargs, _ in BAD:
        with pytest.raises(ValueError):
            SamplingParams(**kwargs)


@pytest.mark.parametrize("field,value", ENGINE_CHECKED, ids=[f"{f}={v}" for f, v in ENGINE_CHECKED])
def test_engine_refuses_what_sampling_params_refuses_with_its_words(llm, field, value):
    expected = python_message(field, value)
    words = expected[expected.index(" ") + 1:]  # without the field name
    params = SamplingParams(max_tokens=4)
    setattr(params, field, value)  # past the constructor's checks
    with pytest.raises(ValueError) as e:
        llm.generate(["fine", "also fine"], [SamplingParams(max_tokens=4), params],
                     use_tqdm=False)
    message = str(e.value)
    assert "request 1" in message and field in message and words in message, (
        f"engine: {message!r}; SamplingParams: {expected!r}")


def test_prompt_longer_than_max_model_len_names_the_request(llm):
    sp = SamplingParams(max_tokens=4)
    with pytest.raises(ValueError) as e:
        llm.generate([[1, 2, 3], [7] * 300, [4, 5]], sp, use_tqdm=False)
    assert "request 1" in str(e.value) and "max_model_len" in str(e.value)
    with pytest.raises(ValueError, match="request 0"):
        llm.generate([[1] * 250], SamplingParams(max_tokens=10), use_tqdm=False)
    with pytest.raises(ValueError, match="request 2.*vocabulary"):
        llm.generate([[1], [2], [10**9]], sp, use_tqdm=False)
    with pytest.raises(ValueError, match="request 0"):
        llm.generate([[1]], SamplingParams(stop_token_ids=[10**9]), use_tqdm=False)
    # Nothing of the refused calls was queued: the next call answers its own prompts only.
    out = llm.generate([[1, 2, 3], [4, 5]], sp, use_tqdm=False)
    assert [len(o["token_ids"]) <= 4 for o in out] == [True, True]


def test_prompt_type_errors_before_the_engine(llm):
    with pytest.raises(TypeError, match=r"prompts\[1\]"):
        llm.generate(["ok", 3.5], use_tqdm=False)
    with pytest.raises(ValueError, match="lengths"):
        llm.generate(["a", "b"], [SamplingParams()], use_tqdm=False)


def test_errors_leave_no_worker_behind(tiny_model, shm_prefix):
    llm = LLM(tiny_model, tensor_parallel_size=2, **SMALL)
    worker_pids(shm_prefix, 1)
    with pytest.raises(ValueError, match="request 0"):
        llm.generate([[7] * 300], use_tqdm=False)
    assert len(llm.generate([[1, 2]], SamplingParams(max_tokens=3), use_tqdm=False)) == 1
    llm.shutdown()  # shm_prefix's teardown checks the worker and the segment are gone
    with pytest.raises(RuntimeError, match="the engine was shut down"):
        llm.generate(["x"], use_tqdm=False)


def test_error_names_the_element_of_this_call_not_the_request_id(llm):
    """c_api.h: the message names the element ("request 3: ...") of the list passed, while
    element i gets the id str(first_index + i); ids keep counting across calls, so after
    earlier calls the two differ."""
    sp = SamplingParams(max_tokens=2)
    llm.generate([[1, 2], [3, 4], [5]], sp, use_tqdm=False)  # ids move on
    with pytest.raises(ValueError) as e:
        llm.generate([[1, 2], [7] * 300], sp, use_tqdm=False)
    assert str(e.value).startswith("request 1:"), str(e.value)
