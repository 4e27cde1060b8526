"""nanovllm-cpp's Python API: nano-vllm's `from nanovllm import LLM, SamplingParams`, over the
C++ engine (libnanovllm.so, loaded with ctypes when the first LLM is created).

    llm = LLM("/path/to/Qwen3-0.6B", enforce_eager=True, tensor_parallel_size=1)
    outputs = llm.generate(["Hello"], SamplingParams(temperature=0.6, max_tokens=256))
    print(outputs[0]["text"])
"""

from .errors import WorkerDiedError
from .llm import LLM
from .sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams", "WorkerDiedError"]
__version__ = "0.1.0"
