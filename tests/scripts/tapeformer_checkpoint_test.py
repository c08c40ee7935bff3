#!/usr/bin/python3
"""Test of scripts/tapeformer_checkpoint.py against the program: for GPT and BERT checkpoints of
several configurations, `tapeformer eval --json` and `scripts/tapeformer_checkpoint.py eval --json`
(run in this process) must give the same loss, token count and derived figures, and the Python
tokenizer the ids tapeformer wrote to its token shards for the training text.

    tests/scripts/tapeformer_checkpoint_test.py --tapeformer build/tools/tapeformer --source .

Each configuration trains 3 steps (a real checkpoint, integrity header included), then a copy gets
weights far from the initialisation (as tests/golden/make_golden.py draws them, so every term of the
math shows in the loss) and is resealed; both are evaluated. A sensitivity check makes sure the
tolerance would catch a loader that gets one number wrong. Exits 77 (CTest's skip) without torch,
h5py or numpy.
"""
import argparse
import contextlib
import glob
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: this test needs torch, h5py and numpy (Debian: python3-torch python3-h5py): {e}")
    sys.exit(77)

# tapeformer computes in float32 (unit roundoff 6e-8) and sums each batch's cross-entropy in float32,
# Python in float64 from the same float32 weights: the losses differ by at most 6e-8 relative here
# (docs/checkpoint.md has the figures). 1e-6 leaves over 15 times that for other kernels' summation
# orders (oneDNN on another CPU) and still fails a loader that is off by 0.1 in one element of one
# weight (checked for every configuration below).
RELATIVE_TOLERANCE = 1e-6
PERTURBATION = 0.1

BPE = ["data.tokenizer=bpe", "data.bpe_vocab_size=800"]


def settings(*keys):
    return [arg for key in keys for arg in ("--set", key)]


