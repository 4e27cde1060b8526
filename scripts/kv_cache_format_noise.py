#!/usr/bin/python3
"""How much each 8-bit KV cache format moves a random-weight Qwen3's logprobs (issue 34).

Usage: scripts/kv_cache_format_noise.py [--transformers] MODEL_DIR TOKENS SEED FORMAT...

MODEL_DIR: a folder from nanovllm-mkmodel (model.safetensors, bf16). One random-token prompt of
TOKENS tokens (SEED picks it) goes through a Qwen3 forward all in FP32 with an unquantized cache
(the reference), and then once per FORMAT in BF16 with the cache's K and V stored in FORMAT.
Two forwards to choose from:
  (default)       NumPy on the CPU (Debian's python3-numpy; run it with /usr/bin/python3): the
                  engine's roundings (every linear, norm, rope, softmax weight and the residual
                  stream rounded to bf16); no weights held as f32 beyond a 4 GB model.
  --transformers  transformers on the GPU machine (FP32 and BF16 models, sdpa): the BF16
                  model's K and V pass through FORMAT on their way into attention (wrap_sdpa;
                  scripts/check_fp8_kv_vs_transformers.py uses it too).
Prints, per FORMAT, the mean |logprob deviation| of the prompt's next token at 300 sampled
positions against the reference, its ratio to the first FORMAT's, and top-1 agreement. A FORMAT
is K/V or one name for both:
  bf16       the bf16 cache (the peer)
  e4m3       ours: OCP E4M3 with a power-of-two exponent per cached row (kernels/fp8.h)
  e4m3x      E4M3 with an exact per-row scale (max |x| = 448)
  e4m3best   E4M3 with the per-row scale among 8 in a binade that gives the least squared error
  hadamard-F F after an orthonormal Hadamard rotation of each row (undone on reading)
  smooth-F   F after subtracting the prompt's per-channel mean (softmax and sum(p) = 1 make
             it exact for K and V)
  e3m4       8-bit float with 3 exponent and 4 mantissa bits, power-of-two row exponent
  int8       int8 with a per-row scale of max |x| / 127, rounded up to 1/8 of a binade
  int8q4     the same, rounded up to 1/4 of a binade
  int8pow2   the same, rounded up to a power of two (max |x| in (63.5, 127])
The GPU check (scripts/check_fp8_kv_vs_transformers.py) measures the engine itself; this
script asks which format could meet the issue's bar (fp8's deviation at most 1.5x bf16's).
"""
import glob
import json
import os
import struct
import sys
import time

import numpy as np

SAMPLED = 300


def load(model_dir):
    cfg = json.load(open(f"{model_dir}/config.json"))
    files = sorted(glob.glob(f"{model_dir}/*.safetensors"))
    where = {}
    for path in files:
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        where.update({k: (raw, 8 + n, v) for k, v in header.items() if k != "__metadata__"})
    keep = sum(os.path.getsize(p) for p in files) < 4 << 30
    cache = {}

    def weight(name):  # bf16 tensor -> f32
        if name in cache:
            return cache[name]
        raw, base, meta = where[name]
        a, b = meta["data_offsets"]
        u16 = np.frombuffer(raw[base + a: base + b], dtype=np.uint16)
        w = (u16.astype(np.uint32) << 16).view(np.float32).reshape(meta["shape"])
        if keep:
            cache[name] = w
        return w
    return cfg, weight


def bf16(x):  # round to nearest even
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000).view(np.float32)


def float_grid(a, mantissa_bits, min_exponent):
    """a on a float grid: normals down to 2^min_exponent, subnormals below, ties to even."""
    e = np.maximum(np.floor(np.log2(np.maximum(np.abs(a), 1e-38))), min_exponent)
    step = np.exp2(e - mantissa_bits)
    return np.round(a / step) * step


def row_pow2(x, top):
    """Per row, the least power of two s with max |x| / s <= top."""
    m, e = np.frexp(np.maximum(np.abs(x).max(-1, keepdims=True), 1e-30))
    tm, te = np.frexp(top)
    return np.exp2(np.where(m <= tm, e - te, e - te + 1).astype(np.float32))


def e4m3(a):
    return np.clip(float_grid(a, 3, -6), -448.0, 448.0)


