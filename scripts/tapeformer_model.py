"""tapeformer's GPT and BERT as a PyTorch nn.Module: the math of docs/models.md, with the
checkpoint's parameter names and shapes as its state_dict, so a checkpoint's weights load as they are.

    cfg = ModelConfig(arch="gpt", vocab_size=65, d_model=32, n_layers=2, n_heads=2, max_seq_len=32)
    model = Model(cfg).double().eval()
    model.load_state_dict(state_dict)      # e.g. tapeformer_checkpoint.load(path).state_dict
    logits = model(ids)                    # ids (B, T) int64 -> (B, T, V)

Used by scripts/tapeformer_checkpoint.py (checkpoints, `tapeformer eval`'s figures) and by
tests/golden/make_golden.py (the golden values tests/layers/golden_test.cpp compares with).
Every configuration a recipe can describe is computed; a value this file does not know (a newer
recipe) is refused by ModelConfig, naming the key.

B = batch, T = sequence length, C = d_model, H = n_heads, G = n_kv_heads, D = model.head_dim or C / H (head size),
F = d_ff, V = vocabulary size, nb = relative_buckets.
"""
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# The values each choice key may take (train/recipe_schema.cpp).
CHOICES = {
    "arch": ("gpt", "bert"),
    "position": ("none", "sinusoidal", "learned", "rope", "alibi", "t5"),
    "rope_scaling": ("none", "linear", "ntk", "yarn"),
    "norm": ("layer", "rms"),
    "gelu": ("tanh", "erf"),
}
# model.feed_forward: (gated, act) per kind, as Note [feed-forward kinds]; GELU's act follows model.gelu.
FEED_FORWARD_KINDS = {
    "gelu": (False, lambda x, cfg: gelu(x, cfg)),
    "swiglu": (True, lambda x, cfg: F.silu(x)),
    "relu2": (False, lambda x, cfg: F.relu(x).square()),
}
CHOICES["feed_forward"] = tuple(FEED_FORWARD_KINDS)


class UnsupportedConfig(ValueError):
    """A recipe key or value this loader does not know how to compute."""


