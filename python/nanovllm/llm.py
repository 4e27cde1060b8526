"""LLM: nano-vllm's entry point over the C library's engine.

Rank 0 runs inside this process (the library's nv_engine); with tensor_parallel_size N the
library starts N - 1 nanovllm-worker processes and joins them through one shared-memory
segment. Those processes and the segment must not outlive the LLM, whichever way it ends:
shutdown() (also at the end of a `with` block), garbage collection (`del llm`), interpreter
exit (weakref.finalize runs at exit), a Ctrl-C during generate (the engine is destroyed, then
KeyboardInterrupt goes on), or a dead worker (WorkerDiedError, after the engine is destroyed).
After any of these, using the LLM raises RuntimeError('the engine was shut down ...').
"""

import json
import os
import threading
import weakref

from . import prompts as _prompts
from ._native import Engine
from .errors import WorkerDiedError
from .outputs import Collector
from .progress import ProgressBar
from .tokenizer import Tokenizer


def _options(model, kwargs):
    """The nv_engine_create options. Keyword names are the library's to judge (an unknown one
    is its TypeError naming it), so a keyword it learns needs no change here; only values
    JSON cannot carry are refused here, naming their keyword."""
    options = {"model": os.fspath(model)}
    for key, value in kwargs.items():
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise TypeError(f"LLM(): the value of {key!r} ({value!r}) is not a plain "
                            "number, string, bool or None") from None
        options[key] = value
    return options


class LLM:
    """LLM(model, **kwargs): nano-vllm's keywords (tensor_parallel_size, enforce_eager,
    max_num_batched_tokens, max_num_seqs, max_model_len, gpu_memory_utilization,
    kvcache_block_size, num_kvcache_blocks) and vLLM's where they differ (block_size,
    enable_prefix_caching, enable_chunked_prefill, async_scheduling, seed), plus device
    ("cuda" | "cpu"), disable_custom_all_reduce, disable_shard_sampling and log_level. An unknown
    keyword is a TypeError naming it."""

    def __init__(self, model, **kwargs):
        self._engine = None
        self._engine = Engine(_options(model, kwargs))
        # Not a bound method of self: the finalizer must not keep the LLM alive.
        self._finalizer = weakref.finalize(self, self._engine.close, "the LLM was deleted")
        # The C contract allows one thread in an engine at a time.
        self._lock = threading.RLock()
        self._next_request = 0  # request ids keep counting across calls, as vLLM's do
        self._tokenizer = Tokenizer(self._engine, self._lock)

    # ---- lifetime ----------------------------------------------------------------------

    def shutdown(self, reason="shutdown() was called"):
        """Stops the workers and removes the shared-memory segment (idempotent)."""
        if self._engine is not None:
            self._engine.close(reason)
            self._finalizer.detach()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.shutdown("its with block ended")

    def _live_engine(self):
        if self._engine.closed:
            raise RuntimeError(f"the engine was shut down ({self._engine.closed_reason}); "
                               "create a new LLM")
        return self._engine

    # ---- API ---------------------------------------------------------------------------

    def get_tokenizer(self):
        return self._tokenizer

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        """Completions of `prompts` (see nanovllm.prompts for the shapes accepted), in
        prompt order: [{"text", "token_ids", "finish_reason", ...}] (nanovllm.outputs).
        `sampling_params`: one SamplingParams for all, one per prompt, or None for
        SamplingParams()."""
        requests = _prompts.prompt_requests(prompts)
        params = _prompts.per_prompt_params(sampling_params, len(requests))
        return self._run(requests, params, [False] * len(requests), use_tqdm)

    def chat(self, messages, sampling_params=None, use_tqdm=True, add_generation_prompt=True,
             chat_template_kwargs=None):
        """Completions of one conversation or a list of them, rendered with the model's chat
        template (enable_thinking from chat_template_kwargs, default True). Each result's
        "text" is the answer and "reasoning_content" the thinking, as the engine splits them;
        "token_ids" holds every generated token."""
        kwargs = dict(chat_template_kwargs or {})
        unknown = sorted(set(kwargs) - {"enable_thinking"})
        if unknown:
            raise ValueError(f"chat_template_kwargs {unknown} are not supported (only "
                             "enable_thinking)")
        enable_thinking = kwargs.get("enable_thinking", True)
        if not isinstance(enable_thinking, bool):
            raise ValueError("chat_template_kwargs['enable_thinking'] must be True or False")
        convs = _prompts.conversations(messages)
        params = _prompts.per_prompt_params(sampling_params, len(convs))
        if add_generation_prompt:
            requests = [{"messages": c, "enable_thinking": enable_thinking} for c in convs]
            return self._run(requests, params, [True] * len(convs), use_tqdm)
        # No assistant turn opened: the engine's chat requests always open one, so the text
        # is rendered here and sent as a plain prompt.
        tokenizer = self.get_tokenizer()
        requests = [{"prompt": tokenizer.apply_chat_template(
            c, tokenize=False, add_generation_prompt=False, enable_thinking=enable_thinking)}
            for c in convs]
        return self._run(requests, params, [False] * len(convs), use_tqdm)

    # ---- the step loop -----------------------------------------------------------------

    def _run(self, requests, params, chat_flags, use_tqdm):
        with self._lock:
            engine = self._live_engine()
            if not requests:
                return []
            for request, p in zip(requests, params):
                request.update(p.to_request_fields())
            first = self._next_request
            collector = Collector(params, chat_flags)
            bar = None
            try:
                engine.add_requests(requests, first)  # all or none; ValueError naming one
                self._next_request += len(requests)
                bar = ProgressBar(len(requests)) if use_tqdm else None
                self._step_until_done(engine, first, collector, bar)
            except KeyboardInterrupt:
                # The step in flight finished; the rest is abandoned with the engine, so no
                # worker or segment outlives an interrupted program.
                self.shutdown("generate was interrupted (KeyboardInterrupt)")
                raise
            except WorkerDiedError as e:
                self.shutdown(f"a worker died: {e}")
                raise
            except BaseException:
                engine.abort_all()  # keep the engine usable, with nothing left queued
                raise
            finally:
                if bar is not None:
                    bar.close()
            return collector.results()

    @staticmethod
    def _step_until_done(engine, first, collector, bar):
        input_tokens = decode_tokens = 0
        while True:
            step = engine.step()
            for line in step["outputs"]:
                collector.add(int(line["id"]) - first, line)
            input_tokens += step.get("prefill_tokens", 0)
            decode_tokens += step.get("decode_tokens", 0)
            if bar is not None:
                # Tokens produced: decode steps' tokens, or at least those of the completions
                # finished (a prefill step's first token is not counted by the engine as a
                # decode token).
                bar.update(collector.requests_done, input_tokens,
                           max(decode_tokens, collector.completion_tokens))
            if step["unfinished"] == 0:
                break
        missing = collector.missing()
        if missing:
            raise RuntimeError(f"the engine has no unfinished requests but never answered "
                               f"requests {missing} (the library broke its contract)")
