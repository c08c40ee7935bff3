#!/usr/bin/python3
"""The PyTorch twin trained on Brown from a recipe, as docs describe tapeformer's training, and
evaluated as `tapeformer eval --text` evaluates (issue 20: quality parity). torch_twin.py --brown
runs it; the switches swap one part for tapeformer's own, so an ablation changes one thing.

    /usr/bin/python3 bench/torch_twin.py --brown recipes/gpt_brown_char.yaml --seed 1 \\
        --brown-dir ~/.cache/tapeformer/brown --threads 2 [--init philox] [--windows philox] [--decay-embeddings]
    /usr/bin/python3 bench/torch_twin.py --brown recipes/gpt_brown_char.yaml --from-checkpoint CKPT \\
        --steps 20 --compare-to RUN_FOLDER                   # step for step against tapeformer

What follows tapeformer (docs/recipes.md defaults, docs/models.md, optim/, data/batcher.cpp):
- tokenizer: train/run.cpp's CharTokenizer over train.txt: id 0 <unk>, ids 1..n the code points of the
  training text in ascending order; the validation text is encoded with it;
- model: torch_twin.Model (docs/models.md: pre-LN GPT, tanh GELU, tied head, GPT-2 init);
- AdamW (betas, eps, weight_decay) with decay on weight matrices only: embeddings, biases and norms are
  exempt unless optim.decay_embeddings / optim.decay_biases_and_norms;
- schedule (optim/schedule.cpp): step s < warmup: lr (s + 1) / warmup; then cosine (or linear) from lr
  to min_lr over the remaining steps of train.steps;
- clip (optim/clip.cpp): global norm over all gradients, scaled by max_norm / norm when above;
- windows: train.batch_size random windows of seq_len + 1 ids, starts uniform over [0, n - T - 1]:
  --windows torch draws them with torch.randint, --windows philox with tapeformer's generator
  (Rng(training_batch_seed(train.seed)): draw k is philox4x32(seed', 0x5eed, k), start = floor(u (n - T))),
  --windows philox-init with the generator tapeformer used before issue 20, Rng(train.seed), whose
  draws are the initialisation's own (Note [independent streams] in train/run.cpp);
- init: --init torch uses torch.manual_seed(seed) normals, --init philox tapeformer's draws
  (framework/random.cpp: one Rng(train.seed) in the order of docs/models.md's table, Box-Muller with
  u1 = 1 - uniform(2i), u2 = uniform(2i + 1), cos branch only);
- eval: CausalBatcher::sequential: windows s = 0, T, 2T, ... batched B at a time, each id after the
  first predicted once; bits/char = summed nats / (chars * tokens / ids) / ln 2.
B = batch, T = seq_len, C = d_model, V = vocabulary.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

# docs/recipes.md defaults of the keys this twin reads.
DEFAULTS = {
    "model": {"arch": "gpt", "max_seq_len": 256, "d_model": 128, "n_layers": 4, "n_heads": 4, "position": "learned",
              "dropout": 0.0, "tie_embeddings": True, "init_std": 0.02},
    "data": {"corpus": "brown", "tokenizer": "char", "seq_len": 128, "brown_dir": ""},
    "optim": {"name": "adamw", "lr": 0.001, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.1,
              "decay_biases_and_norms": False, "decay_embeddings": False},
    "schedule": {"kind": "cosine", "warmup_steps": 100, "min_lr": 1e-4},
    "train": {"steps": 2000, "batch_size": 16, "grad_accum": 1, "grad_clip": 1.0, "seed": 1337},
}
SUPPORTED = {"model": {"arch": "gpt", "position": "learned", "dropout": 0.0, "tie_embeddings": True},
             "data": {"tokenizer": "char"}, "optim": {"name": "adamw"}, "train": {"grad_accum": 1}}



def data_root(configured=""):
    """The data root as tapeformer finds it (data/root.h): data.root, TAPEFORMER_DATA, XDG, ~/.cache."""
    if configured:
        return configured
    if os.environ.get("TAPEFORMER_DATA"):
        return os.environ["TAPEFORMER_DATA"]
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return os.path.join(xdg if os.path.isabs(xdg) else os.path.expanduser("~/.cache"), "tapeformer")

def load_recipe(path, overrides=()):
    """The recipe over DEFAULTS (keys outside DEFAULTS are left to tapeformer: eval, log, ...)."""
    import yaml
    with open(path) as f:
        given = yaml.safe_load(f) or {}
    r = {s: dict(v) for s, v in DEFAULTS.items()}
    for section, values in given.items():
        if section in r:
            r[section].update({k: v for k, v in values.items() if k in r[section]})
    for item in overrides:  # "section.key=value", as tapeformer's --set
        key, value = item.split("=", 1)
        section, name = key.split(".")
        r[section][name] = yaml.safe_load(value)
    for section, values in SUPPORTED.items():
        for key, value in values.items():
            if r[section][key] != value:
                raise SystemExit(f"twin_brown: {section}.{key} = {r[section][key]!r} is not supported (only {value!r})")
    return r


# ---- tapeformer's generator, vectorised (framework/random.cpp) -------------------------------------

def philox_words(key, counter_hi, counters):
    """philox4x32(key, counter_hi, counter) for an array of counters: (n, 4) uint64 holding 32-bit words."""
    m = np.uint64(0xFFFFFFFF)
    counters = np.asarray(counters, dtype=np.uint64)
    c = [counters & m, counters >> np.uint64(32), np.full_like(counters, counter_hi & 0xFFFFFFFF),
         np.full_like(counters, counter_hi >> 32)]
    k0, k1 = key & 0xFFFFFFFF, key >> 32 & 0xFFFFFFFF
    for _ in range(10):
        p0, p1 = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & m, (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & m]
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c


def training_batch_seed(seed):
    """train::training_batch_seed: Rng(seed).fork(2).seed(), i.e. philox4x32(seed ^ 0xf0f0..., 2, 0)'s
    w0 << 32 | w1 (Note [independent streams] in train/run.cpp)."""
    w = philox_words(seed ^ 0xF0F0F0F0F0F0F0F0, 2, np.array([0], dtype=np.uint64))
    return int(w[0][0]) << 32 | int(w[1][0])


def rng_uniform(seed, first, n):
    """tf::Rng(seed, first).uniform() n times: (n,) float64 in [0, 1)."""
    w = philox_words(seed, 0x5EED, np.arange(first, first + n, dtype=np.uint64))
    bits = (w[0] << np.uint64(32)) | w[1]
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


class PhiloxInit:
    """layers::Init: normal(0, std) draws from one Rng(seed), consumed in parameter order."""

    def __init__(self, seed):
        self.seed, self.counter = seed, 0

    def normal(self, shape, std):
        n = int(np.prod(shape))
        u = rng_uniform(self.seed, self.counter, 2 * n)
        self.counter += 2 * n
        z = np.sqrt(-2.0 * np.log(1.0 - u[0::2])) * np.cos(2.0 * np.pi * u[1::2])
        return torch.from_numpy((std * z).astype(np.float32)).view(*shape)


def philox_init(model, seed, std, n_layers):
    """Overwrites every normal-initialised weight with tapeformer's draws (docs/models.md's order)."""
    init, residual = PhiloxInit(seed), std / math.sqrt(2 * n_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():  # the table's order: embeddings, then block by block
            if name.endswith("embedding.weight") or (name.endswith("weight") and p.dim() == 2):
                p.copy_(init.normal(tuple(p.shape), residual if name.endswith("proj.weight") else std))


# ---- data ------------------------------------------------------------------------------------------

def char_vocabulary(train_text):
    """CharTokenizer::train: {code point: id}, ids 1..n in ascending code point order (0 is <unk>)."""
    return {ch: i + 1 for i, ch in enumerate(sorted(set(train_text)))}


def encode(text, vocab):
    return torch.tensor([vocab.get(ch, 0) for ch in text], dtype=torch.long)


class Windows:
    """Training batches (B, T): random windows of T + 1 ids. `philox`: CausalBatcher's draws."""

    def __init__(self, ids, B, T, kind, seed, counter=0):
        self.ids, self.B, self.T, self.kind = ids, B, T, kind
        self.seed, self.counter = seed, counter
        self.gen = torch.Generator().manual_seed(seed + 100)

    def next(self):
        n, B, T = len(self.ids), self.B, self.T
        if self.kind.startswith("philox"):
            u = rng_uniform(self.seed, self.counter, B)
            self.counter += B
            starts = torch.from_numpy((np.floor(u * (n - T)).astype(np.int64)) % (n - T))
        else:
            starts = torch.randint(0, n - T, (B,), generator=self.gen)
        w = self.ids[starts[:, None] + torch.arange(T + 1)]  # (B, T + 1)
        return w[:, :-1], w[:, 1:]