# name, recipe (d_model 32, 2 layers, 2 heads, seq_len 32: recipes/tiny_*.yaml), its training --set,
# then the eval arguments to compare the reweighted copy with: --batches, and --set for the keys that
# leave the weights' meaning alone (docs/models.md).
CONFIGS = [
    ("gpt_char_learned", "tiny_gpt.yaml", [], [[], ["--batches", "2"]]),
    ("gpt_bpe_rope_gqa", "tiny_gpt.yaml",
     BPE + ["model.position=rope", "model.n_heads=4", "model.n_kv_heads=2", "model.norm=rms",
            "model.feed_forward=swiglu", "model.d_ff=48", "model.bias=false", "model.tie_embeddings=false",
            "model.attention_window=8"],
     [[], settings("model.max_seq_len=64", "data.seq_len=64", "model.rope_scaling=yarn",
                   "model.rope_scaling_factor=2", "model.rope_original_context=32"),
      settings("model.max_seq_len=64", "data.seq_len=64", "model.rope_scaling=ntk", "model.rope_scaling_factor=2"),
      settings("model.rope_scaling=linear", "model.rope_scaling_factor=1.5", "train.batch_size=3")]),
    ("gpt_alibi_sparse", "tiny_gpt.yaml",
     ["model.position=alibi", "model.d_model=24", "model.n_heads=3", "model.attention_window=6",
      "model.attention_global_tokens=2", "model.attention_random_blocks=1", "model.attention_block_size=4",
      "model.attention_random_seed=5", "model.gelu=erf"], [[], settings("model.attention_window=3")]),
    ("gpt_sinusoidal_post_norm", "tiny_gpt.yaml",
     ["model.position=sinusoidal", "model.d_model=33", "model.n_heads=3", "model.pre_norm=false"], [[]]),
    # A pruned model's shape (tapeformer prune): heads differ per layer, head_dim no longer d_model / n_heads.
    ("gpt_per_layer_heads_t5", "tiny_gpt.yaml",
     ["model.n_heads=4", "model.n_kv_heads=2", "model.heads_per_layer=[4, 2]", "model.head_dim=6",
      "model.position=t5", "model.relative_buckets=8", "model.relative_max_distance=16"], [[]]),
    ("gpt_bpe_t5", "tiny_gpt.yaml",
     BPE + ["model.position=t5", "model.relative_buckets=8", "model.relative_max_distance=16"], [[]]),
    # Linear attention (Katharopoulos et al. 2020) beside a softmax layer with RoPE and a window; the
    # loader computes it as the T x T product it equals, tapeformer by chunks and a running state.
    ("gpt_hybrid_linear", "tiny_gpt.yaml",
     ["model.mixer=[linear, attention]", "model.position=rope", "model.attention_window=5"], [[]]),
    ("bert_linear_padding", "tiny_bert.yaml", ["model.mixer=linear"], [[]]),
    # Differential attention (Ye et al. 2024): grouped-query with RoPE, then beside a softmax layer
    # under ALiBi and a window, and bidirectional with padding.
    ("gpt_differential_rope_gqa", "tiny_gpt.yaml",
     ["model.mixer=differential", "model.position=rope", "model.n_heads=4", "model.n_kv_heads=2"], [[]]),
    ("gpt_hybrid_differential_alibi", "tiny_gpt.yaml",
     ["model.mixer=[attention, differential]", "model.position=alibi", "model.n_heads=4",
      "model.attention_window=5"], [[]]),
    ("bert_differential_padding", "tiny_bert.yaml", ["model.mixer=differential", "model.n_heads=2"], [[]]),
    # Mamba (Gu & Dao 2023): the loader runs the scan one step at a time; alone, then as Jamba's
    # 1 attention : 3 Mamba with RoPE on the softmax layer, a smaller state and a longer filter.
    ("gpt_mamba", "tiny_gpt.yaml", ["model.mixer=mamba", "model.position=none"], [[]]),
    ("gpt_jamba_pattern", "tiny_gpt.yaml",
     ["model.n_layers=4", "model.mixer=[attention, mamba, mamba, mamba]", "model.position=rope",
      "model.mamba_state=4", "model.mamba_conv=3", "model.mamba_expand=1"], [[]]),
    ("bert_char_learned", "tiny_bert.yaml", [], [[], ["--batches", "2"]]),
    ("bert_bpe_t5_window", "tiny_bert.yaml",
     BPE + ["model.position=t5", "model.relative_buckets=8", "model.relative_max_distance=16", "model.norm=rms",
            "model.attention_window=5", "model.attention_global_tokens=1", "data.mask_prob=0.3"], [[]]),
    # mask_prob 0.02: rows where nothing is chosen; a window of 4: padded queries that see no key.
    ("bert_rope_gqa_swiglu", "tiny_bert.yaml",
     ["model.position=rope", "model.n_heads=4", "model.n_kv_heads=1", "model.feed_forward=swiglu",
      "model.bias=false", "model.gelu=tanh", "train.batch_size=3", "model.attention_window=4",
      "data.mask_prob=0.02"], [[]]),
]
TRAIN = ["data.corpus=files", "data.train_path=train.txt", "train.steps=3", "schedule.warmup_steps=1",
         "eval.interval=0", "sample.tokens=0", "checkpoint.interval=0", "log.interval=100"]

# Unicode, contractions (also before letters a merge would join to them), runs of spaces and digits,
# a tab, CR LF, VT and FF, "[MASK]" as text, characters the training text lacks (<unk> for the char
# tokenizer), then prose. The training text holds it 100 times, so BPE learns merges of its pieces and
# a chunk split in the wrong place shows in the ids.
TRICKY = ("It's the jury's \"verdict\": they'll say   it's 1,234.50 -- or 99%!\n\tNaïve café, Straße, "
          "東京 and 🙂; don't [MASK] me, I'm sure we've said they're what he'd... ''quoted'' x'y 'S\n"
          "  \n'dot 'the 'real 'very 'made 'llama 'sorted\r\n\x0b\x0c\n")


def run(cmd, cwd):
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def reweighted_copy(src, dst, seed):
    """A copy of the checkpoint with weights ~ N(0, 0.3^2), biases ~ N(0, 0.1^2), norm scales
    ~ 1 + N(0, 0.1^2), resealed so tapeformer reads it."""
    shutil.copyfile(src, dst)
    gen = np.random.default_rng(seed)
    with h5py.File(dst, "r+") as f:
        for name, dataset in f["model"].items():
            noise = gen.standard_normal(dataset.shape)
            is_norm = "ln_" in name or "norm." in name
            if is_norm and name.endswith("weight"):
                value = 1 + 0.1 * noise
            else:
                value = (0.1 if name.endswith("bias") else 0.3) * noise
            dataset[...] = value.astype(np.float32)
    tc.reseal(dst)


