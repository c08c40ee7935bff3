#!/usr/bin/python3
"""Loading a tapeformer checkpoint in Python (docs/checkpoint.md, "Loading a checkpoint in Python"):
its recipe, a PyTorch state_dict, its tokenizer, the model as an nn.Module, and `tapeformer eval`'s
figures computed again in PyTorch.

    import tapeformer_checkpoint as tc                    # with scripts/ on sys.path
    ckpt = tc.load("runs/tiny_gpt/ckpt_00000020.h5")
    ckpt.recipe["model"]["d_model"]                       # 32: every key of the resolved recipe
    ckpt.state_dict["blocks.0.attn.qkv.weight"]           # torch.float32, (96, 32)
    ids = ckpt.tokenizer.encode("The jury")               # the ids tapeformer gives
    model = ckpt.model()                                  # tapeformer_model.Model, float64, eval mode
    tc.evaluate(ckpt, text)["loss"]                       # what `tapeformer eval --text` prints

    python3 scripts/tapeformer_checkpoint.py info CKPT
    python3 scripts/tapeformer_checkpoint.py eval CKPT --text FILE [--batches N] [--set KEY=VALUE]... [--dtype float32] [--json]
    python3 scripts/tapeformer_checkpoint.py encode CKPT --text FILE

CKPT is a checkpoint file or a run folder (its newest checkpoint); FILE a UTF-8 file or a folder of
them, as tapeformer reads it. Errors go to stderr with exit code 2.

Needs h5py, numpy and torch (Debian: python3-h5py, python3-torch); the tokenizer alone needs nothing
(tapeformer_tokenizer.py). B = batch, T = seq_len, V = vocabulary size.
"""
import argparse
import json
import math
import os
import re
import sys
import zlib
from collections import Counter

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tapeformer_model import Model, ModelConfig, Rng, UnsupportedConfig  # noqa: E402
from tapeformer_tokenizer import tokenizer_from_string  # noqa: E402

FORMAT_VERSION = 1
IGNORE = -100  # a target the loss skips


class CheckpointError(ValueError):
    """A file this module cannot read as a tapeformer checkpoint, or a refused --set."""


# ---- the file ------------------------------------------------------------------------------------

HEADER_BYTES = 512
MAGIC = b"tapeformer checkpoint\n"
BODY_START = len(MAGIC) + len("header_crc32 12345678\n")  # the header's own checksum covers the bytes after
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _payload(f):
    """(bytes, crc32) of the file from byte 512 on, read in 1 MiB pieces."""
    f.seek(HEADER_BYTES)
    size, crc = 0, 0
    while piece := f.read(1 << 20):
        size, crc = size + len(piece), zlib.crc32(piece, crc)
    return size, crc


def verify_integrity(path):
    """The integrity header's checks (docs/checkpoint.md): a file without one (HDF5 data at byte 0)
    passes; one with a header must match its length and both crc32s."""
    with open(path, "rb") as f:
        header = f.read(HEADER_BYTES)
        if header.startswith(HDF5_SIGNATURE):
            return
        if not header.startswith(MAGIC) or len(header) < HEADER_BYTES:
            raise CheckpointError(f"{path}: neither HDF5 data nor a tapeformer integrity header at byte 0")
        lines = header.rstrip(b"\0").decode("ascii", "replace").split("\n")
        fields = dict(line.split(" ", 1) for line in lines if " " in line)  # "payload_bytes" -> "10485248"
        if fields.get("header_crc32") != f"{zlib.crc32(header[BODY_START:]):08x}":
            raise CheckpointError(f"{path}: its integrity header is damaged (the header's own checksum does not match)")
        if fields.get("version") != "1" or fields.get("payload_offset") != str(HEADER_BYTES):
            raise CheckpointError(f"{path}: integrity header version {fields.get('version')} is not supported (1 is)")
        size, crc = _payload(f)
        if str(size) != fields.get("payload_bytes"):
            raise CheckpointError(f"{path}: {size} bytes after the integrity header, the header says "
                                  f"{fields.get('payload_bytes')}: truncated or appended to")
        if f"{crc:08x}" != fields.get("payload_crc32"):
            raise CheckpointError(f"{path}: checksum mismatch: the file was altered or damaged after it was written")


