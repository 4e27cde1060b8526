"""What generate() and chat() accept, turned into the engine's native request objects
(engine/request_reader.h: "prompt" | "prompt_token_ids" | "messages", and sampling fields).

Shapes accepted, as nano-vllm and vLLM take them:
  "text"                                  one prompt
  ["text", ...]                           nano-vllm's list[str]
  [[1, 2, 3], ...]                        nano-vllm's list[list[int]] (bench.py)
  [1, 2, 3]                               one tokenized prompt (vLLM reads a flat list so)
  {"prompt": "text"}                      vLLM's TextPrompt
  {"prompt_token_ids": [1, 2, 3]}         vLLM's TokensPrompt (bench.py's vLLM line)
and lists mixing the last four. Types are checked here (TypeError naming the prompt); values
(empty prompts, ids outside the vocabulary, prompts longer than max_model_len) are the
engine's to judge when the requests are queued (ValueError naming "request i").
"""

import operator

from .sampling_params import SamplingParams


def _token_ids(value, where):
    """A list of Python ints (numpy integers and other __index__ types accepted; bools and
    floats are not token ids)."""
    ids = []
    for i, t in enumerate(value):
        if isinstance(t, bool):
            raise TypeError(f"{where}[{i}] must be an integer token id, got {t!r}")
        try:
            ids.append(operator.index(t))
        except TypeError:
            raise TypeError(f"{where}[{i}] must be an integer token id, got {t!r}") from None
    return ids


def _is_token_list(value):
    """A flat, non-empty list of integers (numpy's too): one tokenized prompt."""
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(
        hasattr(type(t), "__index__") and not isinstance(t, bool) for t in value)


def _one_request(prompt, where):
    if isinstance(prompt, str):
        return {"prompt": prompt}
    if isinstance(prompt, dict):
        extra = sorted(set(prompt) - {"prompt", "prompt_token_ids"})
        if extra:
            raise TypeError(f"{where} has unsupported keys {extra} (only 'prompt' or "
                            "'prompt_token_ids')")
        if ("prompt" in prompt) == ("prompt_token_ids" in prompt):
            raise TypeError(f"{where} needs exactly one of 'prompt' and 'prompt_token_ids'")
        if "prompt" in prompt:
            if not isinstance(prompt["prompt"], str):
                raise TypeError(f"{where}['prompt'] must be a str")
            return {"prompt": prompt["prompt"]}
        return {"prompt_token_ids": _token_ids(prompt["prompt_token_ids"],
                                               f"{where}['prompt_token_ids']")}
    if isinstance(prompt, (list, tuple)):
        return {"prompt_token_ids": _token_ids(prompt, where)}
    raise TypeError(f"{where} must be a str, a list of token ids or a dict with 'prompt' or "
                    f"'prompt_token_ids', got {type(prompt).__name__}")


def prompt_requests(prompts):
    """Request objects, one per prompt, in order."""
    if isinstance(prompts, (str, dict)) or _is_token_list(prompts):
        return [_one_request(prompts, "prompts")]
    if not isinstance(prompts, (list, tuple)):
        raise TypeError("prompts must be a str, a list of str, a list of token-id lists or "
                        f"vLLM-style prompt dicts, got {type(prompts).__name__}")
    return [_one_request(p, f"prompts[{i}]") for i, p in enumerate(prompts)]


def _is_message(value):
    return isinstance(value, dict)


def conversations(messages):
    """One conversation (a list of {"role", "content"} dicts) or a list of them, as a list."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise TypeError("messages must be a conversation (a non-empty list of "
                        "{'role', 'content'} dicts) or a list of conversations")
    if all(_is_message(m) for m in messages):
        return [list(messages)]
    for i, conversation in enumerate(messages):
        if (not isinstance(conversation, (list, tuple))
                or not all(_is_message(m) for m in conversation)):
            raise TypeError(f"messages[{i}] must be a conversation: a list of "
                            "{'role', 'content'} dicts")
    return [list(c) for c in messages]


def per_prompt_params(sampling_params, count):
    """One SamplingParams per prompt: None means SamplingParams() (nano-vllm's defaults), one
    object is shared by all, a list must match the prompts."""
    if sampling_params is None:
        sampling_params = SamplingParams()
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params] * count
    if not isinstance(sampling_params, (list, tuple)):
        raise TypeError("sampling_params must be a SamplingParams or a list of them, got "
                        f"{type(sampling_params).__name__}")
    if len(sampling_params) != count:
        raise ValueError(f"the lengths of prompts ({count}) and sampling_params "
                         f"({len(sampling_params)}) must be the same")
    for i, p in enumerate(sampling_params):
        if not isinstance(p, SamplingParams):
            raise TypeError(f"sampling_params[{i}] must be a SamplingParams, got "
                            f"{type(p).__name__}")
    return list(sampling_params)
