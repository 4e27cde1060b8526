#!/usr/bin/env bash
# The include rules of the source folders (README's layout table): every `#include "dir/..."`
# of a project header must name a folder the including folder may use. Prints each crossing
# as file:line and exits 1 when there is one. Run by ctest (include_rules).
# Usage: check_includes.sh [ROOT]   (default: this checkout)
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}"

# folder -> what its files may include (a folder, or one exact header).
declare -A allowed=(
  [kernels]="kernels/"
  [layers]="layers/ kernels/"
  [ipc]="ipc/ kernels/"
  [engine]="engine/ ipc/ kernels/check.h"
  [rank]="rank/ layers/ kernels/ ipc/"
  [launcher]="launcher/ engine/ rank/ ipc/ layers/ kernels/"
)
project_dirs="kernels|layers|ipc|engine|rank|launcher|bench|tests"

crossings=0
for folder in "${!allowed[@]}"; do
  [[ -d $folder ]] || continue
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    header=$(sed -E 's/.*#include[[:space:]]+"([^"]+)".*/\1/' <<<"${rest#*:}")
    [[ $header =~ ^($project_dirs)/ ]] || continue  # system and library headers
    ok=0
    for rule in ${allowed[$folder]}; do
      if [[ $rule == */ && $header == "$rule"* ]] || [[ $header == "$rule" ]]; then ok=1; fi
    done
    if ((!ok)); then
      echo "$file:$line: $folder/ may not include \"$header\" (allowed: ${allowed[$folder]})"
      crossings=$((crossings + 1))
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$folder" \
             --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' || true)
done
if ((crossings)); then
  echo "include rules: $crossings crossing(s)" >&2
  exit 1
fi
echo "include rules: no crossing in ${!allowed[*]}"
