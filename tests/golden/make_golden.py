#!/usr/bin/python3
"""Golden values for tests/layers/golden_test.cpp, from scripts/tapeformer_model.py: a PyTorch
implementation of docs/models.md that shares no code with tapeformer's C++ (and that
scripts/tapeformer_checkpoint.py also loads checkpoints into).

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
import os
import sys

import h5py
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, "scripts"))
from tapeformer_model import Model, ModelConfig  # noqa: E402


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
        params[name] = value.float().double()
    return params


# ---- one golden file ----------------------------------------------------------------------------

def write_golden(file_name, cfg, seed, batch, seq_len, padded_tail=0, ignore_every=0):
    params = make_parameters(cfg, seed)
    model = Model(ModelConfig.from_dict(cfg)).double().eval()
    model.load_state_dict(params)  # strict: the model's names and shapes are parameter_shapes'
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
    # BERT's MLM head is row-wise, so running it on every position and ignoring rows without a
    # target in the loss equals running it only where there is a target.
    logits = model(ids, key_padding)
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-100)
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}

    path = os.path.join(HERE, file_name)
    with h5py.File(path, "w", libver="latest") as f:
        for key, value in cfg.items():
            f.attrs[key] = int(value) if isinstance(value, bool) else value
        for name, _ in parameter_shapes(cfg):
            f.create_dataset(f"params/{name}", data=params[name].float().numpy())
            f.create_dataset(f"grads/{name}", data=grads[name].numpy())
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
