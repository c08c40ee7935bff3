#!/usr/bin/python3
"""The PyTorch twin of bench_train_step: the same GPT and BERT models (written from docs/models.md:
parameter names, shapes, initialisation, tied head), trained the same way on random token batches,
printing the same one-line JSON. Also greedy decoding with and without a KV cache.

    /usr/bin/python3 bench/torch_twin.py --config B --steps 20 --warmup 3 --threads 2
    /usr/bin/python3 bench/torch_twin.py --decode --kv-cache --decode-tokens 256

Needs Debian's python3-torch (bench/compare_torch.py installs it on demand); CI never runs it.
B = batch, T = seq_len, C = d_model, H = heads, D = C / H, L = layers, V = vocabulary (256).

Written to be PyTorch at its best on a CPU, within the same math: the attention scale folded into
the batched matmul (baddbmm with an additive causal mask), the fused tanh GELU, AdamW with
foreach=True (one multi-tensor update instead of a loop), gradients set to None rather than zeroed,
and no key-padding mask when a BERT batch has no padding (tapeformer is given the batcher's
all-ones mask, as its trainer passes it).
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

VOCAB = 256
PAD, MASK, CLS, SEP, FIRST_ORDINARY = 0, 1, 2, 3, 4  # BERT's specials take the first ids
IGNORE = -100

# The performance issue's configs: (arch, d_model, layers, heads, seq, batch).
CONFIGS = {
    "A": ("gpt", 128, 4, 4, 128, 16),
    "B": ("gpt", 384, 6, 6, 256, 8),
    "C": ("bert", 128, 4, 4, 128, 16),
    "D": ("gpt", 128, 2, 4, 2048, 1),
    "E": ("gpt", 128, 2, 4, 8192, 1),
}


# ---- the model of docs/models.md, pre-LN ---------------------------------------------------------

class Attention(nn.Module):
    def __init__(self, C, H, L, causal):
        super().__init__()
        self.H, self.D, self.causal = H, C // H, causal
        self.qkv = nn.Linear(C, 3 * C)   # blocks.{i}.attn.qkv: ((H + 2G) D, C), G = H
        self.proj = nn.Linear(C, C)      # blocks.{i}.attn.proj: (C, H D)
        nn.init.normal_(self.qkv.weight, 0.0, 0.02)
        nn.init.normal_(self.proj.weight, 0.0, 0.02 / math.sqrt(2 * L))  # GPT-2's residual scaling
        nn.init.zeros_(self.qkv.bias)
        nn.init.zeros_(self.proj.bias)

    def forward(self, x, key_padding=None, cache=None, offset=0):
        B, T, C = x.shape
        H, D = self.H, self.D
        q, k, v = self.qkv(x).split(C, dim=2)                      # (B, T, C) each
        q = q.view(B, T, H, D).transpose(1, 2)                     # (B, H, T, D)
        k = k.view(B, T, H, D).transpose(1, 2)
        v = v.view(B, T, H, D).transpose(1, 2)
        if cache is not None:  # decode: keys and values of positions < offset are kept
            keys, values = cache                                   # (B, H, T_max, D)
            keys[:, :, offset:offset + T] = k
            values[:, :, offset:offset + T] = v
            k, v = keys[:, :, :offset + T], values[:, :, :offset + T]
        S = k.shape[2]                                             # keys seen
        q = q.reshape(B * H, T, D)
        kt = k.reshape(B * H, S, D).transpose(1, 2)                # (B H, D, S)
        scale = 1.0 / math.sqrt(D)
        if self.causal and T > 1:
            # query i sits at position offset + i and sees keys j <= offset + i
            bias = torch.full((T, S), float("-inf"), dtype=x.dtype).triu(offset + 1)  # (T, S)
            scores = torch.baddbmm(bias, q, kt, alpha=scale)       # (B H, T, S)
        else:
            scores = torch.bmm(q * scale, kt)
        if key_padding is not None:
            scores = scores.view(B, H, T, S).masked_fill((key_padding == 0)[:, None, None, :], float("-inf"))
            scores = scores.view(B * H, T, S)
        probs = torch.softmax(scores, dim=-1)
        out = torch.bmm(probs, v.reshape(B * H, S, D))             # (B H, T, D)
        out = out.view(B, H, T, D).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)


class Mlp(nn.Module):
    def __init__(self, C, L):
        super().__init__()
        self.fc = nn.Linear(C, 4 * C)
        self.proj = nn.Linear(4 * C, C)
        nn.init.normal_(self.fc.weight, 0.0, 0.02)
        nn.init.normal_(self.proj.weight, 0.0, 0.02 / math.sqrt(2 * L))
        nn.init.zeros_(self.fc.bias)
        nn.init.zeros_(self.proj.bias)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, H, L, causal):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = Attention(C, H, L, causal)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = Mlp(C, L)

    def forward(self, x, key_padding=None, cache=None, offset=0):
        h = x + self.attn(self.ln_1(x), key_padding, cache, offset)
        return h + self.mlp(self.ln_2(h))


class MlmHead(nn.Module):
    def __init__(self, C, vocab):
        super().__init__()
        self.dense = nn.Linear(C, C)
        self.norm = nn.LayerNorm(C, eps=1e-5)
        self.bias = nn.Parameter(torch.zeros(vocab))
        nn.init.normal_(self.dense.weight, 0.0, 0.02)
        nn.init.zeros_(self.dense.bias)


class Model(nn.Module):
    """GPT (causal, ln_f, head tied to token_embedding) or BERT (embedding_norm, bidirectional,
    MLM head on the rows that have a target, decoder tied to token_embedding)."""

    def __init__(self, arch, C, L, H, max_seq_len, vocab=VOCAB):
        super().__init__()
        self.arch, self.C, self.vocab = arch, C, vocab
        self.token_embedding = nn.Embedding(vocab, C)
        self.position_embedding = nn.Embedding(max_seq_len, C)
        nn.init.normal_(self.token_embedding.weight, 0.0, 0.02)
        nn.init.normal_(self.position_embedding.weight, 0.0, 0.02)
        if arch == "bert":
            self.embedding_norm = nn.LayerNorm(C, eps=1e-5)
        self.blocks = nn.ModuleList(Block(C, H, L, arch == "gpt") for _ in range(L))
        if arch == "gpt":
            self.ln_f = nn.LayerNorm(C, eps=1e-5)
        else:
            self.mlm_head = MlmHead(C, vocab)

    def hidden(self, ids, key_padding=None, caches=None, offset=0):
        T = ids.shape[1]
        x = self.token_embedding(ids) + self.position_embedding.weight[offset:offset + T]  # (B, T, C)
        if self.arch == "bert":
            x = self.embedding_norm(x)
        for i, block in enumerate(self.blocks):
            x = block(x, key_padding, None if caches is None else caches[i], offset)
        return self.ln_f(x) if self.arch == "gpt" else x

    def logits(self, ids, caches=None, offset=0):  # GPT: (B, T, V)
        return F.linear(self.hidden(ids, None, caches, offset), self.token_embedding.weight)

    def loss(self, ids, targets, key_padding=None):
        if self.arch == "gpt":
            return F.cross_entropy(self.logits(ids).view(-1, self.vocab), targets.view(-1))
        x = self.hidden(ids, key_padding).reshape(-1, self.C)      # (B T, C)
        rows = (targets.view(-1) != IGNORE).nonzero().squeeze(1)  # about 15% of B T
        m = self.mlm_head
        h = m.norm(F.gelu(m.dense(x[rows]), approximate="tanh"))   # (N, C)
        return F.cross_entropy(F.linear(h, self.token_embedding.weight, m.bias), targets.view(-1)[rows])


# ---- random batches, as tapeformer's batchers make them ---------------------------------------

class RandomBatches:
    def __init__(self, arch, seq, batch, seed):
        self.arch, self.T, self.B = arch, seq, batch
        self.gen = torch.Generator().manual_seed(seed)
        n = max(200000, 4 * batch * (seq + 1))
        low = FIRST_ORDINARY if arch == "bert" else 0
        self.stream = torch.randint(low, VOCAB, (n,), generator=self.gen)

    def next(self):
        B, T, gen = self.B, self.T, self.gen
        if self.arch == "gpt":  # windows of T + 1 tokens: inputs and next-token targets
            starts = torch.randint(0, len(self.stream) - T - 1, (B, 1), generator=gen)
            w = self.stream[starts + torch.arange(T + 1)]
            return w[:, :-1].contiguous(), w[:, 1:].contiguous(), None
        # BERT (Devlin et al. 2019, 3.1): [CLS] window of T - 2 [SEP]; each inner position chosen with
        # probability 0.15 (at least one per row); chosen: 80% [MASK], 10% random, 10% unchanged.
        starts = torch.randint(0, len(self.stream) - (T - 2), (B, 1), generator=gen)
        original = torch.cat([torch.full((B, 1), CLS), self.stream[starts + torch.arange(T - 2)],
                              torch.full((B, 1), SEP)], dim=1)      # (B, T)
        chosen = torch.rand(B, T, generator=gen) < 0.15
        chosen[:, 0] = chosen[:, -1] = False
        for b in range(B):
            if not chosen[b].any():
                chosen[b, 1 + torch.randint(0, T - 2, (1,), generator=gen)] = True
        u = torch.rand(B, T, generator=gen)
        inputs = original.clone()
        inputs[chosen & (u < 0.8)] = MASK
        random_ids = torch.randint(FIRST_ORDINARY, VOCAB, (B, T), generator=gen)
        swap = chosen & (u >= 0.8) & (u < 0.9)
        inputs[swap] = random_ids[swap]
        targets = torch.where(chosen, original, torch.full_like(original, IGNORE))
        return inputs, targets, None  # no padding: every key is real, so no mask


# ---- the modes -----------------------------------------------------------------------------------

def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kilobytes


def run_train(name, arch, C, L, H, T, B, steps, warmup, seed, threads, repeat_batch):
    torch.manual_seed(seed)
    model = Model(arch, C, L, H, T)
    params = sum(p.numel() for p in model.parameters())
    embeddings = model.token_embedding.weight.numel() + model.position_embedding.weight.numel()
    non_embedding = params - embeddings
    flops_per_token = 6.0 * non_embedding + 12.0 * L * C * T
    # AdamW as tapeformer's recipe defaults: decay on weight matrices only, not biases, norms, embeddings.
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and p.dim() == 2 and "embedding" not in n]
    ids = {id(p) for p in decay}
    no_decay = [p for p in model.parameters() if id(p) not in ids]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-3, betas=(0.9, 0.99), eps=1e-8, foreach=True)
    batches = RandomBatches(arch, T, B, seed + 100)
    first = batches.next()
    losses, step_seconds = [], []
    timed_start = time.perf_counter()
    for step in range(warmup + steps):
        if step == warmup:
            timed_start = time.perf_counter()
        start = time.perf_counter()
        inputs, targets, key_padding = first if repeat_batch or step == 0 else batches.next()
        optimizer.zero_grad(set_to_none=True)
        loss = model.loss(inputs, targets, key_padding)
        losses.append(loss.item())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step >= warmup:
            step_seconds.append(time.perf_counter() - start)
    elapsed = time.perf_counter() - timed_start
    tokens_per_s = steps * B * T / elapsed if steps else 0.0
    step_seconds.sort()
    print(json.dumps({
        "impl": "torch", "mode": "train", "config": name, "arch": arch, "d_model": C, "layers": L, "heads": H,
        "seq": T, "batch": B, "threads": threads, "steps": steps, "warmup": warmup, "params": params,
        "non_embedding_params": non_embedding, "flops_per_token": flops_per_token,
        "tokens_per_s": round(tokens_per_s, 2),
        "step_s_median": step_seconds[len(step_seconds) // 2] if step_seconds else 0.0,
        "model_gflops": tokens_per_s * flops_per_token * 1e-9, "peak_rss_mb": round(peak_rss_mb(), 1),
        "loss_first": losses[0] if losses else 0.0, "loss_last": losses[-1] if losses else 0.0,
        "torch": torch.__version__}), flush=True)


@torch.inference_mode()
def greedy_decode(model, prompt, tokens, kv_cache, L, H, D):
    """Appends `tokens` argmax ids to prompt (1, P). Without a cache every step reruns the whole
    context (as tapeformer's sampler does); with one, the prompt fills each layer's keys and values
    once and every step runs only the newest id at its position."""
    ids = prompt
    if not kv_cache:
        for _ in range(tokens):
            nxt = model.logits(ids)[:, -1].argmax(-1, keepdim=True)  # (1, 1)
            ids = torch.cat([ids, nxt], dim=1)
        return ids
    t_max = prompt.shape[1] + tokens
    caches = [(torch.empty(1, H, t_max, D), torch.empty(1, H, t_max, D)) for _ in range(L)]  # (1, H, T_max, D)
    nxt = model.logits(ids, caches, 0)[:, -1].argmax(-1, keepdim=True)
    out = [ids, nxt]
    for position in range(prompt.shape[1], t_max - 1):  # `nxt` sits at `position`
        nxt = model.logits(nxt, caches, position)[:, -1].argmax(-1, keepdim=True)
        out.append(nxt)
    return torch.cat(out, dim=1)


def run_decode(name, C, L, H, prompt_len, tokens, kv_cache, threads, seed):
    torch.manual_seed(seed)
    model = Model("gpt", C, L, H, prompt_len + tokens).eval()
    prompt = torch.randint(0, VOCAB, (1, prompt_len), generator=torch.Generator().manual_seed(3))
    greedy_decode(model, prompt, min(8, tokens), kv_cache, L, H, C // H)  # warm-up
    start = time.perf_counter()
    greedy_decode(model, prompt, tokens, kv_cache, L, H, C // H)
    elapsed = time.perf_counter() - start
    print(json.dumps({"impl": "torch", "mode": "decode", "kv_cache": kv_cache, "available": True, "config": name,
                      "threads": threads, "prompt": prompt_len, "tokens": tokens,
                      "tokens_per_s": round(tokens / elapsed, 2), "peak_rss_mb": round(peak_rss_mb(), 1),
                      "torch": torch.__version__}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", choices=sorted(CONFIGS), help="the performance issue's configs")
    p.add_argument("--arch", choices=["gpt", "bert"], default="gpt")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, help="T (overrides a --config's)")
    p.add_argument("--batch", type=int, help="B (overrides a --config's)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, help="default 1 (--brown: the recipe's train.seed)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat-batch", action="store_true")
    p.add_argument("--decode", action="store_true", help="time greedy decoding (config B unless --config)")
    p.add_argument("--kv-cache", action="store_true")
    p.add_argument("--decode-tokens", type=int, default=256)
    p.add_argument("--prompt", type=int, default=8)
    b = p.add_argument_group("--brown RECIPE: train on Brown from a recipe and evaluate as tapeformer eval (twin_brown.py)")
    b.add_argument("--brown", metavar="RECIPE", help="a GPT char recipe, e.g. recipes/gpt_brown_char.yaml")
    b.add_argument("--brown-dir", help="train.txt and val.txt (default: the recipe's data.brown_dir)")
    b.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a recipe key, as tapeformer's --set")
    b.add_argument("--init", choices=["torch", "philox"], default="torch", help="philox: tapeformer's initial draws")
    b.add_argument("--windows", choices=["torch", "philox", "philox-init"], default="torch",
                   help="philox: tapeformer's window starts; philox-init: before issue 20's fix (the init's draws)")
    b.add_argument("--from-checkpoint", metavar="CKPT", help="start from a tapeformer checkpoint (weights, AdamW, batcher)")
    b.add_argument("--init-from", metavar="CKPT", help="start from a checkpoint's weights only, as tapeformer train --init-from")
    b.add_argument("--compare-to", metavar="RUN", help="print tapeformer's train_loss (RUN/metrics.jsonl) beside each step")
    b.add_argument("--eval-batches", type=int, default=0, help="0: the whole validation text")
    b.add_argument("--eval-stride", type=int, default=0,
                   help="S < seq_len: overlapping windows every S ids, each scoring its last S (not tapeformer eval's)")
    b.add_argument("--no-eval", action="store_true")
    b.add_argument("--log", help="write every step's loss, lr and grad norm here (JSON lines)")
    b.add_argument("--log-interval", type=int, default=100)
    b.add_argument("--save", help="torch.save the final state_dict here")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.brown:
        import twin_brown
        if "--steps" not in sys.argv:
            a.steps = 0  # the recipe's train.steps
        twin_brown.run_brown(a, Model)
        return
    name = a.config or ("B" if a.decode else "custom")
    arch, C, L, H, T, B = CONFIGS[name] if name in CONFIGS else (a.arch, a.d_model, a.layers, a.heads, 128, 16)
    T = a.seq or T
    B = a.batch or B
    if a.decode:
        run_decode(name, C, L, H, a.prompt, a.decode_tokens, a.kv_cache, a.threads, 1 if a.seed is None else a.seed)
    else:
        run_train(name, arch, C, L, H, T, B, a.steps, a.warmup, 1 if a.seed is None else a.seed, a.threads,
                  a.repeat_batch)


if __name__ == "__main__":
    main()