def hadamard(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return (h / np.sqrt(n)).astype(np.float32)


def stored(x, fmt):
    """x: [T, Hkv, D] f32 (bf16 values); what the cache gives back after storing x as fmt."""
    if fmt == "bf16":
        return x
    if fmt.startswith("hadamard-"):
        h = hadamard(x.shape[-1])
        return stored(x @ h, fmt[len("hadamard-"):]) @ h.T
    if fmt.startswith("smooth-"):
        mean = x.mean(0, keepdims=True)
        return stored(x - mean, fmt[len("smooth-"):]) + mean
    if fmt == "e4m3":
        s = row_pow2(x, 448.0)
        return e4m3(x / s) * s
    if fmt == "e4m3x":
        s = np.maximum(np.abs(x).max(-1, keepdims=True), 1e-30) / 448.0
        return e4m3(x / s) * s
    if fmt == "e4m3best":
        best, err = None, None
        for j in range(8):  # larger scales only: max |x| / s stays within 448
            s = row_pow2(x, 448.0) * np.float32(2.0 ** (j / 8))
            y = e4m3(x / s) * s
            e = ((y - x) ** 2).sum(-1, keepdims=True)
            best, err = (y, e) if best is None else (np.where(e < err, y, best),
                                                     np.minimum(e, err))
        return best
    if fmt == "e3m4":  # largest value 15.5 = 1.9375 * 2^3, normals down to 2^-3
        s = row_pow2(x, 15.5)
        return np.clip(float_grid(x / s, 4, -3), -15.5, 15.5) * s
    if fmt in ("int8", "int8q4", "int8pow2"):
        steps = {"int8": 8, "int8q4": 4, "int8pow2": 1}[fmt]  # scale steps in a binade
        m = np.maximum(np.abs(x).max(-1, keepdims=True), 1e-30) / 127.0
        s = np.exp2(np.ceil(np.log2(m) * steps) / steps)
        return np.clip(np.round(x / s), -127, 127) * s
    raise SystemExit(f"unknown format {fmt!r}")


class Qwen3:
    def __init__(self, model_dir, tokens):
        self.cfg, self.w = load(model_dir)
        c = self.cfg
        self.h, self.hkv, self.d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        inv = c["rope_theta"] ** (-np.arange(0, self.d, 2, dtype=np.float64) / self.d)
        angle = np.arange(tokens)[:, None] * inv[None]
        self.cos, self.sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
        self.mask = np.triu(np.full((tokens, tokens), -np.inf, np.float32), 1)

    def norm(self, x, name):
        eps = self.cfg["rms_norm_eps"]
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * self.w(name)

    def rope(self, x):  # [T, heads, D], rotate-half pairs (i, i + D/2)
        half = self.d // 2
        c, s = self.cos[:, None], self.sin[:, None]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)

    def logprobs(self, ids, rows, k_fmt, v_fmt, low_precision):
        """Logprob of ids[r + 1] at each row r."""
        r = bf16 if low_precision else (lambda x: x)
        w, t, d = self.w, len(ids), self.d
        x = w("model.embed_tokens.weight")[ids].copy()
        for layer in range(self.cfg["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            h = r(self.norm(x, p + "input_layernorm.weight"))
            q = r(h @ w(p + "self_attn.q_proj.weight").T).reshape(t, self.h, d)
            k = r(h @ w(p + "self_attn.k_proj.weight").T).reshape(t, self.hkv, d)
            v = r(h @ w(p + "self_attn.v_proj.weight").T).reshape(t, self.hkv, d)
            q = r(self.rope(r(self.norm(q, p + "self_attn.q_norm.weight"))))
            k = stored(r(self.rope(r(self.norm(k, p + "self_attn.k_norm.weight")))), k_fmt)
            v = stored(v, v_fmt)
            o = np.empty((t, self.h, d), np.float32)
            for head in range(self.h):
                kv = head // (self.h // self.hkv)
                s = q[:, head] @ k[:, kv].T / np.sqrt(d) + self.mask
                e = np.exp(s - s.max(-1, keepdims=True))
                o[:, head] = r(e / e.sum(-1, keepdims=True)) @ v[:, kv]
            x = r(x + r(r(o.reshape(t, -1)) @ w(p + "self_attn.o_proj.weight").T))
            h = r(self.norm(x, p + "post_attention_layernorm.weight"))
            gate = r(h @ w(p + "mlp.gate_proj.weight").T)
            up = r(h @ w(p + "mlp.up_proj.weight").T)
            x = r(x + r(r(gate / (1 + np.exp(-gate)) * up) @ w(p + "mlp.down_proj.weight").T))
        head = ("model.embed_tokens.weight" if self.cfg.get("tie_word_embeddings")
                else "lm_head.weight")
        logits = r(self.norm(x[rows], "model.norm.weight")) @ w(head).T
        logits = logits - logits.max(-1, keepdims=True)
        lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return lp[np.arange(len(rows)), ids[rows + 1]], lp.argmax(-1)


def stored_torch(x, fmt):
    """stored() for a torch tensor [..., D] (rows on the last axis): bf16, e4m3 and int8q4 on
    its device (torch's float8_e4m3fn rounds to nearest even; the row exponent keeps every
    value within 448), any other format through NumPy with the second-to-last axis as tokens."""
    import torch
    if fmt == "bf16":
        return x
    if fmt == "e4m3":
        f = x.float()
        mant, e = torch.frexp(f.abs().amax(-1, keepdim=True).clamp_min(1e-30))
        s = torch.exp2(torch.where(mant <= 0.875, e - 9, e - 8).float())  # kernels/fp8.h's rule
        return ((f / s).to(torch.float8_e4m3fn).float() * s).to(x.dtype)
    if fmt == "int8q4":  # kernels/int8_kv.h's format (--kv-cache-dtype int8)
        f = x.float()
        m = f.abs().amax(-1, keepdim=True).clamp_min(1e-30) / 127.0
        s = torch.exp2(torch.ceil(torch.log2(m) * 4) / 4)
        return (torch.round(f / s).clamp(-127, 127) * s).to(x.dtype)
    a = x.transpose(-2, -3).float().cpu().numpy()  # [..., T, Hkv, D]
    back = stored(a.reshape(-1, *a.shape[-2:]), fmt).reshape(a.shape)
    return torch.from_numpy(back).to(x.device).transpose(-2, -3).to(x.dtype)


def wrap_sdpa():
    """Wraps transformers' sdpa attention so that a BF16 model's K and V ([1, Hkv, T, D]) pass
    through the formats in the returned dict ("k", "v"; bf16 = untouched) on their way in;
    FP32 models are left alone, and every model keeps sdpa's masks. "calls" counts the
    restored tensors, so a caller can tell that the wrapper ran."""
    import torch
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    formats = {"k": "bf16", "v": "bf16", "calls": 0}

    def attention(module, query, key, value, mask, **kwargs):
        if query.dtype == torch.bfloat16 and (formats["k"], formats["v"]) != ("bf16", "bf16"):
            formats["calls"] += 1
            key, value = stored_torch(key, formats["k"]), stored_torch(value, formats["v"])
        return sdpa_attention_forward(module, query, key, value, mask, **kwargs)
    AttentionInterface.register("sdpa", attention)
    return formats


class Transformers:
    """The same measurement with transformers' Qwen3 on the GPU: FP32 for the reference, BF16
    with K and V stored in the format under test."""

    def __init__(self, model_dir):
        import torch
        from transformers import AutoModelForCausalLM
        self.torch, self.formats = torch, wrap_sdpa()
        self.models = {
            low: AutoModelForCausalLM.from_pretrained(
                model_dir, dtype=torch.bfloat16 if low else torch.float32,
                attn_implementation="sdpa").cuda().eval()
            for low in (False, True)}

    def logprobs(self, ids, rows, k_fmt, v_fmt, low_precision):
        torch = self.torch
        self.formats.update(k=k_fmt, v=v_fmt, calls=0)
        model = self.models[low_precision]
        with torch.no_grad():
            h = model.model(torch.tensor(ids[None], device="cuda")).last_hidden_state[0]
            lp = torch.log_softmax(model.lm_head(h[torch.tensor(rows, device="cuda")]).float(), -1)
        if low_precision and "bf16/bf16" != f"{k_fmt}/{v_fmt}" and not self.formats["calls"]:
            raise SystemExit("transformers never called the wrapped sdpa: nothing was measured")
        next_ids = torch.tensor(ids[rows + 1], device="cuda")
        return (lp.gather(1, next_ids[:, None])[:, 0].cpu().numpy(),
                lp.argmax(-1).cpu().numpy())


def main():
    args = sys.argv[1:]
    use_transformers = args[:1] == ["--transformers"]
    args = args[1:] if use_transformers else args
    model_dir, tokens, seed, formats = args[0], int(args[1]), int(args[2]), args[3:]
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 151642, tokens)
    rows = np.sort(rng.choice(tokens - 1, min(SAMPLED, tokens - 1), replace=False))
    model = Transformers(model_dir) if use_transformers else Qwen3(model_dir, tokens)
    t0 = time.time()
    ref, ref_top = model.logprobs(ids, rows, "bf16", "bf16", low_precision=False)
    print(f"{model_dir} ({'transformers' if use_transformers else 'numpy'}), "
          f"{tokens} tokens, seed {seed}: reference mean |logprob| {np.abs(ref).mean():.2f}",
          flush=True)
    first = None
    for fmt in formats:
        k_fmt, v_fmt = fmt.split("/") if "/" in fmt else (fmt, fmt)
        lp, top = model.logprobs(ids, rows, k_fmt, v_fmt, low_precision=True)
        dev = float(np.abs(lp - ref).mean())
        first = first or dev
        print(f"{fmt:<26} mean |dev| {dev:8.4f}  ratio {dev / first:5.2f}  "
              f"top-1 {np.mean(top == ref_top):.3f}  ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