@dataclasses.dataclass
class ModelConfig:
    """The recipe's model section (docs/recipes.md) plus vocab_size; defaults as layers/models/config.h."""
    arch: str = "gpt"
    vocab_size: int = 256              # the tokenizer's, e.g. 65
    max_seq_len: int = 256
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 0                # 0: n_heads; fewer is grouped-query attention
    heads_per_layer: list = dataclasses.field(default_factory=list)  # a pruned model's; empty: n_heads each
    head_dim: int = 0                  # 0: d_model / n_heads
    d_ff: int = 0                      # 0: 4 d_model
    mixer: list = dataclasses.field(default_factory=list)  # per layer, repeated; empty: attention everywhere
    mamba_expand: int = 2              # mixer mamba: E = mamba_expand d_model
    mamba_state: int = 16              # N
    mamba_conv: int = 4                # K
    position: str = "learned"
    attention_window: int = 0          # 0: no sliding window
    attention_global_tokens: int = 0   # Longformer's global positions 0 .. g - 1
    attention_random_blocks: int = 0   # BigBird's random key blocks per query block
    attention_block_size: int = 16
    attention_random_seed: int = 0
    rope_theta: float = 10000.0
    relative_buckets: int = 32
    relative_max_distance: int = 128
    logit_softcap: float = 0.0         # Gemma 2: scores -> c tanh(scores / c); 0: off
    final_softcap: float = 0.0         # Gemma 2: logits -> c tanh(logits / c); 0: off
    qk_norm: bool = False              # RMSNorm (scale per feature, shared by heads) on q and k before RoPE
    attention_gate: bool = False       # heads' outputs * sigmoid(x W_g^T + b_g), before W_O
    value_embeddings: bool = False     # v + E_v[id]: a (vocab, G D) table per attention layer
    rope_scaling: str = "none"
    rope_scaling_factor: float = 1.0
    rope_original_context: int = 0
    yarn_alpha: float = 1.0
    yarn_beta: float = 32.0
    causal: bool = True
    pre_norm: bool = True
    dropout: float = 0.0
    attn_dropout: float = 0.0
    ln_eps: float = 1e-5
    norm: str = "layer"
    gelu: str = "tanh"
    feed_forward: str = "gelu"
    tie_embeddings: bool = True
    bias: bool = True
    n_segments: int = 0
    init_std: float = 0.02

    def __post_init__(self):
        for key, allowed in CHOICES.items():
            value = getattr(self, key)
            if value not in allowed:
                raise UnsupportedConfig(f"model.{key}: '{value}' is not supported (known: {', '.join(allowed)})")
        if self.n_segments != 0:
            raise UnsupportedConfig(f"model.n_segments: {self.n_segments} is not supported (segment embeddings: "
                                    "tapeformer's recipes refuse them too)")
        if self.causal != (self.arch == "gpt"):
            raise UnsupportedConfig(f"model.causal: {self.causal} with model.arch {self.arch} "
                                    "(a GPT is causal, a BERT is not)")
        if self.arch == "bert" and not self.tie_embeddings:
            raise UnsupportedConfig("model.tie_embeddings: false with model.arch bert "
                                    "(its decoder is the token embedding)")
        if (self.d_model % self.n_heads and not self.head_dim) or self.n_heads % self.kv_heads:
            raise UnsupportedConfig(f"model.d_model {self.d_model}, n_heads {self.n_heads}, n_kv_heads "
                                    f"{self.n_kv_heads}: d_model must divide by n_heads, n_heads by n_kv_heads")
        group = self.n_heads // self.kv_heads
        if self.heads_per_layer and (len(self.heads_per_layer) != self.n_layers or
                                     any(h <= 0 or h % group for h in self.heads_per_layer)):
            raise UnsupportedConfig(f"model.heads_per_layer {self.heads_per_layer}: one positive multiple of "
                                    f"n_heads / n_kv_heads = {group} per layer ({self.n_layers} layers)")
        if any(m not in ("attention", "linear", "differential", "mamba") for m in self.mixer) or \
                (self.mixer and self.n_layers % len(self.mixer)):
            raise UnsupportedConfig(f"model.mixer {self.mixer}: attention, linear, differential or mamba, a "
                                    "pattern dividing n_layers")
        if self.heads_per_layer and self.position == "alibi":
            raise UnsupportedConfig("model.heads_per_layer with model.position alibi (tapeformer refuses it too)")

    @classmethod
    def from_dict(cls, values):
        """From a recipe's model section (any subset of the keys); an unknown key is refused by name."""
        known = {f.name for f in dataclasses.fields(cls)}
        for key in values:
            if key not in known:
                raise UnsupportedConfig(f"model.{key}: unknown key (written by a newer tapeformer?)")
        return cls(**values)

    @property
    def d_head(self):
        """D: model.head_dim, or d_model / n_heads."""
        return self.head_dim or self.d_model // self.n_heads

    def heads(self, layer):
        """Query heads of a layer (a pruned model's differ), and its key/value heads."""
        return self.heads_per_layer[layer] if self.heads_per_layer else self.n_heads

    def mixer_of(self, layer):
        """The layer's sequence mixer: the model.mixer pattern repeated over the layers."""
        return self.mixer[layer % len(self.mixer)] if self.mixer else "attention"

    def kv_heads_of(self, layer):
        return self.heads(layer) // (self.n_heads // self.kv_heads)

    @property
    def kv_heads(self):
        return self.n_kv_heads or self.n_heads

    @property
    def ff_width(self):
        return self.d_ff or 4 * self.d_model


# ---- counter-based random numbers (framework/random.h) -------------------------------------------

MASK32 = 0xFFFFFFFF


