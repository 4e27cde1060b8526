#!/usr/bin/env bash
# The include checker itself: a planted crossing in a scratch tree is found, named by file and
# line, and fails the check; the same tree without it passes.
set -euo pipefail
checker="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/check_includes.sh"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/engine" "$tree/rank" "$tree/kernels"
printf '#include "engine/sequence.h"\n#include "ipc/step_command.h"\n#include "kernels/check.h"\n' >"$tree/engine/ok.cpp"
printf '#include <vector>\n#include "layers/qwen3_model.h"\n' >"$tree/rank/ok.cpp"
bash "$checker" "$tree" >/dev/null || { echo "FAIL: a clean tree was refused"; exit 1; }
printf '#include "kernels/check.h"\n#include "rank/model_runner.h"\n' >"$tree/engine/bad.cpp"
printf '#include "kernels/tensor.h"\n' >"$tree/engine/bad_kernel.cpp"
printf '#include "engine/sequence.h"\n' >"$tree/kernels/bad.cu"
if out=$(bash "$checker" "$tree" 2>&1); then echo "FAIL: crossings not caught"; exit 1; fi
for expected in 'engine/bad.cpp:2: engine/ may not include "rank/model_runner.h"' \
                'engine/bad_kernel.cpp:1: engine/ may not include "kernels/tensor.h"' \
                'kernels/bad.cu:1: kernels/ may not include "engine/sequence.h"' \
                'include rules: 3 crossing(s)'; do
  grep -qF "$expected" <<<"$out" || { echo "FAIL: missing '$expected' in:"; echo "$out"; exit 1; }
done
echo "check_includes: crossings caught"
