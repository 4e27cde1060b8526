#!/usr/bin/env bash
# Configures and builds into build/ (Release, Ninja). Extra arguments go to cmake's configure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
jobs=${NANOVLLM_JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$jobs"
