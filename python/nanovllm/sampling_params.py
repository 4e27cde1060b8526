"""SamplingParams: nano-vllm's three fields, positional as there, and vLLM's that the engine
supports, by keyword.

A bad value fails here, at construction, as in vLLM, with a ValueError worded as the
engine's own reader words it (engine/sampling_defaults.cpp, engine/request_only_fields.cpp):
the engine checks every request again when it is queued, so these checks only move the error
earlier and must never accept what the engine refuses or refuse what it accepts. What needs
the model (token ids against the vocabulary, max_tokens against the context) is left to it.
"""

import dataclasses
import math
import re
from typing import Dict, List, Optional, Union

# The engine's limits (engine/sampling_params.h).
MAX_STOP_STRINGS = 32
MAX_STOP_TOKEN_IDS = 32
MAX_COMPLETIONS = 64  # n
MAX_LOGPROBS = 20  # logprobs, prompt_logprobs
MAX_LOGIT_BIAS = 1024  # logit_bias entries
MAX_ABS_PENALTY = 2  # presence_penalty, frequency_penalty
MAX_ABS_LOGIT_BIAS = 100
_INT32_MAX = 2**31 - 1
_INT32_MIN = -2**31
_DECIMAL = re.compile(r"-?[0-9]{1,18}")  # a logit_bias key as the engine parses it


def _fail(field, message):
    raise ValueError(f"{field} {message}")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_bool(field, v):
    if not isinstance(v, bool):
        _fail(field, "must be True or False")


def _check_int(field, v, lo, hi, range_text):
    """An integer (not a bool, not 2.0) in [lo, hi], worded as request_only_fields.cpp."""
    if not _is_int(v):
        _fail(field, "must be an integer")
    if not lo <= v <= hi:
        _fail(field, f"must be {range_text}, got {v}")


def _check_symmetric(field, v, limit):
    if not _is_number(v):
        _fail(field, "must be a number")
    if not abs(v) <= limit:  # NaN fails too
        _fail(field, f"must be in [-{limit}, {limit}], got {v}")


def _format_number(x):
    """A float as the engine's messages show it: 1.1, 2 (not 2.0)."""
    return f"{x:g}"


