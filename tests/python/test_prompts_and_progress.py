"""The pure-Python parts of generate(): the prompt shapes it accepts, one SamplingParams per
prompt, the results it assembles, and the progress bar's text (no engine needed)."""

import io

import pytest

from nanovllm import SamplingParams
from nanovllm.outputs import Collector, RequestFailed
from nanovllm.progress import ProgressBar, format_bar_cells, format_interval, format_line
from nanovllm.prompts import conversations, per_prompt_params, prompt_requests


def test_prompt_shapes_of_nano_vllm_and_vllm():
    assert prompt_requests("hi") == [{"prompt": "hi"}]
    assert prompt_requests(["a", "b"]) == [{"prompt": "a"}, {"prompt": "b"}]
    assert prompt_requests([[1, 2], [3]]) == [{"prompt_token_ids": [1, 2]},
                                              {"prompt_token_ids": [3]}]
    assert prompt_requests([5, 6]) == [{"prompt_token_ids": [5, 6]}]  # one tokenized prompt
    assert prompt_requests([{"prompt_token_ids": (7, 8)}, {"prompt": "x"}, "y"]) == [
        {"prompt_token_ids": [7, 8]}, {"prompt": "x"}, {"prompt": "y"}]
    assert prompt_requests([]) == []


@pytest.mark.parametrize("prompts,words", [
    (3, "prompts must be a str"),
    ([1.5, 2], "prompts[0] must be a str"),
    ([object()], "prompts[0] must be a str"),
    ([[1, True]], "prompts[0][1] must be an integer token id"),
    ([[1, "2"]], "prompts[0][1] must be an integer token id"),
    ([{"prompt": "x", "multi_modal_data": {}}], "unsupported keys ['multi_modal_data']"),
    ([{}], "exactly one of"),
])
def test_bad_prompt_shapes_are_type_errors_naming_the_prompt(prompts, words):
    with pytest.raises(TypeError) as e:
        prompt_requests(prompts)
    assert words in str(e.value)


def test_conversations_one_or_many():
    conv = [{"role": "user", "content": "hi"}]
    assert conversations(conv) == [conv]
    assert conversations([conv, conv]) == [conv, conv]
    with pytest.raises(TypeError, match=r"messages\[1\]"):
        conversations([conv, "nope"])


def test_sampling_params_per_prompt():
    assert [p.max_tokens for p in per_prompt_params(None, 2)] == [64, 64]
    one = SamplingParams(max_tokens=3)
    assert per_prompt_params(one, 3) == [one] * 3
    with pytest.raises(ValueError, match="lengths"):
        per_prompt_params([one], 2)
    with pytest.raises(TypeError):
        per_prompt_params({"max_tokens": 3}, 1)


def _line(i, index=0, tokens=(1, 2), **extra):
    return dict(id=str(i), index=index, text="t%d" % index, token_ids=list(tokens),
                finish_reason="length", stop_reason=None, **extra)


def test_results_in_prompt_order_with_n_completions_and_asked_fields():
    params = [SamplingParams(n=2, logprobs=1), SamplingParams(prompt_logprobs=0)]
    c = Collector(params, [False, True])
    c.add(1, _line(1, prompt_logprobs=[None], reasoning_content="why"))
    c.add(0, _line(0, index=1, tokens=(5,), logprobs=[{}], cumulative_logprob=-1.0))
    assert c.missing() == [0] and c.requests_done == 1
    c.add(0, _line(0, index=0, logprobs=[{}, {}], cumulative_logprob=-2.0))
    assert c.missing() == [] and c.requests_done == 2 and c.completion_tokens == 5
    first, second = c.results()
    assert first["text"] == "t0" and first["token_ids"] == [1, 2]
    assert first["cumulative_logprob"] == -2.0 and "prompt_logprobs" not in first
    assert [o["index"] for o in first["outputs"]] == [0, 1]
    assert first["outputs"][1]["token_ids"] == [5]
    assert second["prompt_logprobs"] == [None] and "logprobs" not in second
    assert second["reasoning_content"] == "why" and "outputs" not in second


def test_error_result_raises_naming_the_request():
    c = Collector([SamplingParams()], [False])
    with pytest.raises(RequestFailed, match="request 0: too long"):
        c.add(0, dict(id="0", index=0, finish_reason="error", error={"message": "too long"}))


def test_progress_line_reads_as_tqdm():
    assert format_interval(65) == "01:05" and format_interval(3725) == "1:02:05"
    assert format_bar_cells(0.5, 4) == "██  " and format_bar_cells(1 / 16, 2) == "▏ "
    line = format_line(2, 5, 4.0, 800, 100, columns=140)
    assert line.startswith("Generating:  40%|") and len(line) == 140
    assert "| 2/5 [00:04<00:06,  2.00s/it, est. speed input: 200.00 toks/s, output: 25.00 " \
           "toks/s]" in line
    assert "0/5 [00:00<?, ?it/s]" in format_line(0, 5, 0.0, 0, 0)
    assert format_line(5, 10, 1.0, 0, 0).startswith("Generating:  50%|█████     | 5/10 [")
    assert "%|" not in format_line(5, 10, 1.0, 0, 0, columns=40)  # too narrow for a bar


def test_progress_bar_redraws_and_ends_its_line():
    now = [0.0]
    out = io.StringIO()
    bar = ProgressBar(2, stream=out, clock=lambda: now[0])
    now[0] = 0.05
    bar.update(1, 10, 5)  # within 0.1 s of the last draw: not drawn
    now[0] = 1.0
    bar.update(2, 20, 8)
    bar.close()
    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n")
    assert "2/2 [00:01<00:00,  2.00it/s" in text and "1/2" not in text