def reseal(path):
    """A new integrity header for a checkpoint edited on purpose (h5py mode 'r+' keeps the old one,
    which tapeformer then refuses): tf::reseal_hdf5_file in Python."""
    with open(path, "r+b") as f:
        if f.read(HEADER_BYTES + len(HDF5_SIGNATURE))[HEADER_BYTES:] != HDF5_SIGNATURE:
            raise CheckpointError(f"cannot reseal '{path}': its HDF5 data does not start at byte {HEADER_BYTES}")
        size, crc = _payload(f)
        body = f"version 1\npayload_offset {HEADER_BYTES}\npayload_bytes {size}\npayload_crc32 {crc:08x}\n".encode()
        body = body.ljust(HEADER_BYTES - BODY_START, b"\0")
        f.seek(0)
        f.write(MAGIC + f"header_crc32 {zlib.crc32(body):08x}\n".encode() + body)


def _unquote(text):
    """A YAML double-quoted scalar as yaml-cpp writes one (escapes of YAML 1.2, section 5.7)."""
    escapes = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r", "e": "\x1b",
               " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029"}
    out, i, body = [], 0, text[1:-1]
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        kind = body[i + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(kind)
        out.append(chr(int(body[i + 2:i + 2 + width], 16)) if width else escapes[kind])
        i += 2 + (width or 0)
    return "".join(out)


def parse_scalar(text):
    """A plain or double-quoted scalar of the stored recipe (bool, int, float or str), or a flow list of
    them such as model.heads_per_layer's [4, 3, 2, 4] or model.mixer's [attention, linear]."""
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return _unquote(text)
    if len(text) >= 2 and text[0] == "[" and text[-1] == "]":
        return [parse_scalar(item.strip()) for item in text[1:-1].split(",") if item.strip()]
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_recipe(text):
    """The stored recipe (Recipe::to_yaml: sections of `key: value` lines) -> {section: {key: value}}."""
    recipe, section = {}, None
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        if line.startswith("  ") and section is not None and ": " in line:
            key, _, value = line.strip().partition(": ")
            section[key] = parse_scalar(value)
        elif not line.startswith(" ") and line.endswith(":"):
            section = recipe.setdefault(line[:-1], {})
        else:
            raise CheckpointError(f"/recipe line {number}: '{line[:80]}' is not the form tapeformer writes")
    return recipe


# `--set` keys that leave the weights' meaning alone (inference_settable in train/resume_changes.cpp).
SETTABLE = ("model.max_seq_len", "model.attention_window", "data.seq_len", "train.batch_size", "model.rope_scaling",
            "model.rope_scaling_factor", "model.rope_original_context", "model.yarn_alpha", "model.yarn_beta")


def apply_settings(recipe, settings):
    """eval's --set KEY=VALUE, with the same keys accepted."""
    for setting in settings:
        key, sep, text = setting.partition("=")
        if not sep or key not in SETTABLE:
            raise CheckpointError(f"--set {setting}: only KEY=VALUE with KEY one of {', '.join(SETTABLE)}")
        section, name = key.split(".")
        old, value = recipe[section][name], parse_scalar(text)
        if isinstance(old, float) and type(value) is int:
            value = float(value)
        if type(value) is not type(old):
            raise CheckpointError(f"--set {setting}: expected a {type(old).__name__} like the stored {old!r}")
        if key == "model.max_seq_len" and value != old and recipe["model"]["position"] == "learned":
            raise CheckpointError(f"--set {setting}: a learned position table has no rows beyond its {old}")
        recipe[section][name] = value
    if recipe["data"]["seq_len"] > recipe["model"]["max_seq_len"]:
        raise CheckpointError(f"data.seq_len ({recipe['data']['seq_len']}) exceeds model.max_seq_len "
                              f"({recipe['model']['max_seq_len']})")


class Checkpoint:
    """What load() returns: path, attrs (step, tokens_seen, run_id, ...), recipe ({section: {key:
    value}}), tokenizer, state_dict (name -> float32 tensor), config (tapeformer_model.ModelConfig)."""

    def __init__(self, path, attrs, recipe, tokenizer, state_dict):
        self.path, self.attrs, self.recipe, self.tokenizer, self.state_dict = path, attrs, recipe, tokenizer, state_dict
        self.config = ModelConfig.from_dict(dict(recipe["model"], vocab_size=tokenizer.vocab_size))

    @property
    def step(self):
        return int(self.attrs["step"])

    def model(self, dtype=torch.float64):
        """The model with the checkpoint's weights, in eval mode (dropout off), computing in dtype."""
        model = Model(self.config).to(dtype)
        expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
        stored = {name: tuple(t.shape) for name, t in self.state_dict.items()}
        problems = [f"missing parameter '{n}' {s}" for n, s in expected.items() if n not in stored]
        problems += [f"unexpected parameter '{n}'" for n in stored if n not in expected]
        problems += [f"parameter '{n}' is {stored[n]} in the checkpoint, {s} in the recipe's model"
                     for n, s in expected.items() if n in stored and stored[n] != s]
        if problems:
            raise CheckpointError(f"{self.path}: the checkpoint does not match its recipe's model:\n  "
                                  + "\n  ".join(problems))
        model.load_state_dict(self.state_dict)
        return model.eval()


def load(path, settings=()):
    """Reads a checkpoint file (or a run folder's newest) as `tapeformer eval` does; settings: --set."""
    if os.path.isdir(path):  # its newest ckpt_<step, 8 or more digits>.h5
        steps = {int(m[1]): name for name in os.listdir(path) if (m := re.fullmatch(r"ckpt_(\d{8,})\.h5", name))}
        if not steps:
            raise CheckpointError(f"{path}: a folder without checkpoints (ckpt_<step>.h5)")
        path = os.path.join(path, steps[max(steps)])
    verify_integrity(path)
    with h5py.File(path, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        if attrs.get("format_version") != FORMAT_VERSION:
            raise CheckpointError(f"{path}: checkpoint format {attrs.get('format_version')} is not supported "
                                  f"(this module reads format {FORMAT_VERSION})")
        missing = [name for name in ("recipe", "tokenizer", "model") if name not in f]
        if missing:
            raise CheckpointError(f"{path}: not a tapeformer checkpoint (no /{', /'.join(missing)})")
        recipe = parse_recipe(bytes(f["recipe"][()]).decode())
        tokenizer = tokenizer_from_string(bytes(f["tokenizer"][()]).decode())
        state_dict = {}
        for name, dataset in f["model"].items():
            value = dataset[()]
            if value.dtype != np.float32 or not np.isfinite(value).all():
                raise CheckpointError(f"{path}: parameter '{name}' is {value.dtype} or holds a non-finite value")
            state_dict[name] = torch.from_numpy(value)
    apply_settings(recipe, settings)
    return Checkpoint(path, attrs, recipe, tokenizer, state_dict)


# ---- evaluation, exactly (docs/models.md, "Evaluation, exactly") ------------------------------

def read_text(path):
    """data::read_text: a UTF-8 file, or a folder's regular files sorted by name, joined by '\n'."""
    if not os.path.exists(path):  # not an empty text: tapeformer refuses it too
        raise FileNotFoundError(f"read_text: '{path}' does not exist (looked for {os.path.abspath(path)}; "
                                "relative paths start from the current folder)")
    files = sorted(os.path.join(path, n) for n in os.listdir(path)) if os.path.isdir(path) else [path]
    texts = []
    for file in files:
        if os.path.isfile(file):
            with open(file, "rb") as f:
                texts.append(f.read().decode("utf-8"))  # strict: tapeformer refuses invalid UTF-8 too
    return "\n".join(texts)


def causal_batches(ids, B, T):
    """CausalBatcher::sequential: windows s = 0, T, 2T, ...; inputs ids[s .. s+T), targets shifted by
    one; past the end input 0, no target. Yields (inputs, targets), (rows, T) int64, rows <= B."""
    n, cursor = len(ids), 0
    while cursor + 1 < n:
        rows = min(B, (n - 1 - cursor + T - 1) // T)
        inputs, targets = torch.zeros(rows, T, dtype=torch.long), torch.full((rows, T), IGNORE, dtype=torch.long)
        for b in range(rows):
            window = ids[cursor:cursor + T + 1]
            inputs[b, :min(T, len(window))] = torch.tensor(window[:T])
            targets[b, :len(window) - 1] = torch.tensor(window[1:])
            cursor += T
        yield inputs, targets


def masked_batches(ids, B, T, seed, tokenizer, mask_prob):
    """MaskedLmBatcher::sequential: rows [CLS] ids[s .. s+L) [SEP] [PAD]..., L = T - 2, masked by the
    training rule with its own Philox generator. Yields (inputs, targets, key_padding), (rows, T)."""
    pad, mask, cls, sep = (tokenizer.id_of(s) for s in ("[PAD]", "[MASK]", "[CLS]", "[SEP]"))
    special = set(tokenizer.special_ids()) | {pad, mask, cls, sep}
    ordinary = [i for i in range(tokenizer.vocab_size) if i not in special]
    rng, L, n, cursor = Rng(seed), T - 2, len(ids), 0
    while cursor < n:
        rows = min(B, (n - cursor + L - 1) // L)
        inputs, targets = [[pad] * T for _ in range(rows)], [[IGNORE] * T for _ in range(rows)]
        key_padding = torch.zeros(rows, T)
        for b in range(rows):
            window = ids[cursor:cursor + L]
            cursor += L
            row, target = inputs[b], targets[b]
            row[0], row[1:len(window) + 1], row[len(window) + 1] = cls, window, sep
            key_padding[b, :len(window) + 2] = 1
            candidates = [t for t in range(1, len(window) + 1) if row[t] not in special]
            chosen = [t for t in candidates if rng.uniform() < mask_prob]
            if not chosen and candidates:
                chosen = [candidates[rng.uniform_int(len(candidates))]]
            for t in chosen:
                target[t] = row[t]
                u = rng.uniform()
                if u < 0.8:
                    row[t] = mask
                elif u < 0.9:
                    row[t] = ordinary[rng.uniform_int(len(ordinary))]
        yield torch.tensor(inputs), torch.tensor(targets), key_padding


def unigram_bits_per_char(text):
    """The entropy, in bits, of the text's code-point frequencies: GPT's floor."""
    n = len(text)
    return -sum(k / n * math.log2(k / n) for k in Counter(text).values())


@torch.no_grad()
def evaluate(ckpt, text, max_batches=0, dtype=torch.float64):
    """`tapeformer eval CKPT --text FILE [--batches N] --json`'s figures, computed in dtype."""
    model, r = ckpt.model(dtype), ckpt.recipe
    B, T = r["train"]["batch_size"], r["data"]["seq_len"]
    ids = ckpt.tokenizer.encode(text)
    V = ckpt.tokenizer.vocab_size
    bert = ckpt.config.arch == "bert"
    if bert:
        batches = masked_batches(ids, B, T, r["train"]["seed"] + 1, ckpt.tokenizer, r["data"]["mask_prob"])
    elif len(ids) < 2:
        raise CheckpointError(f"the text is too short to evaluate ({len(ids)} tokens)")
    else:
        batches = ((inputs, targets, None) for inputs, targets in causal_batches(ids, B, T))
    nats, tokens, correct, counts = 0.0, 0, 0, Counter()
    for number, (inputs, targets, key_padding) in enumerate(batches):
        if max_batches and number == max_batches:
            break
        logits = model(inputs, None if key_padding is None else key_padding.to(dtype)).reshape(-1, V)  # (B T, V)
        targets = targets.reshape(-1)
        nats += F.cross_entropy(logits, targets, ignore_index=IGNORE, reduction="sum").item()
        scored = targets != IGNORE
        tokens += int(scored.sum())
        correct += int((logits[scored].argmax(-1) == targets[scored]).sum())  # ties: the lowest id
        counts.update(targets[scored].tolist())
    loss = nats / tokens if tokens else math.nan
    result = {"text_tokens": len(ids), "tokens": tokens, "loss": loss, "perplexity": math.exp(loss),
              "bits_per_char": None, "mlm_accuracy": None}
    if bert:
        result["mlm_accuracy"] = correct / tokens if tokens else None
        result["baseline_accuracy"] = max(counts.values()) / tokens if tokens else 0.0
    else:  # Note [bits per character] in train/evaluate.cpp
        result["bits_per_char"] = nats / (len(text) * tokens / len(ids)) / math.log(2)
        result["unigram_bits_per_char"] = unigram_bits_per_char(text)
    return result


# ---- the command line ----------------------------------------------------------------------------

def info(ckpt):
    model = ckpt.config
    count = sum(t.numel() for t in ckpt.state_dict.values())
    lines = [f"checkpoint   {ckpt.path} (step {ckpt.step}, written {ckpt.attrs.get('created', '?')})",
             f"tokenizer    {ckpt.tokenizer.kind}, vocabulary {ckpt.tokenizer.vocab_size}",
             f"model        {model.arch}, {count} parameters in {len(ckpt.state_dict)} tensors", "", "recipe model:"]
    lines += [f"  {k}: {v}" for k, v in ckpt.recipe["model"].items()]
    return "\n".join(lines)


def _batches(text):
    """--batches as tapeformer eval takes it: a whole number in [0, 2^40]."""
    n = int(text) if re.fullmatch(r"\d+", text) else -1
    if not 0 <= n <= 1 << 40:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, {1 << 40}], got {text}")
    return n


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = p.add_subparsers(dest="command", required=True)
    for name, help_text in (("info", "describe a checkpoint"), ("eval", "loss on a text, as tapeformer eval"),
                            ("encode", "the token ids of a text, one line")):
        c = commands.add_parser(name, help=help_text)
        c.add_argument("checkpoint", help="checkpoint file (.h5), or a run folder for its newest")
        if name != "info":
            c.add_argument("--text", required=True, help="UTF-8 text file or folder")
        if name == "eval":
            c.add_argument("--batches", type=_batches, default=0, help="at most this many batches; 0: the whole text")
            c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as tapeformer eval --set")
            c.add_argument("--dtype", choices=["float64", "float32"], default="float64")
            c.add_argument("--json", action="store_true", help="one JSON object with every figure")
    a = p.parse_args(argv)
    try:
        ckpt = load(a.checkpoint, getattr(a, "set", ()))
        if a.command == "info":
            print(info(ckpt))
        elif a.command == "encode":
            print(" ".join(map(str, ckpt.tokenizer.encode(read_text(a.text)))))
        else:
            result = evaluate(ckpt, read_text(a.text), a.batches, getattr(torch, a.dtype))
            if a.json:
                print(json.dumps(dict(checkpoint=ckpt.path, step=ckpt.step, text=a.text, **result)))
            else:
                print("\n".join(f"{k:<22} {v}" for k, v in result.items()))
    except (CheckpointError, UnsupportedConfig, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