def lr_at(r, step, total):
    """optim/schedule.cpp."""
    lr, warmup, min_lr, kind = r["optim"]["lr"], r["schedule"]["warmup_steps"], r["schedule"]["min_lr"], r["schedule"]["kind"]
    if step < warmup:
        return lr * (step + 1) / warmup
    if kind == "constant":
        return lr
    if step >= total:
        return min_lr
    progress = (step - warmup) / (total - warmup)
    if kind == "cosine":
        return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
    return min_lr + (lr - min_lr) * (1 - progress)


@torch.no_grad()
def evaluate(model, ids, text_chars, B, T, max_batches=0, stride=0):
    """CausalBatcher::sequential + train/evaluate.cpp: {loss, tokens, bits_per_char}. stride S < T
    (not tapeformer's): windows start every S ids and each scores only its last S targets (the first
    window all), so every prediction after the first window sees at least T - S ids of context."""
    model.eval()
    n, S = len(ids), stride or T
    starts = list(range(0, n - 1, T)) if S == T else [0] + list(range(S, max(n - 1 - (T - S), 1), S))
    padded = torch.cat([ids, torch.zeros(T + 1, dtype=torch.long)])
    valid = torch.cat([torch.ones(n, dtype=torch.bool), torch.zeros(T + 1, dtype=torch.bool)])
    nats, tokens = 0.0, 0
    for number, first in enumerate(range(0, len(starts), B)):
        if max_batches and number == max_batches:
            break
        rows = torch.tensor(starts[first:first + B])
        s = rows[:, None] + torch.arange(T)  # (rows, T)
        inputs, targets = padded[s], padded[s + 1].masked_fill(~valid[s + 1], -100)
        if S != T:  # score only the last S positions of every window but the first
            targets[(rows > 0)[:, None] & (torch.arange(T) < T - S)[None, :]] = -100
        logits = model.logits(inputs)  # (rows, T, V)
        nats += F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), targets.reshape(-1),
                                ignore_index=-100, reduction="sum").item()
        tokens += int((targets != -100).sum())
    model.train()
    loss = nats / tokens
    # bits/char over the scored tokens, each charged the text's chars per id (exact for char ids)
    return {"loss": loss, "tokens": tokens, "eval_stride": S,
            "bits_per_char": nats / (text_chars * tokens / n) / math.log(2)}


