#!/usr/bin/env bash
# `cmake --install BUILD --prefix PREFIX` (what the demo runs, into ~/.local): nanovllm-launch
# and nanovllm-mkmodel land in PREFIX/bin and start from there, found through PATH, with no
# library missing (the CUDA toolkit's lib/ travels in their run path).
set -euo pipefail
build=${1:?usage: install_test.sh BUILD_DIR}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
for tool in nanovllm-launch nanovllm-mkmodel; do
  [[ -x $prefix/bin/$tool ]] || { echo "FAIL: $prefix/bin/$tool not installed"; exit 1; }
  if ldd "$prefix/bin/$tool" | grep -F 'not found'; then
    echo "FAIL: $tool misses libraries once installed"; exit 1
  fi
  env -u LD_LIBRARY_PATH PATH="$prefix/bin:/usr/bin:/bin" "$tool" --help >/dev/null ||
    { echo "FAIL: $tool --help from PATH"; exit 1; }
done
echo "install: nanovllm-launch and nanovllm-mkmodel run from $prefix/bin"