def shard_ids(path):
    """The ids of a tapeformer token shard (docs/data.md: 256 int32 header slots, then the ids)."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, width = struct.unpack_from("<iii", data, 0)
    assert (magic, version) == (20261203, 1), f"{path}: not a version 1 shard"
    (count,) = struct.unpack_from("<Q", data, 16)
    return np.frombuffer(data[1024:1024 + count * width], dtype="<u2" if width == 2 else "<i4").tolist()


def training_split(tmp):
    """train.txt's training part by docs/data.md's rule for one file: the last 10% is held out from
    the first line break at or after the 90% mark."""
    with open(os.path.join(tmp, "train.txt"), "rb") as f:
        raw = f.read()
    cut = len(raw) - len(raw) // 10
    nl = raw.find(b"\n", cut)
    if nl != -1 and nl + 1 < len(raw):
        cut = nl + 1
    while cut < len(raw) and raw[cut] & 0xC0 == 0x80:
        cut += 1
    return raw[:cut].decode()


def check_tokenizer(name, ckpt, tmp, text):
    with h5py.File(ckpt.path, "r") as f:
        stored = bytes(f["tokenizer"][()]).decode()
    # The shards tapeformer prepared with this tokenizer (one folder per corpus and tokenizer).
    folders = [d for d in glob.glob(os.path.join(tmp, "data", "cache", "*"))
               if open(os.path.join(d, "tokenizer.txt"), encoding="utf-8").read() == stored]
    assert len(folders) == 1, f"{name}: {len(folders)} shard folders hold this tokenizer"
    expected = shard_ids(os.path.join(folders[0], "train.tokens"))
    train_text = training_split(tmp)
    ids = ckpt.tokenizer.encode(train_text)
    if ids != expected:
        at = next((i for i, (a, b) in enumerate(zip(ids, expected)) if a != b), min(len(ids), len(expected)))
        raise SystemExit(f"FAIL {name}: Python encode differs from tapeformer's at token {at}: "
                         f"{ids[at:at + 8]} vs {expected[at:at + 8]} ({len(ids)} vs {len(expected)} ids)")
    ids = ckpt.tokenizer.encode(text)
    back = ckpt.tokenizer.decode(ids)
    if ckpt.tokenizer.kind == "bpe":
        assert back == text, f"{name}: BPE decode(encode(text)) != text"
    else:  # characters outside the vocabulary come back as <unk>
        known = {chr(c) for c in ckpt.tokenizer.code_points}
        assert back == "".join(c if c in known else "<unk>" for c in text), f"{name}: char decode(encode(text))"
    specials = ckpt.tokenizer.specials
    special_ids = range(ckpt.tokenizer.base_vocab_size, ckpt.tokenizer.vocab_size)
    assert ckpt.tokenizer.decode(special_ids) == "".join(specials), f"{name}: specials decode to their names"


def compare(label, cpp, py):
    """Same counts, loss within the tolerance; the figures derived from it within the same."""
    def close(a, b):
        if a is None or b is None:
            return a is b
        return abs(a - b) <= RELATIVE_TOLERANCE * max(abs(a), abs(b), 1e-12)
    problems = [k for k in ("text_tokens", "tokens") if cpp[k] != py[k]]
    keys = ["loss", "perplexity", "bits_per_char", "unigram_bits_per_char", "baseline_accuracy"]
    problems += [k for k in keys if k in cpp and not close(cpp[k], py[k])]
    if cpp["mlm_accuracy"] is not None:  # one argmax may flip where two logits differ by float32 rounding
        if abs(cpp["mlm_accuracy"] - py["mlm_accuracy"]) * cpp["tokens"] > 1.5:
            problems.append("mlm_accuracy")
    if problems:
        raise SystemExit(f"FAIL {label}: {', '.join(problems)} differ:\n  tapeformer {cpp}\n  python     {py}")


def check_sensitivity(label, ckpt, text, cpp_loss):
    """Off by PERTURBATION in one element of the last norm's scale, the loss must leave the tolerance."""
    name = "ln_f.weight" if "ln_f.weight" in ckpt.state_dict else "mlm_head.norm.weight"
    original = ckpt.state_dict[name]
    ckpt.state_dict[name] = original.clone()
    ckpt.state_dict[name][0] += PERTURBATION
    loss = tc.evaluate(ckpt, text)["loss"]
    ckpt.state_dict[name] = original
    relative = abs(loss - cpp_loss) / cpp_loss
    if relative <= RELATIVE_TOLERANCE:
        raise SystemExit(f"FAIL {label}: a loader off by {PERTURBATION} in {name}[0] moves the loss by only "
                         f"{relative:.1e}, within the tolerance {RELATIVE_TOLERANCE}: the comparison cannot see it")
    return relative


