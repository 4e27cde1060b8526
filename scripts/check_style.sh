#!/usr/bin/env bash
# Style gates that CI runs through ctest:
#   check_style.sh format          every tracked C++/CUDA file is as clang-format-14 writes it
#   check_style.sh naming BUILD    names follow .clang-tidy (clang-tidy-14 over BUILD's
#                                  compile_commands.json, C++ sources; CUDA files are
#                                  formatted but not parsed by clang-tidy)
# Prints each offence and exits 1 when there is one. `format --fix` rewrites the files.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=${1:?usage: check_style.sh format [--fix] | naming BUILD_DIR}

sources() { git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | grep -v '^tests/fixtures/'; }

case $mode in
  format)
    if [[ ${2:-} == --fix ]]; then
      sources | xargs clang-format-14 -i
      exit 0
    fi
    if ! sources | xargs clang-format-14 --dry-run -Werror 2>/tmp/nanovllm-format.$$; then
      grep -E '^[^ ].*(error|warning):' /tmp/nanovllm-format.$$ | cut -d: -f1 | sort -u |
        sed 's/^/not formatted: /'
      rm -f /tmp/nanovllm-format.$$
      echo "run: bash scripts/check_style.sh format --fix" >&2
      exit 1
    fi
    rm -f /tmp/nanovllm-format.$$
    echo "format: every file as clang-format-14 writes it"
    ;;
  naming)
    build=${2:?naming needs the build folder (compile_commands.json)}
    files=$(python3 - "$build/compile_commands.json" <<'PY'
import json, sys
print("\n".join(sorted({e["file"] for e in json.load(open(sys.argv[1]))
                        if e["file"].endswith(".cpp")})))
PY
)
    # shellcheck disable=SC2086
    if ! echo "$files" | xargs -P "$(nproc)" -n 8 clang-tidy-14 -p "$build" --quiet \
        >/tmp/nanovllm-tidy.$$ 2>&1; then
      grep -E 'error:' /tmp/nanovllm-tidy.$$ | sort -u
      rm -f /tmp/nanovllm-tidy.$$
      exit 1
    fi
    rm -f /tmp/nanovllm-tidy.$$
    echo "naming: $(echo "$files" | wc -l) sources follow .clang-tidy"
    ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
