#!/usr/bin/env bash
# The naming checker itself (scripts/check_style.sh naming), on a scratch tree with the
# project's .clang-tidy and a hand-written compile_commands.json (8 sources): a clean tree
# passes and its second run comes from the cache; a badly named function planted in a header
# two includes deep fails the source that includes it although the source is unchanged (the
# cached pass is invalidated), as does one planted in a source, while the sources checked in
# the same clang-tidy batch still count as passed; a second clone on the same machine reuses
# the shared cache; NANOVLLM_NAMING_CACHE=off checks again.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
export XDG_CACHE_HOME=$tree/cache
unset NANOVLLM_NAMING_CACHE

make_clone() {  # make_clone DIR: the checker, .clang-tidy and two sources
  local root=$1
  mkdir -p "$root/scripts" "$root/engine" "$root/build"
  cp "$repo/scripts/check_style.sh" "$root/scripts/"
  cp "$repo/.clang-tidy" "$root/"
  printf '#pragma once\nnamespace nanovllm {\nint inner_value();\n}  // namespace nanovllm\n' \
    >"$root/engine/inner.h"
  printf '#pragma once\n#include "engine/inner.h"\nnamespace nanovllm {\nint outer_value();\n}  // namespace nanovllm\n' \
    >"$root/engine/outer.h"
  printf '#include "engine/outer.h"\nnamespace nanovllm {\nint outer_value() { return 1; }\n}  // namespace nanovllm\n' \
    >"$root/engine/uses_header.cpp"
  printf 'namespace nanovllm {\nint plain_value() { return 2; }\n}  // namespace nanovllm\n' \
    >"$root/engine/plain.cpp"
  for i in 1 2 3 4 5 6; do
    printf 'namespace nanovllm {\nint extra_value_%s() { return %s; }\n}  // namespace nanovllm\n' "$i" "$i" \
      >"$root/engine/extra_$i.cpp"
  done
  python3 - "$root" <<'PY'
import json, sys
root = sys.argv[1]
json.dump([{"directory": f"{root}/build", "file": f"{root}/engine/{name}",
            "command": f"/usr/bin/c++ -I{root} -std=c++20 -o {name}.o -c {root}/engine/{name}"}
           for name in ["plain.cpp", "uses_header.cpp"] + [f"extra_{i}.cpp" for i in range(1, 7)]],
          open(f"{root}/build/compile_commands.json", "w"))
PY
}

expect() {  # expect pass|fail 'text in the output' DIR [env...]
  local want=$1 text=$2 root=$3 out rc=0
  shift 3
  out=$(env "$@" bash "$root/scripts/check_style.sh" naming "$root/build" 2>&1) || rc=$?
  if [[ $want == pass && $rc -ne 0 ]] || [[ $want == fail && $rc -eq 0 ]]; then
    echo "FAIL: expected $want (exit $rc) with '$text':"; echo "$out"; exit 1
  fi
  grep -qF -- "$text" <<<"$out" || { echo "FAIL: missing '$text' in:"; echo "$out"; exit 1; }
}

a=$tree/a
make_clone "$a"
expect pass '8 sources follow .clang-tidy (0 from the cache, 8 checked' "$a"
expect pass '8 sources follow .clang-tidy (8 from the cache, 0 checked' "$a"

# A header the source includes through another header changes: that source is checked again.
cp "$a/engine/inner.h" "$tree/inner.h.good"
printf '#pragma once\nnamespace nanovllm {\nint inner_value();\nint BadlyNamed();\n}  // namespace nanovllm\n' \
  >"$a/engine/inner.h"
expect fail "inner.h:4:5: error: invalid case style for function 'BadlyNamed'" "$a"
expect fail '(7 from the cache, 1 checked' "$a"
cp "$tree/inner.h.good" "$a/engine/inner.h"
expect pass '(8 from the cache, 0 checked' "$a"

# A badly named function in a source, every source checked (no cache): the failing one's
# batch mates are remembered, so once it is fixed only it runs again.
cp "$a/engine/plain.cpp" "$tree/plain.cpp.good"
printf 'namespace nanovllm {\nint plain_value() { return 2; }\nint AlsoBad() { return 3; }\n}  // namespace nanovllm\n' \
  >"$a/engine/plain.cpp"
rm -rf "$a/build/naming-cache" "$XDG_CACHE_HOME"
expect fail "plain.cpp:3:5: error: invalid case style for function 'AlsoBad'" "$a"
expect fail '(0 from the cache, 8 checked' "$a" NANOVLLM_NAMING_CACHE=off
cp "$tree/plain.cpp.good" "$a/engine/plain.cpp"
expect pass '(7 from the cache, 1 checked' "$a"

# Another clone on the same machine: the shared cache answers; turned off, every source runs.
b=$tree/b
make_clone "$b"
expect pass '(8 from the cache, 0 checked' "$b"
expect pass '(0 from the cache, 8 checked' "$b" NANOVLLM_NAMING_CACHE=off
echo "check_naming: offences caught, cached passes invalidated by an included header"
