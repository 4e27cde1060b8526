#!/usr/bin/env python3
"""Where a decode step's time goes, from the kernel timeline (kernels/kernel_trace.h).

Reads the dumps a build with -DNANOVLLM_KERNEL_TRACE=ON writes under NANOVLLM_KERNEL_TRACE_DIR
(trace_rank<R>_pid<P>_<N>.bin, one record a block, one dump per window of decode graph replays) and prints, per kernel of
a layer (counted from its q/k norm + rotary kernel; every layer but the last, averaged) and for
the steps' first and last kernels one by one:

  blocks  blocks of the launch
  early   how long before the previous launch's last block ended this one's first block started
          (programmatic dependent launch: it is resident and may stream constants)
  wait    from the previous launch's last block end to this one's first wait return (the kernel
          boundary as the graph pays it); '-' for kernels without a wait
  after   from its first wait return (else its first block start) to its last block end: the
          work that runs in sequence
  span    from the previous launch's last block end to this one's: its share of the step
  beside  blocks that started on an SM while a block of the previous launch still ran there
          (the rest waited for the SM: its shared memory, registers or carve-out were taken)

Kernels we do not stamp (cuBLAS) show up inside the next stamped kernel's span. --launches writes
one CSV line a launch; --blocks STEP:PLACE,... prints the spread of those launches' blocks.
Usage: kernel_trace_report.py DUMP.bin [DUMP.bin ...] [--launches CSV] [--blocks STEP:PLACES]
"""
import argparse
import array
import collections
import re
import statistics
import struct
import sys

TAGS = {1: "skinny_gemm", 2: "rms_norm", 3: "qk_norm_rope", 4: "decode_cluster",
        5: "decode_split", 6: "decode_merge", 7: "decode_whole", 8: "silu_mul",
        9: "peer_all_reduce", 10: "peer_all_reduce_norm", 11: "sampler", 12: "token_state",
        13: "embedding", 14: "process_logits", 15: "hopper_gemm", 16: "fused_mlp"}
ROPE = 3
RECORD = struct.Struct("<QQQQIIII")  # start, key, wait (0: none), end, tag, block, sm, grid
GAP_NS = 1500  # a new launch of the same kernel and key: no block of it for this long


def load(path):
    """The blocks' records (start, key, wait, end, tag, block, sm, grid) in start order, and the
    records that found their SM's buffer full."""
    with open(path, "rb") as f:
        header = f.readline().decode()
        m = re.match(r"nanovllm-kernel-trace v2 sms=(\d+)", header)
        if not m:
            sys.exit(f"{path}: not a kernel trace dump (header {header!r})")
        counts = array.array("I")
        counts.frombytes(f.read(4 * int(m[1])))
        r = list(RECORD.iter_unpack(f.read(RECORD.size * sum(counts))))
    r.sort(key=lambda t: t[0])
    return r


def launches_of(records):
    """Launches: the blocks of one kernel, key and grid, cut where none ran for GAP_NS."""
    by_kernel = collections.defaultdict(list)
    for rec in records:
        by_kernel[(rec[4], rec[1], rec[7])].append(rec)
    launches = []
    for (tag, key, grid), rs in by_kernel.items():
        cur = None
        for start, _, wait, end, _, _, sm, _ in rs:
            if cur is None or start > cur["last_end"] + GAP_NS:
                cur = {"tag": tag, "key": key, "grid": grid, "blocks": 0, "first_start": start,
                       "first_wait": None, "last_end": end, "spans": []}
                launches.append(cur)
            cur["blocks"] += 1
            cur["spans"].append((start, end, sm))
            cur["last_end"] = max(cur["last_end"], end)
            if wait:
                cur["first_wait"] = wait if cur["first_wait"] is None else min(cur["first_wait"], wait)
    launches.sort(key=lambda l: l["first_start"])
    return launches


def steps_of(launches):
    """Cuts the launches into steps: a step starts after a gap of more than 20 us with nothing."""
    steps, cur, end = [], [], None
    for l in launches:
        if cur and l["first_start"] > end + 20000:
            steps.append(cur)
            cur = []
        cur.append(l)
        end = l["last_end"] if end is None else max(end, l["last_end"])
    if cur:
        steps.append(cur)
    return steps


def measure(step):
    rows = []
    prev_end = None
    for l in step:
        row = {"name": TAGS.get(l["tag"], str(l["tag"])), "blocks": l["blocks"]}
        begin = l["first_wait"] if l["first_wait"] is not None else l["first_start"]
        row["after"] = (l["last_end"] - begin) / 1e3
        if prev_end is not None:
            ends = {}  # SM -> when the previous launch's last block there ended
            for _, end, sm in prev["spans"]:
                ends[sm] = max(ends.get(sm, 0), end)
            row["beside"] = sum(1 for start, _, sm in l["spans"] if start < ends.get(sm, 0))
            row["early"] = (prev_end - l["first_start"]) / 1e3
            row["wait"] = (l["first_wait"] - prev_end) / 1e3 if l["first_wait"] is not None else None
            row["span"] = (l["last_end"] - prev_end) / 1e3
        prev_end = l["last_end"] if prev_end is None else max(prev_end, l["last_end"])
        prev = l
        rows.append(row)
    return rows


