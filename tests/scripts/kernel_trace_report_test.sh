#!/usr/bin/env bash
# scripts/kernel_trace_report.py on a hand-made dump (kernels/kernel_trace.h's v2 format, one
# record a block): two decode steps of three layers, every kernel's blocks starting before the
# previous kernel ends and waiting 0.5 us after it; the report must give each kernel of a layer
# its own "after" time, the layers' spans, the blocks that started beside the previous launch's
# on their SM, the step count, and one CSV line a launch.
set -euo pipefail
script="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/kernel_trace_report.py"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir/trace.bin" <<'PY'
import struct, sys
rec = struct.Struct("<QQQQIIII")  # start, key, wait, end, tag, block, sm, grid
sms = 4
by_sm = [[] for _ in range(sms)]
t = 1_000_000  # ns: when the previous launch's last block ended

def launch(tag, key, grid, after_ns, wait=True):
    """grid blocks that start 2 us before the previous launch's end, come back from their wait
    0.5 us after it and end after_ns later (the last block; the others 100 ns earlier)."""
    global t
    for b in range(grid):
        w = t + 500
        end = w + after_ns - (0 if b == grid - 1 else 100)
        by_sm[b % sms].append(rec.pack(t - 2000, key, w if wait else 0, end, tag, b, b % sms, grid))
    t = t + 500 + after_ns

for step in range(2):
    launch(13, 1, 2, 1000, wait=False)                       # embedding
    for layer in range(3):
        k = 0x1000 * (layer + 1)
        launch(3, k + 1, 8, 1200)      # q/k norm + rotary
        launch(4, k + 1, 16, 4000)     # decode attention (cluster)
        launch(1, k + 2, 16, 3000)     # o_proj
        launch(2, k + 3, 1, 1500)      # post-attention norm
        launch(1, k + 4, 24, 2000)     # gate_up
        launch(1, k + 5, 16, 6000)     # down
        launch(2, k + 6, 1, 1100)      # next input norm
        launch(1, k + 7, 16, 1700)     # qkv
    launch(1, 0xfff, 32, 80000)        # LM head
    t += 200_000                       # the host between steps
with open(sys.argv[1], "wb") as f:
    f.write(b"nanovllm-kernel-trace v2 sms=%d\n" % sms)
    f.write(struct.pack("<%dI" % sms, *[len(r) for r in by_sm]))
    for r in by_sm:
        f.write(b"".join(r))
PY
out=$(python3 "$script" "$dir/trace.bin" --launches "$dir/launches.csv")
echo "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -q "2 steps" <<<"$out" || fail "two steps"
grep -q "launches a step: {26: 2}" <<<"$out" || fail "26 launches a step"
# A layer's kernels (averaged over layers 0 and 1 of both steps): wait 0.50, after = its time,
# span = 0.5 + after, early = 2.00 before the previous end, and every block beside a block of
# the previous launch on its SM (block b runs on SM b % 4), but for layer 0's q/k norm + rotary:
# its blocks on SMs 2 and 3 had no embedding block there (4 of 8 beside; 8 in layer 1: 6.0).
row() { grep -E "^  layer \+$1 $2 " <<<"$out" || fail "no row layer +$1 $2"; }
[[ "$(row 1 decode_cluster)" =~ \ +4\ +16\ +2\.00\ +0\.50\ +4\.00\ +4\.50\ +16\.0$ ]] || fail "attention row"
[[ "$(row 5 skinny_gemm)" =~ \ +4\ +16\ +2\.00\ +0\.50\ +6\.00\ +6\.50\ +16\.0$ ]] || fail "down row"
[[ "$(row 3 rms_norm)" =~ \ +4\ +1\ +2\.00\ +0\.50\ +1\.50\ +2\.00\ +1\.0$ ]] || fail "norm row"
[[ "$(row 0 qk_norm_rope)" =~ \ +4\ +8\ +2\.00\ +0\.50\ +1\.20\ +1\.70\ +6\.0$ ]] || fail "rotary row (beside)"
grep -q "a layer's spans sum to 24.50 us (2 layers averaged)" <<<"$out" || fail "layer sum"
# The last layer and the LM head are the tail, one by one.
grep -qE "^  tail  8 skinny_gemm +2 +32 .* 80\.00 +80\.50 +32\.0$" <<<"$out" || fail "LM head in the tail"
[ "$(wc -l < "$dir/launches.csv")" -eq 53 ] || fail "one CSV line a launch (52) and a header"
# The blocks of step 1's first down projection (place 6): 16 blocks, each waiting 0.5 us after
# the previous launch's end and ending 6 us later, but the last, which ends 0.1 us after them.
blocks=$(python3 "$script" "$dir/trace.bin" --blocks 1:6)
echo "$blocks" | tail -5
grep -q "step 1 place 6 skinny_gemm: 16 blocks on 4 SMs" <<<"$blocks" || fail "--blocks header"
grep -qE "^    end - wait 5\.90 5\.90 5\.90 5\.90 6\.00$" <<<"$blocks" || fail "--blocks end - wait"
python3 "$script" "$dir/trace.bin" --blocks 1-6 2>/dev/null && fail "--blocks 1-6 was taken"
echo "kernel_trace_report_test: ok"
