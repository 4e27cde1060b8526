#!/usr/bin/env bash
# scripts/compare_greedy.py on hand-made result files: identical lines count as identical; a
# divergence whose two tokens are each in the other run's top logprobs (native ids, a batch
# completion's token texts, a batch chat's content) counts as close by vLLM's rule, one whose
# token is missing from the other's top logprobs does not and is named; lines without logprobs
# are compared as they are and never judged.
set -euo pipefail
script="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/compare_greedy.py"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
native() {  # id ids... : a native line whose positions' top logprobs are the ids 1..5 and 9
  local id=$1
  shift
  python3 -c '
import json, sys
ids = [int(x) for x in sys.argv[2:]]
tops = [{str(t): {"logprob": -1.0, "rank": 1} for t in (1, 2, 3, 4, 5, 9)} for _ in ids]
print(json.dumps({"id": sys.argv[1], "index": 0, "token_ids": ids, "logprobs": tops}))' "$id" "$@"
}
completion() {  # custom_id tokens... : a batch completion with top logprobs {a, b, c}
  local id=$1
  shift
  python3 -c '
import json, sys
toks = sys.argv[2:]
lp = {"tokens": toks, "top_logprobs": [{"a": -1.0, "b": -2.0, "c": -3.0} for _ in toks]}
print(json.dumps({"custom_id": sys.argv[1], "response": {"body": {"choices": [
    {"index": 0, "text": "".join(toks), "logprobs": lp}]}}}))' "$id" "$@"
}
chat() {  # custom_id tokens... : a batch chat with top logprobs {a, b}
  local id=$1
  shift
  python3 -c '
import json, sys
content = [{"token": t, "logprob": -1.0, "top_logprobs": [{"token": "a", "logprob": -1.0},
           {"token": "b", "logprob": -2.0}]} for t in sys.argv[2:]]
print(json.dumps({"custom_id": sys.argv[1], "response": {"body": {"choices": [
    {"index": 0, "message": {"content": "".join(sys.argv[2:])}, "logprobs": {"content": content}}]}}}))' "$id" "$@"
}
plain() {  # id ids... : a native line without logprobs
  python3 -c 'import json, sys; print(json.dumps({"id": sys.argv[1], "index": 0,
    "token_ids": [int(x) for x in sys.argv[2:]]}))' "$@"
}
{
  native same 1 2 3
  native tie 1 2 3
  native far 1 2 3
  completion c a b
  chat h a a
  plain p 1 2
} >"$dir/base.jsonl"
{
  native same 1 2 3
  native tie 1 4 3   # 4 is in base's top logprobs, 2 in this run's
  native far 1 7 3   # 7 is in nobody's top logprobs
  completion c a c   # c in base's tops, b in this run's
  chat h a b
  plain p 1 3        # no logprobs: differs, not judged
} >"$dir/other.jsonl"
out=$(python3 "$script" "$dir/base.jsonl" "$dir/other.jsonl")
echo "$out"
want="other.jsonl vs base.jsonl: 1/6 identical; first divergences at tokens [1, 1, 1, 1, 1]; 4/6 close by vLLM's rule (4 judged)"
[[ $(tail -n 1 <<<"$out") == "$want" ]] || { echo "FAIL: expected '$want'"; exit 1; }
grep -q "('far', 0): diverges at token 1 without a near-tie" <<<"$out" ||
  { echo "FAIL: the divergence without a near-tie is not named"; exit 1; }
echo "compare_greedy: ok"
