"""llm.get_tokenizer(): the engine's own tokenizer and chat template, spelled as transformers
spells them, so nano-vllm's example.py runs without transformers installed:

    tokenizer = llm.get_tokenizer()       # instead of AutoTokenizer.from_pretrained(path)
    text = tokenizer.apply_chat_template(messages, tokenize=False,
                                         add_generation_prompt=True, enable_thinking=True)

The defaults are transformers' (tokenize=True, add_generation_prompt=False, decode keeps
special tokens), so code written for a transformers tokenizer gets what it expects. It uses
the LLM's engine, under the LLM's lock: it works as long as the LLM is alive.
"""


class Tokenizer:
    def __init__(self, engine, lock):
        self._engine = engine
        self._lock = lock
        self._info = None

    def _info_value(self, key):
        if self._info is None:
            with self._lock:
                self._info = self._engine.info()
        return self._info.get(key)

    @property
    def eos_token_id(self):
        """The model's end-of-sequence token id (the first, where it names several)."""
        return (self._info_value("eos_token_ids") or [None])[0]

    @property
    def vocab_size(self):
        return self._info_value("vocab_size")

    def encode(self, text, add_special_tokens=True):
        """Token ids of `text`. Qwen3 adds no BOS, so add_special_tokens changes nothing; it
        is accepted for transformers' signature, and special-token text in `text` (such as
        '<|im_start|>') is read as the special token, as transformers does."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        with self._lock:
            return self._engine.encode(text)

    def decode(self, token_ids, skip_special_tokens=False):
        """The text of `token_ids` (a list of ints, or one int as transformers allows)."""
        if isinstance(token_ids, int) and not isinstance(token_ids, bool):
            token_ids = [token_ids]
        ids = [int(t) for t in token_ids]
        with self._lock:
            return self._engine.decode(ids, bool(skip_special_tokens))

    def batch_decode(self, sequences, skip_special_tokens=False):
        return [self.decode(ids, skip_special_tokens) for ids in sequences]

    def apply_chat_template(self, conversation, tokenize=True, add_generation_prompt=False,
                            enable_thinking=True, **kwargs):
        """The engine's chat template (Qwen3's) over one conversation, or over a list of
        them (a list of results). tokenize=True returns token ids, False the text.
        enable_thinking=False writes the empty think block Qwen3's template writes."""
        unknown = sorted(set(kwargs) - {"return_tensors", "return_dict"})
        if unknown:
            raise TypeError(f"apply_chat_template() got unsupported keyword arguments {unknown}")
        if kwargs.get("return_tensors") or kwargs.get("return_dict"):
            raise ValueError("return_tensors and return_dict are not supported (no torch here)")
        batched = bool(conversation) and all(isinstance(c, (list, tuple)) for c in conversation)
        results = []
        for messages in (conversation if batched else [conversation]):
            with self._lock:
                text = self._engine.apply_chat_template(list(messages), add_generation_prompt,
                                                        enable_thinking)
            results.append(self.encode(text) if tokenize else text)
        return results if batched else results[0]