@dataclasses.dataclass
class SamplingParams:
    """How to sample one prompt's completions.

    Defaults are nano-vllm's (temperature 1.0, max_tokens 64) and vLLM's for the rest (every
    filter and penalty off). temperature 0 is greedy (nano-vllm refuses it; vLLM and the engine
    accept it). max_tokens=None: as many as the context has room for. seed None: the engine
    derives one from the LLM's seed and the request's number, so runs are reproducible.
    Token ids in stop_token_ids and logit_bias are checked against the vocabulary when the
    request is queued.
    """

    temperature: float = 1.0
    max_tokens: Optional[int] = 64
    ignore_eos: bool = False
    _: dataclasses.KW_ONLY
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: Optional[int] = None
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: Optional[List[int]] = None
    include_stop_str_in_output: bool = False
    min_tokens: int = 0
    n: int = 1
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: Optional[Dict[int, float]] = None
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True

    def __post_init__(self):
        self._check_levelled_fields()
        self._check_stop_fields()
        self._check_counts()
        _check_symmetric("presence_penalty", self.presence_penalty, MAX_ABS_PENALTY)
        _check_symmetric("frequency_penalty", self.frequency_penalty, MAX_ABS_PENALTY)
        self.logit_bias = self._checked_logit_bias()
        for field in ("ignore_eos", "include_stop_str_in_output", "skip_special_tokens",
                      "spaces_between_special_tokens"):
            _check_bool(field, getattr(self, field))

    # The fields the engine also takes from the model's generation_config
    # (engine/sampling_defaults.cpp: read_sampling_field, check_sampling_overrides).
    def _check_levelled_fields(self):
        if self.max_tokens is not None:
            if not _is_int(self.max_tokens):
                _fail("max_tokens", "must be an integer")
            if self.max_tokens > _INT32_MAX:
                _fail("max_tokens", "is too large")
            if self.max_tokens < 1:
                _fail("max_tokens", f"must be at least 1, got {self.max_tokens}")
        for field in ("temperature", "top_p", "min_p", "repetition_penalty"):
            if not _is_number(getattr(self, field)):
                _fail(field, "must be a number")
        t, p, m, r = self.temperature, self.top_p, self.min_p, self.repetition_penalty
        if not (math.isfinite(t) and t >= 0):
            _fail("temperature", "must be a finite number >= 0 (0 = greedy)")
        if not (math.isfinite(p) and 0 < p <= 1):
            _fail("top_p", "must be in (0, 1]")
        if not _is_int(self.top_k):
            _fail("top_k", "must be an integer")
        if not _INT32_MIN <= self.top_k <= _INT32_MAX:
            _fail("top_k", "is out of range")
        if self.top_k < -1:
            _fail("top_k", f"must be -1 or 0 (disabled) or a positive count, got {self.top_k}")
        if not (math.isfinite(m) and 0 <= m <= 1):
            _fail("min_p", "must be in [0, 1]")
        if not (math.isfinite(r) and r > 0):
            _fail("repetition_penalty",
                  f"must be a finite number > 0 (1 = off), got {_format_number(r)}")
        if self.seed is not None:
            # Any 64-bit integer, signed or not; -1 means none, as in vLLM.
            if not _is_int(self.seed):
                _fail("seed", "must be an integer")
            if not -2**63 <= self.seed < 2**64:
                _fail("seed", "must fit 64 bits")

    def _check_stop_fields(self):
        empty = "is empty (a stop string needs at least one character)"
        if isinstance(self.stop, str):
            if not self.stop:
                _fail("stop", empty)
        elif self.stop is not None:
            if not isinstance(self.stop, (list, tuple)):
                _fail("stop", "must be a string or a list of strings")
            if len(self.stop) > MAX_STOP_STRINGS:
                _fail("stop", f"has {len(self.stop)} stop strings; at most {MAX_STOP_STRINGS} "
                      "are allowed")
            for i, s in enumerate(self.stop):
                if not isinstance(s, str):
                    _fail(f"stop[{i}]", "must be a string")
                if not s:
                    _fail(f"stop[{i}]", empty)
            self.stop = list(self.stop)
        if self.stop_token_ids is not None:
            if not isinstance(self.stop_token_ids, (list, tuple)):
                _fail("stop_token_ids", "must be a list of token ids")
            if len(self.stop_token_ids) > MAX_STOP_TOKEN_IDS:
                _fail("stop_token_ids", f"has {len(self.stop_token_ids)} token ids; at most "
                      f"{MAX_STOP_TOKEN_IDS} are allowed")
            for i, t in enumerate(self.stop_token_ids):
                if not _is_int(t):
                    _fail(f"stop_token_ids[{i}]", "must be an integer token id")
                if not 0 <= t <= _INT32_MAX:
                    _fail(f"stop_token_ids[{i}]", f"token id {t} is outside the vocabulary")
            self.stop_token_ids = list(self.stop_token_ids)

    def _check_counts(self):
        _check_int("min_tokens", self.min_tokens, 0, _INT32_MAX, "an integer >= 0")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens must be less than or equal to max_tokens="
                             f"{self.max_tokens}, got {self.min_tokens}")
        _check_int("n", self.n, 1, MAX_COMPLETIONS, f"in [1, {MAX_COMPLETIONS}]")
        for field in ("logprobs", "prompt_logprobs"):
            value = getattr(self, field)
            if value is None:
                continue
            if not _is_int(value):
                _fail(field, f"must be an integer in [0, {MAX_LOGPROBS}]: the number of top "
                      "alternatives per token")
            _check_int(field, value, 0, MAX_LOGPROBS, f"in [0, {MAX_LOGPROBS}]")

    def _checked_logit_bias(self):
        """{token id: bias} with int keys (a decimal string key is accepted, as vLLM's
        OpenAI server takes them)."""
        if self.logit_bias is None:
            return None
        if not isinstance(self.logit_bias, dict):
            _fail("logit_bias", "must be a dict mapping token ids to biases")
        if len(self.logit_bias) > MAX_LOGIT_BIAS:
            _fail("logit_bias", f"has {len(self.logit_bias)} entries; at most "
                  f"{MAX_LOGIT_BIAS} are allowed")
        out = {}
        for key, bias in self.logit_bias.items():
            field = f"logit_bias.{key}"
            if _is_int(key):
                token = key
            elif isinstance(key, str) and _DECIMAL.fullmatch(key):
                token = int(key)
            else:
                _fail(field, "the key must be a token id (a decimal integer)")
            if not 0 <= token <= _INT32_MAX:
                _fail(field, f"token id {key} is outside the vocabulary")
            if token in out:
                _fail(field, f"token id {token} is given twice")
            _check_symmetric(field, bias, MAX_ABS_LOGIT_BIAS)
            out[token] = bias
        return out

    def to_request_fields(self):
        """The native request fields (engine/request_reader.h) these parameters set.

        The fields generation_config.json can also set are always sent, so an explicit
        SamplingParams means exactly what it says, as in vLLM and nano-vllm; the others only
        where they differ from the engine's defaults, to keep requests short."""
        fields = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
            "ignore_eos": self.ignore_eos,
        }
        if self.max_tokens is not None:
            fields["max_tokens"] = self.max_tokens
        if self.seed is not None:
            fields["seed"] = self.seed
        defaults = {
            "stop": None, "stop_token_ids": None, "include_stop_str_in_output": False,
            "min_tokens": 0, "n": 1, "logprobs": None, "prompt_logprobs": None,
            "presence_penalty": 0.0, "frequency_penalty": 0.0, "skip_special_tokens": True,
            "spaces_between_special_tokens": True,
        }
        for field, default in defaults.items():
            value = getattr(self, field)
            if value != default:
                fields[field] = value
        if self.logit_bias:
            fields["logit_bias"] = {str(t): b for t, b in self.logit_bias.items()}
        return fields
