#!/usr/bin/env bash
# Builds the GPU test binaries and kernel benchmarks for Hopper (sm_90a) in build-bundle/ and
# copies them into bundle/ (git-ignored) for the GPU machine, which has the CUDA 13 runtime,
# cuBLAS and NCCL but none of our Debian -dev libraries. Any other shared library a binary
# needs is copied into bundle/lib. Fails if the bundle exceeds 64 MiB; prints its size.
# Usage: bash scripts/build_bundle.sh    then, on the GPU machine: bash scripts/run_gpu_checks.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
jobs=${NANOVLLM_JOBS:-$(nproc)}

# Every tests/<dir>/<name>_cuda_test.cpp is a GPU test target; benches are bench/*_bench.cu.
tests=$(find tests -name '*_cuda_test.cpp' -printf '%f\n' | sed 's/\.cpp$//' | sort)
benches=$(find bench -name '*_bench.cu' -printf '%f\n' | sed 's/\.cu$//' | sort)

cmake -S . -B build-bundle -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  >/dev/null
# shellcheck disable=SC2086
cmake --build build-bundle -j "$jobs" --target $tests $benches

rm -rf bundle
mkdir -p bundle/tests bundle/bench bundle/lib
for t in $tests; do cp "$(find build-bundle/tests -type f -name "$t" | head -1)" bundle/tests/; done
for b in $benches; do cp "build-bundle/bench/$b" bundle/bench/; done
strip --strip-debug bundle/tests/* bundle/bench/* 2>/dev/null || true

# Non-system, non-CUDA shared libraries (the GPU machine brings CUDA's own).
for f in bundle/tests/* bundle/bench/*; do
  ldd "$f" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$lib" in
      /lib/*|/lib64/*|/usr/lib64/*|*/libcuda*|*/libcublas*|*/libcudart*|*/libnccl*) ;;
      /usr/lib/x86_64-linux-gnu/libc.so*|/usr/lib/x86_64-linux-gnu/libm.so*) ;;
      *) cp -n "$lib" bundle/lib/ ;;
    esac
  done
done

size_kib=$(du -sk bundle | cut -f1)
echo "bundle: $(ls bundle/tests | wc -l) tests, $(ls bundle/bench | wc -l) benches," \
  "$(ls bundle/lib | wc -l) extra libs, $((size_kib / 1024)) MiB ($size_kib KiB)"
if [ "$size_kib" -gt $((64 * 1024)) ]; then
  echo "bundle is over 64 MiB" >&2
  exit 1
fi
