"""The workers live exactly as long as their LLM: a `with` block's end, `del llm`, shutdown()
and the interpreter's exit each stop them and remove the segment."""

import gc
import os
import subprocess
import sys

import pytest

from conftest import REPO, SMALL, all_gone, segments, worker_pids
from nanovllm import LLM, SamplingParams


def test_with_block_stops_the_worker(tiny_model, shm_prefix):
    with LLM(tiny_model, tensor_parallel_size=2, **SMALL) as llm:
        (worker,) = worker_pids(shm_prefix, 1)
        assert len(llm.generate([[1, 2, 3]], SamplingParams(max_tokens=4), use_tqdm=False)) == 1
        assert segments(shm_prefix)
    assert all_gone([worker], shm_prefix, timeout=5)
    with pytest.raises(RuntimeError, match="the engine was shut down .*with block"):
        llm.generate(["x"], use_tqdm=False)
    with pytest.raises(RuntimeError, match="the engine was shut down"):
        llm.get_tokenizer().encode("x")


def test_del_stops_the_worker(tiny_model, shm_prefix):
    llm = LLM(tiny_model, tensor_parallel_size=2, **SMALL)
    (worker,) = worker_pids(shm_prefix, 1)
    del llm
    gc.collect()
    assert all_gone([worker], shm_prefix, timeout=5)


def test_shutdown_is_idempotent(tiny_model, shm_prefix):
    llm = LLM(tiny_model, tensor_parallel_size=2, **SMALL)
    (worker,) = worker_pids(shm_prefix, 1)
    llm.shutdown()
    llm.shutdown()
    assert all_gone([worker], shm_prefix, timeout=5)


def test_interpreter_exit_stops_the_worker(tiny_model, shm_prefix):
    script = ("import sys\nfrom nanovllm import LLM\n"
              "llm = LLM(sys.argv[1], tensor_parallel_size=2, **eval(sys.argv[2]))\n"
              "print(llm.get_tokenizer().encode('hi'), flush=True)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    run = subprocess.run([sys.executable, "-c", script, tiny_model, repr(SMALL)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert all_gone([], shm_prefix, timeout=5), segments(shm_prefix)
