#!/usr/bin/env python3
"""An independent reading of a `tapeformer export --format safetensors` folder, in numpy (float64).

    python3 hf_numpy.py DIR ID ID ...     prints, one line per position, ln p(v) for every v: for a
                                          causal LM the next token's, for a masked LM the token's there

It reads model.safetensors from its own bytes (8-byte header length, JSON, data) and config.json, and
runs the model by Hugging Face's names and conventions alone, as transformers' LlamaForCausalLM and
GPT2LMHeadModel, BertForMaskedLM and RoFormerForMaskedLM define them: Llama's rotary embedding turns
dimension j with j + D/2 (rotate_half), its norms are RMSNorm, its MLP down(silu(gate x) * up x);
GPT-2's Conv1D weights are (in, out), its GELU the tanh form ("gelu_new"); BERT normalises after each
sublayer and adds a token-type row; RoFormer's sinusoidal rotation turns the pairs (2i, 2i + 1) with
the base 10000. Nothing here comes from tapeformer's code; tests/export/hf_folder_test.cpp
compares what it prints with tapeformer's own log-probabilities.
"""
import json
import math
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    base = 8 + length
    types = {"F32": np.float32, "F16": np.float16}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[base + begin:base + end], dtype=types[info["dtype"]])
        tensors[name] = array.reshape(info["shape"]).astype(np.float64)
    return tensors


def softmax_rows(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def causal_attention(q, k, v):
    """q (H, T, D), k and v (H, T, D): softmax(q k^T / sqrt(D) + causal mask) v."""
    T, D = q.shape[1], q.shape[2]
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(D)
    scores = scores + np.triu(np.full((T, T), -np.inf), 1)
    return softmax_rows(scores) @ v


def llama(w, c, ids):
    H, G, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    eps, T = c["rms_norm_eps"], len(ids)

    def rms(x, weight):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight

    inv_freq = 1.0 / (c["rope_theta"] ** (np.arange(0, D, 2) / D))
    angles = np.outer(np.arange(T), inv_freq)  # (T, D/2)
    cos, sin = np.cos(np.concatenate([angles, angles], -1)), np.sin(np.concatenate([angles, angles], -1))

    def rotate(x):  # x (heads, T, D)
        rotated_half = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], -1)
        return x * cos + rotated_half * sin

    h = w["model.embed_tokens.weight"][ids]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        x = rms(h, w[p + "input_layernorm.weight"])
        q = (x @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, D).transpose(1, 0, 2)
        k = (x @ w[p + "self_attn.k_proj.weight"].T).reshape(T, G, D).transpose(1, 0, 2)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(T, G, D).transpose(1, 0, 2)
        q, k = rotate(q), rotate(k)
        k, v = np.repeat(k, H // G, axis=0), np.repeat(v, H // G, axis=0)  # query head i reads group i // (H/G)
        o = causal_attention(q, k, v).transpose(1, 0, 2).reshape(T, H * D)
        h = h + o @ w[p + "self_attn.o_proj.weight"].T
        x = rms(h, w[p + "post_attention_layernorm.weight"])
        gate, up = x @ w[p + "mlp.gate_proj.weight"].T, x @ w[p + "mlp.up_proj.weight"].T
        h = h + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    h = rms(h, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else w["lm_head.weight"]
    return h @ head.T


def gpt2(w, c, ids):
    H, C, eps, T = c["n_head"], c["n_embd"], c["layer_norm_epsilon"], len(ids)
    D = C // H

    def layer_norm(x, name):
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]

    def conv1d(x, name):  # weight (in, out)
        return x @ w[name + ".weight"] + w[name + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    h = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:T]
    for l in range(c["n_layer"]):
        p = f"transformer.h.{l}."
        qkv = conv1d(layer_norm(h, p + "ln_1"), p + "attn.c_attn")
        q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(T, H, D).transpose(1, 0, 2) for i in range(3))
        o = causal_attention(q, k, v).transpose(1, 0, 2).reshape(T, C)
        h = h + conv1d(o, p + "attn.c_proj")
        h = h + conv1d(gelu_new(conv1d(layer_norm(h, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    h = layer_norm(h, "transformer.ln_f")
    head = w["transformer.wte.weight"] if c.get("tie_word_embeddings", True) else w["lm_head.weight"]
    return h @ head.T


def gelu(kind, x):
    if kind == "gelu_new":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / np.sqrt(2)))  # "gelu": the exact, erf form


def masked_lm(w, c, ids, roformer):
    H, C, eps, T = c["num_attention_heads"], c["hidden_size"], c["layer_norm_eps"], len(ids)
    D = C // H
    m = "roformer." if roformer else "bert."

    def layer_norm(x, name):
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]

    def linear(x, name):  # weight (out, in)
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def heads(x):
        return x.reshape(T, H, D).transpose(1, 0, 2)

    x = w[m + "embeddings.word_embeddings.weight"][ids] + w[m + "embeddings.token_type_embeddings.weight"][0]
    if not roformer:
        x = x + w[m + "embeddings.position_embeddings.weight"][:T]
    x = layer_norm(x, m + "embeddings.LayerNorm")
    if roformer:  # RoFormerSinusoidalPositionalEmbedding: sin of the even, cos of the odd columns
        position_enc = np.array([[pos / 10000 ** (2 * (j // 2) / D) for j in range(D)] for pos in range(T)])
        sin, cos = np.sin(position_enc[:, 0::2]), np.cos(position_enc[:, 1::2])  # (T, D/2) each
        sin_pos, cos_pos = np.repeat(sin, 2, axis=-1), np.repeat(cos, 2, axis=-1)  # s0 s0 s1 s1 ...

        def rotate(q):  # (H, T, D): pairs (2i, 2i + 1)
            half = np.stack([-q[..., 1::2], q[..., 0::2]], axis=-1).reshape(q.shape)
            return q * cos_pos + half * sin_pos
    for l in range(c["num_hidden_layers"]):
        p = f"{m}encoder.layer.{l}."
        q, k, v = (heads(linear(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        if roformer:
            q, k = rotate(q), rotate(k)
        o = (softmax_rows(q @ k.transpose(0, 2, 1) / np.sqrt(D)) @ v).transpose(1, 0, 2).reshape(T, C)
        x = layer_norm(linear(o, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        inner = gelu(c["hidden_act"], linear(x, p + "intermediate.dense"))
        x = layer_norm(linear(inner, p + "output.dense") + x, p + "output.LayerNorm")
    t = layer_norm(gelu(c["hidden_act"], linear(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    return t @ w[m + "embeddings.word_embeddings.weight"].T + w["cls.predictions.bias"]


def main():
    folder, ids = sys.argv[1], [int(i) for i in sys.argv[2:]]
    with open(folder + "/config.json") as f:
        config = json.load(f)
    weights = read_safetensors(folder + "/model.safetensors")
    forward = {"LlamaForCausalLM": llama, "GPT2LMHeadModel": gpt2,
               "BertForMaskedLM": lambda w, c, i: masked_lm(w, c, i, roformer=False),
               "RoFormerForMaskedLM": lambda w, c, i: masked_lm(w, c, i, roformer=True)}[config["architectures"][0]]
    for row in forward(weights, config, np.array(ids)):
        row = row - row.max()
        print(" ".join(repr(float(x)) for x in row - np.log(np.exp(row).sum())))


if __name__ == "__main__":
    main()