# ---- training --------------------------------------------------------------------------------------

def build(r, seed, init, vocab_size, make_model):
    m = r["model"]
    torch.manual_seed(seed)
    model = make_model("gpt", m["d_model"], m["n_layers"], m["n_heads"], m["max_seq_len"], vocab_size)
    if m["init_std"] != 0.02 and init != "philox":
        raise SystemExit("twin_brown: --init torch draws normal(0, 0.02); model.init_std needs --init philox")
    if init == "philox":
        philox_init(model, seed, m["init_std"], m["n_layers"])
    o = r["optim"]
    groups = {True: [], False: []}
    for name, p in model.named_parameters():
        if "embedding" in name:
            decay = o["decay_embeddings"]
        elif name.endswith("weight") and p.dim() == 2:
            decay = True
        else:
            decay = o["decay_biases_and_norms"]
        groups[decay].append((name, p))
    optimizer = torch.optim.AdamW(
        [{"params": [p for _, p in groups[True]], "weight_decay": o["weight_decay"]},
         {"params": [p for _, p in groups[False]], "weight_decay": 0.0}],
        lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], foreach=False)
    names = {id(p): n for n, p in model.named_parameters()}
    return model, optimizer, names


def load_weights(path, model):
    import h5py
    with h5py.File(path, "r") as f, torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(f["model"][name][()]))


