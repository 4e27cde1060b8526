#!/usr/bin/env bash
# scripts/compare_request_fields.py on hand-made result files: equal runs exit 0 with "N/N
# identical"; a completion of a fork (index 1 of an n = 2 request) with other tokens, or a line
# missing from the second run, exits 1 and the differing one is named.
set -euo pipefail
script="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/compare_request_fields.py"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
line() {  # id index ids... : a native result line
  python3 -c 'import json, sys; print(json.dumps({"id": sys.argv[1], "index": int(sys.argv[2]),
    "token_ids": [int(x) for x in sys.argv[3:]], "text": "t", "finish_reason": "length",
    "stop_reason": None}))' "$@"
}
batch='{"custom_id": "b", "response": {"body": {"choices": [{"index": 0, "finish_reason": "stop", "stop_reason": "\n", "text": "x"}]}}}'
{ line n2 0 1 2; line n2 1 1 2; echo "$batch"; } >"$dir/a.jsonl"
out=$(python3 "$script" "$dir/a.jsonl" "$dir/a.jsonl" cuda cpu)
[[ $out == "cuda vs cpu request fields: 3/3 identical (3 in cpu)" ]] ||
  { echo "FAIL: equal runs: '$out'"; exit 1; }
{ line n2 0 1 2; line n2 1 1 3; } >"$dir/b.jsonl"
rc=0
out=$(python3 "$script" "$dir/a.jsonl" "$dir/b.jsonl" cuda cpu) || rc=$?
echo "$out"
[[ $rc -eq 1 ]] || { echo "FAIL: exit $rc for differing runs"; exit 1; }
grep -q "^('n2', 1): cuda " <<<"$out" || { echo "FAIL: the fork that differs is not named"; exit 1; }
grep -q "^('b', 0): cuda .* cpu None" <<<"$out" || { echo "FAIL: the missing line is not named"; exit 1; }
[[ $(tail -n 1 <<<"$out") == "cuda vs cpu request fields: 1/3 identical (2 in cpu)" ]] ||
  { echo "FAIL: verdict '$(tail -n 1 <<<"$out")'"; exit 1; }
echo "compare_request_fields: ok"