def philox4x32(key, counter_hi, counter_lo):
    """Philox4x32-10 (Salmon et al. 2011): four 32-bit words for (key, counter)."""
    c = [counter_lo & MASK32, counter_lo >> 32 & MASK32, counter_hi & MASK32, counter_hi >> 32 & MASK32]
    k0, k1 = key & MASK32, key >> 32 & MASK32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & MASK32, (p0 >> 32) ^ c[3] ^ k1, p0 & MASK32]
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return c


def uniform_at(seed, index):
    """tf::uniform_at: the (seed, index)-th draw in [0, 1), as dropout and BigBird's blocks use it."""
    w = philox4x32(seed, 0, index)
    return ((w[0] << 21) ^ w[1]) * 2.0 ** -53


class Rng:
    """tf::Rng: draw n is philox4x32(seed, 0x5eed, n), its 64 bits w0 << 32 | w1."""

    def __init__(self, seed, counter=0):
        self.seed, self.counter = seed, counter

    def uniform(self):
        w = philox4x32(self.seed, 0x5EED, self.counter)
        self.counter += 1
        return ((w[0] << 32 | w[1]) >> 11) * 2.0 ** -53

    def uniform_int(self, n):
        return int(self.uniform() * n) % n


# ---- what attention sees: positions, masks, biases (Note [attention variants]) --------------------