def load_checkpoint_state(path, model, optimizer, names):
    """Weights, AdamW moments and step, and the batcher's Philox state from a tapeformer checkpoint."""
    import h5py
    with h5py.File(path, "r") as f:
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(torch.from_numpy(f["model"][name][()]))
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = f["optimizer"][names[id(p)]]
                optimizer.state[p] = {"step": torch.tensor(float(g.attrs["step"])),
                                      "exp_avg": torch.from_numpy(g["exp_avg"][()]).clone(),
                                      "exp_avg_sq": torch.from_numpy(g["exp_avg_sq"][()]).clone()}
        seed, counter, _ = (int(x) for x in f["data/train_batches"][()])
        return int(f.attrs["step"]), seed, counter


def run_brown(a, make_model):
    r = load_recipe(a.brown, a.set or [])
    seed = a.seed if a.seed is not None else r["train"]["seed"]
    r["train"]["seed"] = seed
    brown = a.brown_dir or r["data"]["brown_dir"] or os.path.join(data_root(r["data"].get("root", "")), "brown")
    with open(os.path.join(brown, "train.txt"), encoding="utf-8") as f:
        train_text = f.read()
    with open(os.path.join(brown, "val.txt"), encoding="utf-8") as f:
        val_text = f.read()
    vocab = char_vocabulary(train_text)
    train_ids, val_ids = encode(train_text, vocab), encode(val_text, vocab)
    V = len(vocab) + 1
    B, T, total = r["train"]["batch_size"], r["data"]["seq_len"], r["train"]["steps"]
    model, optimizer, names = build(r, seed, a.init, V, make_model)
    step, batch_seed, counter = 0, training_batch_seed(seed) if a.windows == "philox" else seed, 0
    if a.from_checkpoint:
        step, batch_seed, counter = load_checkpoint_state(a.from_checkpoint, model, optimizer, names)
    elif a.init_from:  # tapeformer train --init-from: the weights only; a fresh optimizer at step 0
        load_weights(a.init_from, model)
    windows = Windows(train_ids, B, T, a.windows, batch_seed, counter)
    end = min(total, step + a.steps) if a.steps else total
    reference = {}
    if a.compare_to:  # tapeformer's metrics.jsonl: the loss of every logged step
        with open(os.path.join(a.compare_to, "metrics.jsonl")) as f:
            for line in f:
                rec = json.loads(line)
                reference[rec["step"]] = rec["train_loss"]
    clip = r["train"]["grad_clip"]
    log = open(a.log, "w") if a.log else None
    started = time.perf_counter()
    while step < end:
        lr = lr_at(r, step, total)
        for group in optimizer.param_groups:
            group["lr"] = lr
        inputs, targets = windows.next()
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model.logits(inputs).reshape(-1, V), targets.reshape(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip).item() if clip > 0 else 0.0
        optimizer.step()
        step += 1
        record = {"step": step, "train_loss": loss.item(), "lr": lr, "grad_norm": norm}
        if step in reference:
            record["tapeformer_loss"] = reference[step]
        if log:
            log.write(json.dumps(record) + "\n")
        if step % a.log_interval == 0 or step in reference or step == end:
            print(json.dumps(record), flush=True)
    result = {"impl": "torch", "mode": "brown", "recipe": a.brown, "seed": seed, "init": a.init, "windows": a.windows,
              "steps": step, "train_s": round(time.perf_counter() - started, 1),
              "decay_embeddings": r["optim"]["decay_embeddings"], "set": a.set or []}
    if a.save:
        torch.save(model.state_dict(), a.save)
    if not a.no_eval:
        result.update(evaluate(model, val_ids, len(val_text), B, T, a.eval_batches, a.eval_stride))
    print(json.dumps(result), flush=True)
    return result
