"""The package as pip installs it (what scripts/install_python.sh does after building): a
virtual environment over Debian's setuptools, installed offline with --no-build-isolation,
the library and the worker carried inside the package. From anywhere, with none of the test
environment's variables, it finds its own copies and runs tensor_parallel_size=2."""

import os
import shutil
import subprocess
import sys

from conftest import REPO, SMALL, all_gone, program


def test_pip_install_offline_into_a_venv(tmp_path, tiny_model, shm_prefix):
    source = tmp_path / "python"
    shutil.copytree(REPO / "python", source,
                    ignore=shutil.ignore_patterns("_lib", "build", "*.egg-info", "__pycache__"))
    lib_dir = source / "nanovllm" / "_lib"
    lib_dir.mkdir()
    shutil.copy2(program("NANOVLLM_LIB"), lib_dir / "libnanovllm.so")
    shutil.copy2(program("NANOVLLM_WORKER"), lib_dir / "nanovllm-worker")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, capture_output=True)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install",
                          "--no-build-isolation", "--no-index", "--no-deps",
                          "--disable-pip-version-check", str(source)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr

    env = {k: v for k, v in os.environ.items()
           if k not in ("NANOVLLM_LIB", "NANOVLLM_WORKER", "PYTHONPATH")}
    script = ("import sys, nanovllm._native as n\n"
              "from nanovllm import LLM, SamplingParams\n"
              "print(n.find_library())\n"
              "with LLM(sys.argv[1], tensor_parallel_size=2, **eval(sys.argv[2])) as llm:\n"
              "    out = llm.generate([[1, 2, 3]], SamplingParams(max_tokens=3), use_tqdm=False)\n"
              "print(len(out[0]['token_ids']))\n")
    run = subprocess.run([str(venv / "bin" / "python"), "-c", script, tiny_model, repr(SMALL)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    library, tokens = run.stdout.split()
    assert library.startswith(str(venv)) and library.endswith("nanovllm/_lib/libnanovllm.so")
    assert tokens == "3"
    assert all_gone([], shm_prefix)