def label_rows(rows):
    """(label, row): layers 0 .. L-2 by each kernel's place from the layer's q/k norm + rotary
    kernel (each layer's input norm and qkv projection come last); what comes before the first
    such kernel is the head, and the last layer with what follows it (the final norm, the LM
    head, sampling) the tail, one by one."""
    ropes = [i for i, r in enumerate(rows) if r["name"] == TAGS[ROPE]]
    out = []
    for i, r in enumerate(rows):
        if not ropes or i < ropes[0]:
            out.append((f"head {i:2d} {r['name']}", r))
        elif i >= ropes[-1]:
            out.append((f"tail {i - ropes[-1]:2d} {r['name']}", r))
        else:
            layer_start = max(p for p in ropes if p <= i)
            out.append((f"layer +{i - layer_start:d} {r['name']}", r))
    return out, len(ropes)


def fmt(v):
    return "    -" if v is None else f"{v:6.2f}"


def write_launches(steps, path):
    """One line a launch: step, place, kernel, key, grid, blocks, and its first start, first wait
    and last end in ns from its step's first start."""
    with open(path, "w") as f:
        f.write("step,place,kernel,key,grid,blocks,first_start,first_wait,last_end\n")
        for i, s in enumerate(steps):
            t0 = s[0]["first_start"]
            for j, l in enumerate(s):
                w = "" if l["first_wait"] is None else l["first_wait"] - t0
                f.write(f"{i},{j},{TAGS.get(l['tag'], l['tag'])},{l['key']:#x},{l['grid']},"
                        f"{l['blocks']},{l['first_start'] - t0},{w},{l['last_end'] - t0}\n")


def quantiles(values):
    """min / 10 % / median / 90 % / max of values, as text."""
    v = sorted(values)
    return " ".join(f"{v[int(f * (len(v) - 1))]:.2f}" for f in (0, 0.1, 0.5, 0.9, 1.0))


def print_blocks(records, steps, step, places):
    """The blocks of launches `places` of step `step`: when they started, came back from their
    wait and ended (us from the step's first start), and each one's end minus its wait."""
    s = steps[step]
    t0 = s[0]["first_start"]
    for p in places:
        l = s[p]
        rs = [x for x in records if x[4] == l["tag"] and x[1] == l["key"] and x[7] == l["grid"]
              and l["first_start"] <= x[0] <= l["last_end"]]
        print(f"  step {step} place {p} {TAGS.get(l['tag'], l['tag'])}: {len(rs)} blocks on "
              f"{len({x[6] for x in rs})} SMs; min / 10 % / median / 90 % / max (us)")
        print(f"    start      {quantiles((x[0] - t0) / 1e3 for x in rs)}")
        waits = [x for x in rs if x[2]]
        if waits:
            print(f"    wait       {quantiles((x[2] - t0) / 1e3 for x in waits)}")
            print(f"    end - wait {quantiles((x[3] - x[2]) / 1e3 for x in waits)}")
        print(f"    end        {quantiles((x[3] - t0) / 1e3 for x in rs)}")


def report(path, launches_csv=None, blocks=None):
    r = load(path)
    steps = steps_of(launches_of(r))
    if launches_csv:
        write_launches(steps, launches_csv)
    print(f"{path}: {len(r)} blocks, {len(steps)} steps")
    incomplete = sum(1 for s in steps for l in s if l["blocks"] != l["grid"])
    if incomplete:
        print(f"  {incomplete} launches lack blocks (their SM's buffer was full)")
    sizes = collections.Counter(len(s) for s in steps)
    common = sizes.most_common(1)[0][0]
    good = [s for s in steps if len(s) == common]
    print(f"  launches a step: {dict(sizes)}; {len(good)} steps of {common} are averaged")
    acc = collections.OrderedDict()
    layers = 0
    step_us = []
    for s in good:
        rows = measure(s)
        labelled, layers = label_rows(rows)
        step_us.append((max(l["last_end"] for l in s) - s[0]["first_start"]) / 1e3)
        for label, row in labelled:
            acc.setdefault(label, []).append(row)
    print(f"  step (first block start to last block end): {statistics.mean(step_us):.1f} us; layers {layers}")
    print(f"  {'kernel':34s} {'n':>4s} {'blocks':>6s} {'early':>6s} {'wait':>6s} {'after':>6s} "
          f"{'span':>6s} {'beside':>6s}")
    layer_sum = 0.0
    for label, rs in acc.items():
        def mean(k):
            vals = [x[k] for x in rs if x.get(k) is not None]
            return statistics.mean(vals) if vals else None
        span = mean("span")
        if label.startswith("layer") and span is not None:
            layer_sum += span
        beside = mean("beside")
        print(f"  {label:34s} {len(rs):4d} {mean('blocks'):6.0f} {fmt(mean('early'))} "
              f"{fmt(mean('wait'))} {fmt(mean('after'))} {fmt(span)} "
              f"{'     -' if beside is None else f'{beside:6.1f}'}")
    print(f"  a layer's spans sum to {layer_sum:.2f} us ({layers - 1} layers averaged)")
    if blocks:
        step, places = blocks
        print_blocks(r, steps, step, places)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dumps", nargs="+")
    ap.add_argument("--launches", help="also write every launch of the first dump to this CSV")
    ap.add_argument("--blocks", metavar="STEP:PLACE[,PLACE...]",
                    help="also the blocks of these launches (places as in the CSV)")
    args = ap.parse_args()
    blocks = None
    if args.blocks:
        step, _, places = args.blocks.partition(":")
        try:
            blocks = (int(step), [int(p) for p in places.split(",")])
        except ValueError:
            ap.error(f"--blocks {args.blocks}: expected STEP:PLACE[,PLACE...], e.g. 1:51,52")
    for i, path in enumerate(args.dumps):
        report(path, args.launches if i == 0 else None, blocks)


if __name__ == "__main__":
    main()
