#!/usr/bin/python3
"""Golden values for tests/layers/golden_test.cpp, from an independent PyTorch implementation of
docs/models.md (written from that page, not from tapeformer's C++).

Run once offline (CI never runs Python; the .h5 files it writes are committed):
    /usr/bin/python3 tests/golden/make_golden.py        # Debian: python3-torch, python3-h5py

Each model gets fixed weights drawn here (torch.Generator, seeded), rounded to float32 and stored
as float32; everything is then computed in float64 from those float32 values, so a float64
tapeformer model loaded with the same float32 weights must agree to rounding (~1e-12).

File layout (one HDF5 file per model, read by tapeformer's H5Reader):
    attributes on /     the ModelConfig: arch, vocab_size, max_seq_len, d_model, n_layers,
                        n_heads, n_kv_heads, d_ff, position, pre_norm, causal, gelu,
                        tie_embeddings, ln_eps, rope_theta, norm, feed_forward, bias,
                        attention_window, attention_global_tokens, relative_buckets,
                        relative_max_distance, rope_scaling, rope_scaling_factor,
                        rope_original_context, yarn_alpha, yarn_beta (ints, floats, strings)
    /params/<name>      float32, PyTorch-style names and (out, in) shapes from docs/models.md
    /inputs/ids         int32 (B, T)
    /inputs/targets     int32 (B, T), -100 = no loss
    /inputs/key_padding float64 (B, T), 1 real / 0 padding (BERT only)
    /outputs/logits     float64 (B, T, V)
    /outputs/loss       float64 scalar
    /grads/<name>       float64, d loss / d parameter
"""
import math
import os

import h5py
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- the math of docs/models.md -----------------------------------------------------------------

def layer_norm(x, p, name, cfg):
    if cfg["norm"] == "rms":  # RMSNorm: no centring, no bias
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg["ln_eps"]) * p[name + ".weight"]
    return F.layer_norm(x, (x.shape[-1],), p[name + ".weight"], p[name + ".bias"], cfg["ln_eps"])


def gelu(x, cfg):
    return F.gelu(x, approximate="tanh" if cfg["gelu"] == "tanh" else "none")


def linear(x, p, name):
    return F.linear(x, p[name + ".weight"], p.get(name + ".bias"))


def rope_frequencies(D, cfg):
    """Pair i's frequency theta^(-2i/D), stretched by the scaling rule (docs/models.md, "RoPE
    scaling"), and the factor on the rotated rows (YaRN's 0.1 ln s + 1)."""
    theta, s, kind = cfg["rope_theta"], cfg["rope_scaling_factor"], cfg["rope_scaling"]
    if kind == "ntk":
        theta = theta * s ** (D / (D - 2))
    i = torch.arange(D // 2, dtype=torch.float64)
    f = theta ** (-2.0 * i / D)
    if kind == "linear":
        return f / s, 1.0
    if kind == "yarn":
        turns = cfg["rope_original_context"] * f / (2 * math.pi)
        ramp = ((turns - cfg["yarn_alpha"]) / (cfg["yarn_beta"] - cfg["yarn_alpha"])).clamp(0, 1)
        return (1 - ramp) * f / s + ramp * f, 0.1 * math.log(s) + 1
    return f, 1.0


def rope(x, cfg):
    """x (B, heads, T, D): pair (2i, 2i+1) at position pos turns by pos * f_i."""
    T, D = x.shape[-2], x.shape[-1]
    f, magnitude = rope_frequencies(D, cfg)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * f  # (T, D/2)
    even, odd = x[..., 0::2], x[..., 1::2]
    rotated_even = even * torch.cos(angle) - odd * torch.sin(angle)
    rotated_odd = even * torch.sin(angle) + odd * torch.cos(angle)
    return magnitude * torch.stack([rotated_even, rotated_odd], dim=-1).reshape(x.shape)


def alibi_slopes(H):
    """Press et al. 2022: 2^(-8 (h+1) / H) for H a power of two; otherwise the n = 2^floor(log2 H)
    slopes of n heads, then every other slope of 2n heads."""
    n = 2 ** int(math.floor(math.log2(H)))
    slopes = [2 ** (-8 * (h + 1) / n) for h in range(n)]
    slopes += [2 ** (-8 * (h + 1) / (2 * n)) for h in range(0, 2 * n, 2)][: H - n]
    return torch.tensor(slopes, dtype=torch.float64)


def t5_bucket(n, bidirectional, buckets, max_distance):
    """Raffel et al. 2020: n = query position - key position."""
    bucket = 0
    if bidirectional:
        buckets //= 2
        if n < 0:
            bucket = buckets
        n = abs(n)
    else:
        n = max(n, 0)
    exact = buckets // 2
    if n < exact:
        return bucket + n
    large = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (buckets - exact))
    return bucket + min(large, buckets - 1)


