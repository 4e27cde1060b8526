#!/usr/bin/env python3
"""PyTorch's flash attention on the prefill rows of attention_bench (issue 20's peer).

Usage: python3 scripts/time_sdpa_prefill.py [--json FILE]

Times torch.nn.functional.scaled_dot_product_attention under the FLASH_ATTENTION backend on the
shapes of `attention_bench --prefill` (bf16, head dim 128, 16 q / 8 kv heads): causal
self-attention of L = 1k..32k tokens (16384 / L sequences below 8k, so every shape fills the
GPU) and one chunk of C = 2k, 4k, 8k queries over a 32k cached prefix (chunked prefill). Shape
names and FLOPs (the attended keys only: query i of a chunk after `past` keys sees past + i + 1)
are the C++ bench's, so the rows line up with our kernels'. K/V are contiguous, not paged.
GQA: enable_gqa=True where the backend takes it, else K/V repeated per q head before timing
(not timed); the row says which. Causality: the lower-right causal bias (causal_lower_right), so
query i of a chunk sees keys <= past + i; plain is_causal=True would align it top-left when
q_len != k_len. Where flash refuses a shape, the row is timed with the backend that accepts it
and names it (read from the profiler's aten op names). CUDA events, 3 warm-up calls, median of
20. One table line and one "JSON " line per shape; --json FILE writes all rows, the torch
version and the device.
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right
from torch.profiler import ProfilerActivity, profile

HQ, HKV, DIM = 16, 8, 128
HEADS = f"{HQ}q/{HKV}kv d{DIM}"
CAUSAL_TARGET, CHUNKED_TARGET = 550, 450  # TFLOP/s: issue 20's targets for the Hopper kernel
FLASH_ONLY = [SDPBackend.FLASH_ATTENTION]
ANY_BACKEND = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def shapes():
    """(name, seqs, q_len, past, target) as bench/attention_bench_prefill.cuh lists them."""
    rows = []
    for n in (1024, 2048, 4096, 8192, 16384, 32768):
        seqs = 16384 // n if n < 8192 else 1
        rows.append((f"causal B={seqs} L={n} {HEADS}", seqs, n, 0, CAUSAL_TARGET))
    for c in (2048, 4096, 8192):
        rows.append((f"chunked C={c} past=32768 {HEADS}", 1, c, 32768, CHUNKED_TARGET))
    return rows


def causal_flops(seqs, q_len, past):
    # QK^T and PV over the keys each query attends: (past + 1) + ... + (past + q_len), exact int.
    return 4 * HQ * DIM * seqs * (q_len * past + q_len * (q_len + 1) // 2)


def backend_of(fn):
    """The SDPA backend one call of fn ran, from the aten op names the profiler records."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    names = " ".join(e.key for e in prof.key_averages())
    return next((b for b in ("flash", "efficient", "cudnn", "math") if b in names), "unknown")


def time_ms(fn, warmup=3, reps=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]  # the upper median, as kernel_bench_util.cuh takes it


def uniform_bf16(shape, amp):
    # Token-major [B, L, H, D] as the engine stores it, viewed [B, H, L, D] for SDPA; uniform in
    # [-amp, amp] as attention_bench fills its buffers (zeros would run faster than real data).
    return ((torch.rand(shape, device="cuda") * 2 - 1) * amp).bfloat16().transpose(1, 2)


def time_shape(name, seqs, q_len, past, target):
    k_len = past + q_len
    q = uniform_bf16((seqs, q_len, HQ, DIM), 2.0)  # [B, HQ, q_len, D]
    k = uniform_bf16((seqs, k_len, HKV, DIM), 1.0)  # [B, HKV, k_len, D]
    v = uniform_bf16((seqs, k_len, HKV, DIM), 1.0)  # [B, HKV, k_len, D]
    mask = causal_lower_right(q_len, k_len)  # query i sees keys <= k_len - q_len + i
    row = {"bench": "sdpa", "shape": name}
    for backends in (FLASH_ONLY, ANY_BACKEND):
        for gqa in ("enable_gqa", "expanded"):
            if gqa == "enable_gqa":
                kk, vv, kwargs = k, v, {"enable_gqa": True}
            else:  # [B, HQ, k_len, D] each, built here so that it is not timed
                kk, vv = (t.repeat_interleave(HQ // HKV, dim=1) for t in (k, v))
                kwargs = {}

            def fn():
                return F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, **kwargs)

            try:
                with sdpa_kernel(backends):
                    backend = backend_of(fn)
                    ms = time_ms(fn)
            except (RuntimeError, TypeError, ValueError) as e:
                which = "flash" if backends is FLASH_ONLY else "any backend"
                print(f"  {name}: {which} with {gqa} refused: {str(e).splitlines()[0][:160]}")
                continue
            flops = causal_flops(seqs, q_len, past)
            bytes_ = (2 * seqs * q_len * HQ + 2 * seqs * k_len * HKV) * DIM * 2  # as the C++ bench
            tflops = flops / (ms * 1e-3) / 1e12
            row.update(bench=f"sdpa_{backend}", us=round(ms * 1e3, 2), tflops=round(tflops, 3),
                       gbps=round(bytes_ / (ms * 1e-3) / 1e9, 1), ratio=round(tflops / target, 4),
                       ratio_of=f"tflops/{target}", backend=backend, gqa=gqa)
            print(f"{row['bench']:<22} {name:<44} {ms * 1e3:10.1f} {tflops:10.1f} "
                  f"{row['gbps']:10.0f} {row['ratio']:8.2f}  backend={backend} gqa={gqa}")
            print("JSON " + json.dumps(row, separators=(",", ":")))
            return row
    row["error"] = "flash unsupported, and no other backend accepted it"
    print(f"{'sdpa':<22} {name:<44} {row['error']}")
    print("JSON " + json.dumps(row, separators=(",", ":")))
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="FILE", help="write all rows, torch version, device")
    args = parser.parse_args()
    device = torch.cuda.get_device_name()
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), device {device}")
    print(f"\nsdpa prefill, bf16 {HEADS}, contiguous K/V, events median of 20 (ratio: TFLOP/s / "
          f"target; targets for hopper: causal 8k-32k >= {CAUSAL_TARGET}, chunked >= "
          f"{CHUNKED_TARGET}; causal part of the FLOPs only)")
    print(f"{'bench':<22} {'shape':<44} {'us':>10} {'TFLOP/s':>10} {'GB/s':>10} {'ratio':>8}")
    rows = [time_shape(*s) for s in shapes()]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "cuda": torch.version.cuda, "device": device,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
