"""A worker process killed (kill -9) during generate: generate raises WorkerDiedError naming
rank 1 within seconds instead of hanging; the LLM is shut down (further use is a
RuntimeError) and its segment is gone."""

import faulthandler
import os
import signal
import threading
import time

import pytest

import nanovllm
from conftest import SMALL, all_gone, segments, worker_pids
from nanovllm import LLM, SamplingParams


@pytest.fixture(autouse=True)
def hang_guard():
    """A hang is the failure this file looks for: dump the stacks and exit rather than wait
    for ctest's timeout."""
    faulthandler.dump_traceback_later(120, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def test_killed_worker_raises_worker_died_naming_its_rank(tiny_model, shm_prefix):
    llm = LLM(tiny_model, tensor_parallel_size=2, **SMALL)
    (worker,) = worker_pids(shm_prefix, 1)
    assert segments(shm_prefix), "the run's segment should exist while the LLM lives"
    killer = threading.Timer(0.5, os.kill, (worker, signal.SIGKILL))
    killer.start()
    start = time.monotonic()
    try:
        with pytest.raises(nanovllm.WorkerDiedError) as e:
            llm.generate(["Tell me a long story"] * 4,
                         SamplingParams(temperature=0, max_tokens=200, ignore_eos=True),
                         use_tqdm=False)
    finally:
        killer.cancel()
    took = time.monotonic() - start
    assert killer.finished.is_set()
    assert "rank 1" in str(e.value), str(e.value)
    assert isinstance(e.value, RuntimeError)
    assert took < 10, f"noticed after {took:.1f} s"
    with pytest.raises(RuntimeError, match="the engine was shut down") as again:
        llm.generate(["x"], use_tqdm=False)
    assert not isinstance(again.value, nanovllm.WorkerDiedError)
    assert all_gone([worker], shm_prefix, timeout=5), segments(shm_prefix)
    del llm


def test_worker_killed_between_calls(tiny_model, shm_prefix):
    with LLM(tiny_model, tensor_parallel_size=2, **SMALL) as llm:
        (worker,) = worker_pids(shm_prefix, 1)
        os.kill(worker, signal.SIGKILL)
        with pytest.raises(nanovllm.WorkerDiedError, match="rank 1"):
            llm.generate([[1, 2, 3]], SamplingParams(max_tokens=4), use_tqdm=False)
    assert all_gone([worker], shm_prefix, timeout=5)