def attention(x, p, name, cfg, key_padding):
    B, T, C = x.shape
    H = cfg["n_heads"]
    G = cfg["n_kv_heads"] or H
    D = C // H
    qkv = linear(x, p, name + ".qkv")  # (B, T, (H + 2G) D)
    q = qkv[..., : H * D].reshape(B, T, H, D).transpose(1, 2)
    k = qkv[..., H * D : H * D + G * D].reshape(B, T, G, D).transpose(1, 2)
    v = qkv[..., H * D + G * D :].reshape(B, T, G, D).transpose(1, 2)
    if cfg["position"] == "rope":
        q, k = rope(q, cfg), rope(k, cfg)
    # query head h uses kv head h // (H / G)
    k = k.repeat_interleave(H // G, dim=1)
    v = v.repeat_interleave(H // G, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)  # (B, H, T, T)
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # query position - key position
    if cfg["position"] == "alibi":
        scores = scores - alibi_slopes(H)[:, None, None] * distance.abs().double()
    if cfg["position"] == "t5":
        bucket = torch.tensor([[t5_bucket(int(n), not cfg["causal"], cfg["relative_buckets"],
                                          cfg["relative_max_distance"]) for n in row] for row in distance])
        scores = scores + p[name + ".relative_bias"][:, bucket]  # (H, T, T)
    masked = torch.zeros(B, 1, T, T, dtype=torch.bool)
    if cfg["causal"]:
        masked |= torch.ones(T, T, dtype=torch.bool).triu(1)
    w, g = cfg["attention_window"], cfg["attention_global_tokens"]
    if w > 0:  # a key outside the window is hidden unless it or the query is global
        outside = distance.abs() >= w
        is_global = (torch.arange(T)[:, None] < g) | (torch.arange(T)[None, :] < g)
        masked |= outside & ~is_global
    if key_padding is not None:
        masked |= (key_padding == 0)[:, None, None, :]
    probs = torch.softmax(scores.masked_fill(masked, float("-inf")), dim=-1)
    out = (probs @ v).transpose(1, 2).reshape(B, T, H * D)
    return linear(out, p, name + ".proj")


def mlp(x, p, name, cfg):
    h = linear(x, p, name + ".fc")
    if cfg["feed_forward"] == "swiglu":  # rows [gate | value]
        a, b = h.chunk(2, dim=-1)
        return linear(F.silu(a) * b, p, name + ".proj")
    return linear(gelu(h, cfg), p, name + ".proj")


def block(x, p, name, cfg, key_padding):
    if cfg["pre_norm"]:
        h = x + attention(layer_norm(x, p, name + ".ln_1", cfg), p, name + ".attn", cfg, key_padding)
        return h + mlp(layer_norm(h, p, name + ".ln_2", cfg), p, name + ".mlp", cfg)
    h = layer_norm(x + attention(x, p, name + ".attn", cfg, key_padding), p, name + ".ln_1", cfg)
    return layer_norm(h + mlp(h, p, name + ".mlp", cfg), p, name + ".ln_2", cfg)


def absolute_positions(T, cfg, p):
    if cfg["position"] == "learned":
        return p["position_embedding.weight"][:T]
    if cfg["position"] == "sinusoidal":
        pos = torch.arange(T, dtype=torch.float64)[:, None]
        i2 = torch.arange(0, cfg["d_model"], 2, dtype=torch.float64)
        pe = torch.zeros(T, cfg["d_model"], dtype=torch.float64)
        pe[:, 0::2] = torch.sin(pos / 10000 ** (i2 / cfg["d_model"]))
        pe[:, 1::2] = torch.cos(pos / 10000 ** (i2 / cfg["d_model"]))
        return pe
    return 0.0


def gpt_logits(p, cfg, ids):
    x = F.embedding(ids, p["token_embedding.weight"]) + absolute_positions(ids.shape[1], cfg, p)
    for i in range(cfg["n_layers"]):
        x = block(x, p, f"blocks.{i}", cfg, None)
    x = layer_norm(x, p, "ln_f", cfg)
    head = p["token_embedding.weight"] if cfg["tie_embeddings"] else p["lm_head.weight"]
    return x @ head.T


def bert_logits(p, cfg, ids, key_padding):
    x = F.embedding(ids, p["token_embedding.weight"]) + absolute_positions(ids.shape[1], cfg, p)
    x = layer_norm(x, p, "embedding_norm", cfg)
    for i in range(cfg["n_layers"]):
        x = block(x, p, f"blocks.{i}", cfg, key_padding)
    # The MLM head is row-wise, so running it on every position and ignoring rows without a target
    # in the loss equals running it only where there is a target.
    h = layer_norm(gelu(linear(x, p, "mlm_head.dense"), cfg), p, "mlm_head.norm", cfg)
    return h @ p["token_embedding.weight"].T + p.get("mlm_head.bias", 0.0)


# ---- parameters ---------------------------------------------------------------------------------

def parameter_shapes(cfg):
    """The table of docs/models.md, in its order."""
    V, C, L, H = cfg["vocab_size"], cfg["d_model"], cfg["n_layers"], cfg["n_heads"]
    G, D, F_ = cfg["n_kv_heads"] or H, C // H, cfg["d_ff"] or 4 * C
    fc_rows = 2 * F_ if cfg["feed_forward"] == "swiglu" else F_

    def norm(name):  # RMSNorm has no bias
        return [(name + ".weight", (C,))] + ([] if cfg["norm"] == "rms" else [(name + ".bias", (C,))])

    def lin(name, out, inp):  # model.bias: false drops every linear layer's bias
        return [(name + ".weight", (out, inp))] + ([(name + ".bias", (out,))] if cfg["bias"] else [])

    shapes = [("token_embedding.weight", (V, C))]
    if cfg["position"] == "learned":
        shapes.append(("position_embedding.weight", (cfg["max_seq_len"], C)))
    if cfg["arch"] == "bert":
        shapes += norm("embedding_norm")
    for i in range(L):
        b = f"blocks.{i}."
        shapes += norm(b + "ln_1") + lin(b + "attn.qkv", (H + 2 * G) * D, C) + lin(b + "attn.proj", C, H * D)
        if cfg["position"] == "t5":
            shapes.append((b + "attn.relative_bias", (H, cfg["relative_buckets"])))
        shapes += norm(b + "ln_2") + lin(b + "mlp.fc", fc_rows, C) + lin(b + "mlp.proj", C, F_)
    if cfg["arch"] == "gpt":
        shapes += norm("ln_f")
        if not cfg["tie_embeddings"]:
            shapes.append(("lm_head.weight", (V, C)))
    else:
        shapes += lin("mlm_head.dense", C, C) + norm("mlm_head.norm")
        if cfg["bias"]:
            shapes.append(("mlm_head.bias", (V,)))
    return shapes


def make_parameters(cfg, seed):
    """Weights ~ normal(0, 0.3), biases ~ normal(0, 0.1), norm scales ~ 1 + normal(0, 0.1): far
    enough from the initialisation that every term of the math shows in the outputs."""
    gen = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in parameter_shapes(cfg):
        noise = torch.randn(shape, generator=gen, dtype=torch.float64)
        is_norm = "ln_" in name or "norm." in name
        if is_norm and name.endswith("weight"):
            value = 1 + 0.1 * noise
        elif name.endswith("bias"):
            value = 0.1 * noise
        else:
            value = 0.3 * noise
        # Rounded to float32 (what is stored), computed in float64.
        params[name] = value.float().double().requires_grad_()
    return params


# ---- one golden file ----------------------------------------------------------------------------

def write_golden(file_name, cfg, seed, batch, seq_len, padded_tail=0, ignore_every=0):
    params = make_parameters(cfg, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    V = cfg["vocab_size"]
    ids = torch.randint(0, V, (batch, seq_len), generator=gen, dtype=torch.int64)
    targets = torch.randint(0, V, (batch, seq_len), generator=gen, dtype=torch.int64)
    key_padding = None
    if cfg["arch"] == "bert":
        key_padding = torch.ones(batch, seq_len, dtype=torch.float64)
        key_padding[-1, seq_len - padded_tail:] = 0  # the last sequence is shorter
        flat = targets.view(-1)
        for i in range(flat.numel()):
            if key_padding.view(-1)[i] == 0 or i % ignore_every != 0:
                flat[i] = -100  # no prediction at padding and at unmasked positions
        logits = bert_logits(params, cfg, ids, key_padding)
    else:
        logits = gpt_logits(params, cfg, ids)
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-100)
    loss.backward()

    path = os.path.join(HERE, file_name)
    with h5py.File(path, "w", libver="latest") as f:
        for key, value in cfg.items():
            f.attrs[key] = int(value) if isinstance(value, bool) else value
        for name, _ in parameter_shapes(cfg):
            f.create_dataset(f"params/{name}", data=params[name].detach().float().numpy())
            f.create_dataset(f"grads/{name}", data=params[name].grad.numpy())
        f.create_dataset("inputs/ids", data=ids.int().numpy())
        f.create_dataset("inputs/targets", data=targets.int().numpy())
        if key_padding is not None:
            f.create_dataset("inputs/key_padding", data=key_padding.numpy())
        f.create_dataset("outputs/logits", data=logits.detach().numpy())
        f.create_dataset("outputs/loss", data=loss.detach().numpy())
    print(f"{file_name}: loss {loss.item():.6f}, {sum(p.numel() for p in params.values())} parameters, "
          f"{os.path.getsize(path)} bytes")


def config(**overrides):
    cfg = dict(arch="gpt", vocab_size=11, max_seq_len=8, d_model=8, n_layers=2, n_heads=2, n_kv_heads=0, d_ff=0,
               position="learned", pre_norm=True, causal=True, gelu="tanh", tie_embeddings=True, ln_eps=1e-5,
               rope_theta=10000.0, norm="layer", feed_forward="gelu", bias=True, attention_window=0,
               attention_global_tokens=0, relative_buckets=32, relative_max_distance=128, rope_scaling="none",
               rope_scaling_factor=1.0, rope_original_context=0, yarn_alpha=1.0, yarn_beta=32.0)
    cfg.update(overrides)
    return cfg


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    # GPT-2 shape: pre-LN, learned positions, tied LM head, tanh GELU, causal.
    write_golden("gpt_learned.h5", config(), seed=1, batch=2, seq_len=6)
    # BERT shape: post-LN, learned positions, erf GELU, key padding, ignored targets.
    write_golden("bert_learned.h5", config(arch="bert", pre_norm=False, causal=False, gelu="erf"), seed=2,
                 batch=2, seq_len=6, padded_tail=2, ignore_every=2)
    # A LLaMA-like GPT: RoPE, grouped-query attention (2 query heads share 1 kv head), untied head.
    write_golden("gpt_rope_gqa.h5", config(position="rope", n_heads=2, n_kv_heads=1, tie_embeddings=False,
                                           d_ff=24), seed=3, batch=2, seq_len=6)
    # The "modern" block: RoPE stretched by YaRN (every pair on the ramp at L = 16), RMSNorm, SwiGLU,
    # grouped-query attention, no biases, a sliding window of 3.
    write_golden("gpt_modern.h5", config(position="rope", n_heads=4, n_kv_heads=2, d_model=16, norm="rms",
                                         feed_forward="swiglu", d_ff=12, bias=False, attention_window=3,
                                         rope_scaling="yarn", rope_scaling_factor=3.0, rope_original_context=16,
                                         yarn_beta=8.0), seed=4, batch=2, seq_len=7)
    # ALiBi with 3 heads (slopes of a count that is not a power of two), NTK-free, window 4 + 1 global.
    write_golden("gpt_alibi.h5", config(position="alibi", n_heads=3, d_model=12, attention_window=4,
                                        attention_global_tokens=1), seed=5, batch=2, seq_len=7)
    # T5's bias in a BERT: bidirectional buckets (4 per direction, max distance 4), padding, window 3,
    # one global token, RMSNorm.
    write_golden("bert_t5.h5", config(arch="bert", pre_norm=False, causal=False, gelu="erf", position="t5",
                                      relative_buckets=8, relative_max_distance=8, attention_window=3,
                                      attention_global_tokens=1, norm="rms"),
                 seed=6, batch=2, seq_len=7, padded_tail=2, ignore_every=2)