def python_eval(args):
    """`scripts/tapeformer_checkpoint.py eval ... --json`, run in this process (torch is imported once)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = tc.main(["eval"] + args)
    if code != 0:
        raise SystemExit(f"FAIL: tapeformer_checkpoint.py eval {' '.join(args)} exited with {code}")
    return json.loads(out.getvalue())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tapeformer", required=True)
    p.add_argument("--source", required=True, help="the repository (recipes/, scripts/, docs/)")
    a = p.parse_args()
    start = time.time()
    torch.set_num_threads(1)  # tiny matrices: threads cost more than they give, and ctest runs tests side by side
    tapeformer, source = os.path.abspath(a.tapeformer), os.path.abspath(a.source)
    with tempfile.TemporaryDirectory(prefix="tapeformer_checkpoint_test.") as tmp:
        docs = "".join(open(os.path.join(source, "docs", n), encoding="utf-8").read()
                       for n in ("models.md", "checkpoint.md"))
        with open(os.path.join(tmp, "train.txt"), "w", encoding="utf-8", newline="") as f:
            f.write(docs + 100 * TRICKY)
        text = TRICKY + open(os.path.join(source, "README.md"), encoding="utf-8").read()[:600]
        text_file = os.path.join(tmp, "eval.txt")
        with open(text_file, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        print(f"{'checkpoint':<42} {'eval arguments':<44} {'tapeformer loss':>16} {'python loss':>16} {'rel. diff':>9} "
              f"{'perturbed':>9}")
        for number, (name, recipe, train_settings, evals) in enumerate(CONFIGS):
            run([tapeformer, "train", os.path.join(source, "recipes", recipe), f"--set=checkpoint.dir={name}"]
                + settings(*TRAIN, *train_settings), tmp)
            trained = os.path.join(tmp, name, "ckpt_00000003.h5")
            reweighted = os.path.join(tmp, name, "reweighted.h5")
            reweighted_copy(trained, reweighted, seed=number)
            for path, eval_args in [(trained, [])] + [(reweighted, e) for e in evals]:
                args = [path, "--text", text_file, "--json"] + eval_args
                cpp = json.loads(run([tapeformer, "eval"] + args, tmp))
                if path == trained:  # the token shards hold tapeformer's ids of the training text
                    check_tokenizer(name, tc.load(trained), tmp, text)
                py = python_eval(args)
                label = f"{name}/{os.path.basename(path)}"
                shown = " ".join(arg.split(".", 1)[-1] for arg in eval_args if arg != "--set")
                compare(f"{label} {shown}", cpp, py)
                perturbed = None
                if path == reweighted and not eval_args:
                    perturbed = check_sensitivity(label, tc.load(path), text, cpp["loss"])
                print(f"{label:<42} {shown[:44]:<44} {cpp['loss']:>16.12f} {py['loss']:>16.12f} "
                      f"{abs(cpp['loss'] - py['loss']) / cpp['loss']:>9.1e} "
                      f"{'' if perturbed is None else f'{perturbed:.1e}':>9}")
        # A --text that names nothing is refused with exit code 2, as tapeformer refuses it; it once read
        # as an empty text.
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = tc.main(["eval", trained, "--text", os.path.join(tmp, "nowhere.txt")])
        if code != 2 or "does not exist" not in err.getvalue():
            raise SystemExit(f"FAIL: eval --text of a missing file exited with {code}: {err.getvalue()}")
    print(f"ok: {len(CONFIGS)} configurations; the tokenizers (char, bpe) gave the ids of tapeformer's token shards; "
          f"{time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "scripts"))
    import tapeformer_checkpoint as tc  # noqa: E402
    sys.exit(main())