def rope_frequencies(D, cfg):
    """Pair i's frequency theta^(-2i/D) under model.rope_scaling (Note [rope scaling] in
    framework/ops/rope.h), and the factor on the rotated rows (YaRN's 0.1 ln s + 1)."""
    s, kind = cfg.rope_scaling_factor, cfg.rope_scaling
    theta = cfg.rope_theta * s ** (D / (D - 2)) if kind == "ntk" and D > 2 else cfg.rope_theta
    f = theta ** (-2.0 * torch.arange(D // 2, dtype=torch.float64) / D)  # (D/2)
    if kind == "linear":
        return f / s, 1.0
    if kind == "yarn":
        turns = cfg.rope_original_context * f / (2 * math.pi)
        ramp = ((turns - cfg.yarn_alpha) / (cfg.yarn_beta - cfg.yarn_alpha)).clamp(0, 1)
        return (1 - ramp) * f / s + ramp * f, 0.1 * math.log(s) + 1
    return f, 1.0


def rope(x, cos, sin):
    """x (B, heads, T, D): pair (2i, 2i+1) at position t turns by angle t f_i; cos, sin (T, D/2)."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).reshape(x.shape)


def alibi_slopes(H):
    """Press et al. 2022: 2^(-8 (h+1) / H) for H a power of two; otherwise the n = 2^floor(log2 H)
    slopes of n heads, then every other slope of 2n heads."""
    n = 1 << (H.bit_length() - 1)
    return [2.0 ** (-8.0 * (h + 1) / n) if h < n else 2.0 ** (-4.0 * (2 * (h - n) + 1) / n) for h in range(H)]


def t5_bucket(n, bidirectional, buckets, max_distance):
    """Raffel et al. 2020, with n = query position - key position. Python's math.log is the C
    library's, as tapeformer's: a distance on a bucket boundary lands where it does there."""
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


def random_blocks(cfg, T):
    """BigBird: (blocks, blocks) bool, query block qb sees key block kb among its random ones."""
    bs, r = cfg.attention_block_size, cfg.attention_random_blocks
    blocks = -(-T // bs)
    table = torch.zeros(blocks, blocks, dtype=torch.bool)
    for qb in range(blocks):
        choices = qb + 1 if cfg.causal else blocks
        for k in range(r):
            table[qb, int(uniform_at(cfg.attention_random_seed, qb * r + k) * choices)] = True
    return table


class AttentionPattern:
    """For sequences of T positions, what every layer's attention shares: which keys a query sees,
    the ALiBi bias, T5's buckets, RoPE's angles, the ids (value embeddings). Built once per forward."""

    def __init__(self, cfg, T, dtype, ids=None):
        self.ids = ids  # (B, T)
        i = torch.arange(T)[:, None]  # query position
        j = torch.arange(T)[None, :]  # key position
        self.visible = torch.ones(T, T, dtype=torch.bool)  # (T, T)
        if cfg.causal:
            self.visible &= j <= i
        if cfg.attention_window > 0:
            seen = (i - j).abs() < cfg.attention_window
            g = cfg.attention_global_tokens
            if g > 0:
                seen |= (i < g) | (j < g)
            if cfg.attention_random_blocks > 0:
                bs = cfg.attention_block_size
                seen |= random_blocks(cfg, T)[i // bs, j // bs]
            self.visible &= seen
        self.bias = None  # (H, T, T) added to the scaled scores
        if cfg.position == "alibi":
            slopes = torch.tensor(alibi_slopes(cfg.n_heads), dtype=dtype)
            self.bias = -slopes[:, None, None] * (i - j).abs().to(dtype)
        self.buckets = None  # (T, T) bucket of each (query, key)
        if cfg.position == "t5":
            table = [t5_bucket(n, not cfg.causal, cfg.relative_buckets, cfg.relative_max_distance)
                     for n in range(-(T - 1), T)]
            self.buckets = torch.tensor(table)[i - j + T - 1]
        self.rope = None  # cos, sin (T, D/2)
        if cfg.position == "rope":
            f, magnitude = rope_frequencies(cfg.d_head, cfg)
            angle = torch.arange(T, dtype=torch.float64)[:, None] * f
            self.rope = ((magnitude * torch.cos(angle)).to(dtype), (magnitude * torch.sin(angle)).to(dtype))


def soft_cap(scores, cfg):
    """Gemma 2's soft cap on the attention scores after every bias: c tanh(s / c)."""
    c = cfg.logit_softcap
    return c * torch.tanh(scores / c) if c > 0 else scores


def sinusoidal_table(T, C, dtype):
    """Vaswani et al. 2017: PE[t, 2i] = sin(t / 10000^(2i/C)), PE[t, 2i+1] = cos(the same)."""
    angle = torch.arange(T, dtype=torch.float64)[:, None] / 10000.0 ** (torch.arange(0, C, 2, dtype=torch.float64) / C)
    pe = torch.zeros(T, C, dtype=torch.float64)  # (T, C)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : C // 2])
    return pe.to(dtype)


# ---- the layers ----------------------------------------------------------------------------------

class Norm(nn.Module):
    """Layer norm (weight, bias) or RMSNorm (weight only), per model.norm."""

    def __init__(self, cfg):
        super().__init__()
        self.kind, self.eps = cfg.norm, cfg.ln_eps
        self.weight = nn.Parameter(torch.ones(cfg.d_model))
        self.bias = nn.Parameter(torch.zeros(cfg.d_model)) if cfg.norm == "layer" else None

    def forward(self, x):
        if self.kind == "rms":
            return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)


def gelu(x, cfg):
    return F.gelu(x, approximate="tanh" if cfg.gelu == "tanh" else "none")


class Attention(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.cfg = cfg
        self.H, self.G = cfg.heads(layer), cfg.kv_heads_of(layer)
        H, G, D = self.H, self.G, cfg.d_head
        self.qkv = nn.Linear(cfg.d_model, (H + 2 * G) * D, bias=cfg.bias)
        self.proj = nn.Linear(H * D, cfg.d_model, bias=cfg.bias)
        self.linear = cfg.mixer_of(layer) == "linear"
        self.differential = cfg.mixer_of(layer) == "differential"
        if cfg.position == "t5" and not self.linear:
            self.relative_bias = nn.Parameter(torch.zeros(H, cfg.relative_buckets))  # (H, nb)
        if self.differential:  # Ye et al. 2024: lambda's four vectors, the heads' RMSNorm, lambda_init
            for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                setattr(self, name, nn.Parameter(torch.zeros(D)))
            self.subln = nn.Module()
            self.subln.weight = nn.Parameter(torch.ones(2 * D))
            self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * layer)  # layer l = layer + 1 of the paper
        if cfg.qk_norm:
            self.q_norm, self.k_norm = nn.Module(), nn.Module()
            self.q_norm.weight, self.k_norm.weight = nn.Parameter(torch.ones(D)), nn.Parameter(torch.ones(D))
        if cfg.attention_gate:
            self.gate = nn.Linear(cfg.d_model, H * D, bias=cfg.bias)
        if cfg.value_embeddings:
            self.value_embedding = nn.Embedding(cfg.vocab_size, G * D)

    def forward(self, x, pattern, key_padding):
        cfg = self.cfg
        B, T, _ = x.shape
        H, G, D = self.H, self.G, cfg.d_head
        q, k, v = self.qkv(x).split([H * D, G * D, G * D], dim=-1)  # (B, T, H D), (B, T, G D) x 2
        q = q.reshape(B, T, H, D).transpose(1, 2)                     # (B, H, T, D)
        k = k.reshape(B, T, G, D).transpose(1, 2)                     # (B, G, T, D)
        if self.cfg.value_embeddings:
            v = v + self.value_embedding(pattern.ids)                   # (B, T, G D)
        v = v.reshape(B, T, G, D).transpose(1, 2)
        q, k = self.queries_and_keys(q, k)
        if self.linear:  # Katharopoulos et al. 2020: phi(q) . phi(k), phi = elu + 1, no score options
            weights = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)  # (B, H, T, T)
            visible = torch.ones(T, T, dtype=torch.bool)
            if cfg.causal:
                visible = torch.tril(visible)
            visible = visible.expand(B, 1, T, T)
            if key_padding is not None:
                visible = visible & (key_padding != 0)[:, None, None, :]
            weights = weights.masked_fill(~visible, 0.0)
            out = (weights @ v) / (weights.sum(-1, keepdim=True) + 1e-6)
            return self.proj(self.heads_output(out.transpose(1, 2).reshape(B, T, H * D), x))
        if pattern.rope is not None:
            q, k = rope(q, *pattern.rope), rope(k, *pattern.rope)
        if self.differential:
            return self.proj(self.heads_output(self.differential_heads(q, k, v, pattern, key_padding), x))
        k = k.repeat_interleave(H // G, dim=1)  # query head h reads kv head h / (H / G)
        v = v.repeat_interleave(H // G, dim=1)  # (B, H, T, D)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D)  # (B, H, T, T)
        if pattern.bias is not None:
            scores = scores + pattern.bias
        if pattern.buckets is not None:
            scores = scores + self.relative_bias[:, pattern.buckets]  # (H, T, T)
        scores = soft_cap(scores, cfg)
        visible = pattern.visible.expand(B, 1, T, T)
        if key_padding is not None:
            visible = visible & (key_padding != 0)[:, None, None, :]
        probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
        probs = probs.masked_fill(~visible.any(-1, keepdim=True), 0.0)  # a row with no key: 0, not NaN
        probs = F.dropout(probs, cfg.attn_dropout, self.training)
        out = (probs @ v).transpose(1, 2).reshape(B, T, H * D)
        return self.proj(self.heads_output(out, x))  # (B, T, C)

    def queries_and_keys(self, q, k):
        """The layer's options on each head's queries (B, H, T, D) and keys (B, G, T, D), before RoPE
        (Note [attention layer options])."""
        if self.cfg.qk_norm:
            eps = self.cfg.ln_eps
            q = q / torch.sqrt((q * q).mean(-1, keepdim=True) + eps) * self.q_norm.weight
            k = k / torch.sqrt((k * k).mean(-1, keepdim=True) + eps) * self.k_norm.weight
        return q, k

    def heads_output(self, heads, x):
        """The layer's options on the heads' outputs side by side (B, T, H D), before W_O; x is the
        layer's input (B, T, C)."""
        if self.cfg.attention_gate:
            heads = heads * torch.sigmoid(self.gate(x))
        return heads

    def differential_heads(self, q, k, v, pattern, key_padding):
        """Softmax heads 2i and 2i + 1 are the two maps of differential head i, whose value is
        theirs side by side (2D): (A1 - lambda A2) V, RMSNorm per head, times 1 - lambda_init."""
        B, H, T, D = q.shape
        G = k.shape[1]
        v = v.transpose(1, 2).reshape(B, T, G // 2, 2 * D).transpose(1, 2)  # (B, G/2, T, 2D)
        v = v.repeat_interleave(H // G, dim=1)                                # (B, H/2, T, 2D)
        visible = pattern.visible.expand(B, 1, T, T)
        if key_padding is not None:
            visible = visible & (key_padding != 0)[:, None, None, :]
        maps = []
        for half in (0, 1):
            qh = q[:, half::2]                                                  # (B, H/2, T, D)
            kh = k[:, half::2].repeat_interleave(H // G, dim=1)
            scores = qh @ kh.transpose(-1, -2) / math.sqrt(D)
            if self.cfg.position == "alibi":  # one slope per differential head, shared by its maps
                i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
                slopes = torch.tensor(alibi_slopes(H // 2), dtype=q.dtype)
                scores = scores - slopes[:, None, None] * (i - j).abs().to(q.dtype)
            scores = soft_cap(scores, self.cfg)
            probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
            maps.append(probs.masked_fill(~visible.any(-1, keepdim=True), 0.0))
        lam = (torch.exp(self.lambda_q1 @ self.lambda_k1) - torch.exp(self.lambda_q2 @ self.lambda_k2) +
               self.lambda_init)
        out = (maps[0] - lam * maps[1]) @ v                                     # (B, H/2, T, 2D)
        out = out / torch.sqrt((out * out).mean(-1, keepdim=True) + 1e-5) * self.subln.weight
        return (1 - self.lambda_init) * out.transpose(1, 2).reshape(B, T, H * D)


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.gated, self.act = FEED_FORWARD_KINDS[cfg.feed_forward]
        self.fc = nn.Linear(cfg.d_model, (2 if self.gated else 1) * cfg.ff_width, bias=cfg.bias)  # rows [gate | value]
        self.proj = nn.Linear(cfg.ff_width, cfg.d_model, bias=cfg.bias)

    def forward(self, x):
        h = self.fc(x)  # (B, T, F) or (B, T, 2F)
        if self.gated:
            gate, value = h.chunk(2, dim=-1)
            return self.proj(self.act(gate, self.cfg) * value)
        return self.proj(self.act(h, self.cfg))


class Mamba(nn.Module):
    """Gu & Dao 2023's block as the layer's mixer (layers/mamba.h): the selective scan as its
    recurrence, one step at a time."""

    def __init__(self, cfg):
        super().__init__()
        C, E, N, K = cfg.d_model, cfg.mamba_expand * cfg.d_model, cfg.mamba_state, cfg.mamba_conv
        self.E, self.N, self.K, self.R = E, N, K, (C + 15) // 16
        self.in_proj = nn.Linear(C, 2 * E, bias=False)
        self.conv1d = nn.Conv1d(E, E, K, groups=E, padding=K - 1)  # weight (E, 1, K), bias (E)
        self.x_proj = nn.Linear(E, self.R + 2 * N, bias=False)
        self.dt_proj = nn.Linear(self.R, E)
        self.A_log = nn.Parameter(torch.zeros(E, N))
        self.D = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, C, bias=False)

    def forward(self, u):
        B, T, _ = u.shape
        x, z = self.in_proj(u).chunk(2, dim=-1)                           # (B, T, E) each
        x = F.silu(self.conv1d(x.transpose(1, 2))[..., :T].transpose(1, 2))  # causal: the first T outputs
        dt, Bm, Cm = self.x_proj(x).split([self.R, self.N, self.N], dim=-1)
        delta = F.softplus(self.dt_proj(dt))                              # (B, T, E)
        A = -torch.exp(self.A_log)                                        # (E, N)
        h = torch.zeros(B, self.E, self.N, dtype=u.dtype)
        ys = []
        for t in range(T):  # h_t = exp(delta_t A) h_{t-1} + delta_t B_t x_t; y_t = C_t . h_t + D x_t
            d = delta[:, t, :, None]                                       # (B, E, 1)
            h = torch.exp(d * A) * h + d * Bm[:, t, None, :] * x[:, t, :, None]
            ys.append((h * Cm[:, t, None, :]).sum(-1) + self.D * x[:, t])
        y = torch.stack(ys, dim=1)                                        # (B, T, E)
        return self.out_proj(y * F.silu(z))


class Block(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.pre_norm, self.p = cfg.pre_norm, cfg.dropout
        self.ln_1 = Norm(cfg)
        if cfg.mixer_of(layer) == "mamba":
            self.mamba = Mamba(cfg)
        else:
            self.attn = Attention(cfg, layer)
        self.ln_2 = Norm(cfg)
        self.mlp = FeedForward(cfg)

    def mixer(self, x, pattern, key_padding):
        return self.mamba(x) if hasattr(self, "mamba") else self.attn(x, pattern, key_padding)

    def forward(self, x, pattern, key_padding):
        drop = lambda y: F.dropout(y, self.p, self.training)  # noqa: E731
        if self.pre_norm:
            h = x + drop(self.mixer(self.ln_1(x), pattern, key_padding))
            return h + drop(self.mlp(self.ln_2(h)))
        h = self.ln_1(x + drop(self.mixer(x, pattern, key_padding)))
        return self.ln_2(h + drop(self.mlp(h)))


class MlmHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.dense = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.norm = Norm(cfg)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size)) if cfg.bias else None  # (V)

    def forward(self, x, token_embedding):
        logits = self.norm(gelu(self.dense(x), self.cfg)) @ token_embedding.T  # (B, T, V): tied decoder
        return logits if self.bias is None else logits + self.bias


class Model(nn.Module):
    """GPT (model.arch gpt) or BERT (bert): forward(ids (B, T), key_padding (B, T) 1 real / 0 pad,
    BERT only) -> logits (B, T, V). BERT's MLM head runs at every position (row-wise, so the rows
    with a target are what tapeformer computes)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.token_embedding = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.position == "learned":
            self.position_embedding = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        if cfg.arch == "bert":
            self.embedding_norm = Norm(cfg)
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
        if cfg.arch == "gpt":
            self.ln_f = Norm(cfg)
            if not cfg.tie_embeddings:
                self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        else:
            self.mlm_head = MlmHead(cfg)

    def forward(self, ids, key_padding=None):
        cfg = self.cfg
        T = ids.shape[1]
        if T > cfg.max_seq_len:
            raise ValueError(f"a sequence of {T} positions is longer than model.max_seq_len {cfg.max_seq_len}")
        x = self.token_embedding(ids)  # (B, T, C)
        if cfg.position == "learned":
            x = x + self.position_embedding.weight[:T]
        if cfg.position == "sinusoidal":
            x = x + sinusoidal_table(T, cfg.d_model, x.dtype)
        if cfg.arch == "bert":
            x = self.embedding_norm(x)
        x = F.dropout(x, cfg.dropout, self.training)
        pattern = AttentionPattern(cfg, T, x.dtype, ids)
        for block in self.blocks:
            x = block(x, pattern, key_padding if cfg.arch == "bert" else None)
        if cfg.arch == "bert":
            return self.output_logits(self.mlm_head(x, self.token_embedding.weight))
        x = self.ln_f(x)
        return self.output_logits(self.lm_head(x) if not cfg.tie_embeddings else x @ self.token_embedding.weight.T)

    def output_logits(self, logits):
        """Gemma 2's cap on the output logits (model.final_softcap): c tanh(z / c)."""
        c = self.cfg.final_softcap
        return c * torch.tanh(logits / c) if c > 0 else logits
