#!/usr/bin/env bash
# scripts/run_tests.sh's closing lines, on a scratch ctest project: after ctest's summary it
# names why the tests that did not run were skipped (GTEST_SKIP()'s message, with the label;
# else ctest's reason), then closes on the plain count "N passed, N failed, N skipped", and
# the exit status stays ctest's (0, then 8 with a failing test).
set -euo pipefail
runner="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/run_tests.sh"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
cat >"$tree/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(skips NONE)
enable_testing()
foreach(t 1 2)  # what gtest prints for GTEST_SKIP() << "no CUDA device"
  add_test(NAME gpu_${t} COMMAND printf "[ RUN      ] Gpu.T${t}\n/x/t.cpp:3: Skipped\nno CUDA device\n\n[  SKIPPED ] Gpu.T${t} (0 ms)\n")
  set_tests_properties(gpu_${t} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]" LABELS gpu)
endforeach()
add_test(NAME coded COMMAND sh -c "exit 77")
set_tests_properties(coded PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME passes COMMAND true)
add_test(NAME fails COMMAND false)
EOF
cmake -S "$tree" -B "$tree/build" >/dev/null

run() {  # run EXPECTED_EXIT [ctest args...]: the output's last two lines
  local want=$1 rc=0 out
  shift
  out=$(NANOVLLM_SKIP_BUILD=1 NANOVLLM_BUILD_DIR="$tree/build" bash "$runner" "$@" 2>&1) || rc=$?
  [[ $rc -eq $want ]] || { echo "FAIL: exit $rc, expected ctest's $want:"; echo "$out"; exit 1; }
  tail -n 2 <<<"$out"
}
reasons='run_tests: 3 tests did not run: 2 no CUDA device (label gpu); 1 SKIP_RETURN_CODE=77 (no label)'
last=$(run 0 -E fails)
expected="$reasons"$'\n''run_tests: 1 passed, 0 failed, 3 skipped'
[[ $last == "$expected" ]] || { echo "FAIL: last lines '$last', expected '$expected'"; exit 1; }
last=$(run 8)
expected="$reasons"$'\n''run_tests: 1 passed, 1 failed, 3 skipped'
[[ $last == "$expected" ]] || { echo "FAIL: with a failure, last lines '$last'"; exit 1; }
last=$(run 0 -R passes)
[[ $last == *"Total Test time"*$'\n''run_tests: 1 passed, 0 failed, 0 skipped' ]] ||
  { echo "FAIL: a reason line printed although nothing was skipped: '$last'"; exit 1; }
echo "run_tests: skip reasons named, ctest's exit status kept"
