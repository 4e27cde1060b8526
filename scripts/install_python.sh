#!/usr/bin/env bash
# Installs the Python package `nanovllm` (distribution nanovllm-cpp) into a virtual
# environment, offline: builds libnanovllm.so and nanovllm-worker, copies them into
# python/nanovllm/_lib/ (the package carries them), and pip-installs python/ with Debian's
# setuptools (--no-build-isolation: nothing is downloaded).
#
# Usage: scripts/install_python.sh [VENV]   (default: .venv in the checkout)
#   PYTHON=python3.12 picks the interpreter the environment is made from (default python3 of
#   Debian, /usr/bin/python3); NANOVLLM_BUILD_DIR the build folder (default build/, configured
#   by scripts/build.sh). An existing VENV is reused.
# Needs scripts/setup.sh's packages (python3-venv, python3-setuptools, python3-wheel).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-$root/.venv}
python=${PYTHON:-/usr/bin/python3}
build=${NANOVLLM_BUILD_DIR:-$root/build}

if [[ ! -f $build/CMakeCache.txt ]]; then
  echo "install_python: $build is not a configured build folder; run scripts/build.sh first" >&2
  exit 1
fi
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
cmake --build "$build" -j "${NANOVLLM_JOBS:-$(nproc)}" --target nanovllm_c_api nanovllm-worker

lib_dir=$root/python/nanovllm/_lib
rm -rf "$lib_dir"
mkdir -p "$lib_dir"
cp "$build/launcher/libnanovllm.so" "$build/launcher/nanovllm-worker" "$lib_dir/"

# --system-site-packages: the environment sees Debian's setuptools and wheel, which pip's
# build then uses instead of fetching its own.
if [[ ! -x $venv/bin/python ]]; then
  "$python" -m venv --system-site-packages "$venv"
fi
# A fresh build folder each time, so files removed from the package do not linger in it.
rm -rf "$root/python/build"
"$venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps --quiet \
  --disable-pip-version-check "$root/python"
# The package holds its copies now; the checkout's would shadow build/launcher/ for scripts
# run from the checkout (PYTHONPATH=python) and go stale at the next build.
rm -rf "$root/python/build" "$root"/python/*.egg-info "$lib_dir"

# The installed package must load its own copy of the library, not the checkout's.
(cd / && env -u NANOVLLM_LIB -u PYTHONPATH "$venv/bin/python" -c '
import nanovllm, nanovllm._native as n
path = n.find_library()
assert path.startswith(n._PACKAGE_DIR), path
n.library()
print(f"install_python: nanovllm {nanovllm.__version__} in {n._PACKAGE_DIR} (library {path})")
')
