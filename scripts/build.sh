#!/usr/bin/env bash
# Configures and builds into build/ (Release, Ninja; NANOVLLM_BUILD_DIR picks another folder).
# Extra arguments go to cmake's configure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
jobs=${NANOVLLM_JOBS:-$(nproc)}
build_dir=${NANOVLLM_BUILD_DIR:-build}
launcher=()
# ccache, where installed, lets several build folders share compiled objects.
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j "$jobs"
