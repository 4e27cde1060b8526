"""Ctrl-C during generate: a Python program running LLM(tensor_parallel_size=2) gets SIGINT
mid-run (alone, or with its workers as a terminal sends it); it must end with
KeyboardInterrupt within seconds, the LLM refusing further use, and leave no worker process
and no shared-memory segment behind."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, SMALL, all_gone, processes_with, segments, wait_until, worker_pids

SCRIPT = """
import sys
from nanovllm import LLM, SamplingParams
llm = LLM(sys.argv[1], tensor_parallel_size=2, **eval(sys.argv[2]))
print("generating", flush=True)
try:
    llm.generate(["Tell me a long story"] * 4,
                 SamplingParams(temperature=0, max_tokens=200, ignore_eos=True))
    print("finished", flush=True)
except KeyboardInterrupt:
    try:
        llm.generate(["again"], use_tqdm=False)
    except RuntimeError as e:
        print("afterwards:", e, flush=True)
    raise
"""


@pytest.mark.parametrize("target", ["process", "group"])
def test_ctrl_c_during_generate(tiny_model, shm_prefix, target):
    """SIGINT to the Python process alone (kill -INT), or to its whole process group as a
    terminal's Ctrl-C sends it: the workers get it too, and must not die of it first."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    child = subprocess.Popen([sys.executable, "-c", SCRIPT, tiny_model, repr(SMALL)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        assert child.stdout.readline().strip() == "generating", child.stderr.read()
        workers = worker_pids(shm_prefix, 1)
        time.sleep(0.5)  # into the decode steps
        assert child.poll() is None, "generate finished before the interrupt: make it longer"
        sent = time.monotonic()
        if target == "group":
            os.killpg(child.pid, signal.SIGINT)
        else:
            child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "finished" not in out
    assert "KeyboardInterrupt" in err and "WorkerDied" not in err, err
    assert child.returncode in (-signal.SIGINT, 130, 1), (child.returncode, err)
    assert took < 10
    assert "afterwards: the engine was shut down" in out, out
    assert all_gone(workers, shm_prefix, timeout=5), (
        f"left behind: workers {[p for p in workers if p in processes_with(shm_prefix)]}, "
        f"segments {segments(shm_prefix)}")


def test_no_segment_or_worker_when_interrupted_while_idle(tiny_model, shm_prefix):
    """SIGINT between calls (Python's own KeyboardInterrupt, no engine call running): exit
    through the interpreter's clean-up still stops the workers."""
    script = ("import sys, time\nfrom nanovllm import LLM\n"
              "llm = LLM(sys.argv[1], tensor_parallel_size=2, **eval(sys.argv[2]))\n"
              "print('ready', flush=True)\ntime.sleep(60)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    child = subprocess.Popen([sys.executable, "-c", script, tiny_model, repr(SMALL)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        workers = worker_pids(shm_prefix, 1)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "KeyboardInterrupt" in err
    assert all_gone(workers, shm_prefix, timeout=5)
    assert wait_until(lambda: not processes_with(shm_prefix), 1)
