"""generate()'s return value, gathered from the completions the engine's steps finish.

nano-vllm returns one dict per prompt, {"text", "token_ids"}; we return the same dict with
what else the engine says about the completion:
  "finish_reason"   "stop" | "length" (vLLM's)
  "stop_reason"     None, the stop string or the stop_token_ids entry that ended it
  "logprobs", "cumulative_logprob"   when SamplingParams.logprobs was given (vLLM's shapes)
  "prompt_logprobs"                  when SamplingParams.prompt_logprobs was given
  "reasoning_content"                chat() requests: the thinking; "text" is the answer
  "outputs"         when n > 1: every completion, ordered by index, each a dict of the keys
                    above (except prompt_logprobs) and its "index"; the top-level keys are
                    completion 0's, so code written for n = 1 keeps working.
"""

_COMPLETION_KEYS = ("text", "token_ids", "finish_reason", "stop_reason")
_LOGPROB_KEYS = ("logprobs", "cumulative_logprob")


class RequestFailed(ValueError):
    """The engine answered a queued request with an error result."""


class Collector:
    """The completions of one generate() call, by prompt index."""

    def __init__(self, params, chat_flags):
        self._params = params  # SamplingParams per prompt
        self._chat = chat_flags  # whether prompt i is a chat request
        self._lines = [dict() for _ in params]  # completion index -> result line
        self.requests_done = 0
        self.completion_tokens = 0

    def add(self, prompt_index, line):
        """One finished completion (a native result line)."""
        if not 0 <= prompt_index < len(self._params):
            raise RuntimeError(f"the engine answered request {prompt_index}, which this call "
                               "did not queue")
        if line.get("finish_reason") == "error" or line.get("error"):
            message = (line.get("error") or {}).get("message", "failed")
            raise RequestFailed(f"request {prompt_index}: {message}")
        completions = self._lines[prompt_index]
        completions[int(line.get("index", 0))] = line
        self.completion_tokens += len(line.get("token_ids", ()))
        if len(completions) == self._params[prompt_index].n:
            self.requests_done += 1

    def missing(self):
        """Prompt indexes not fully answered yet."""
        return [i for i, c in enumerate(self._lines) if len(c) < self._params[i].n]

    def _completion(self, line, params, chat):
        out = {key: line.get(key) for key in _COMPLETION_KEYS}
        if params.logprobs is not None:
            out.update({key: line.get(key) for key in _LOGPROB_KEYS})
        if chat:
            out["reasoning_content"] = line.get("reasoning_content")
        return out

    def results(self):
        """One dict per prompt, in prompt order."""
        results = []
        for params, chat, completions in zip(self._params, self._chat, self._lines):
            ordered = [completions[i] for i in sorted(completions)]
            each = [self._completion(line, params, chat) for line in ordered]
            result = dict(each[0])
            if params.prompt_logprobs is not None:
                result["prompt_logprobs"] = ordered[0].get("prompt_logprobs")
            if params.n > 1:
                result["outputs"] = [dict(c, index=int(line.get("index", 0)))
                                     for c, line in zip(each, ordered)]
            results.append(result)
        return results
