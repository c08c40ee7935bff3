#!/usr/bin/python3
"""numpy reads tapeformer's token files as docs/data.md says: `numpy.memmap(path, dtype, offset=1024,
shape=(count,))` on a shard and on an llm.c file that `tapeformer prepare --llmc` wrote gives the ids
of the text, which this test computes itself from the shard's tokenizer.txt (the char tokenizer: id 0
is <unk>, ids 1..n the code points in ascending order) and the split rule of docs/data.md. Both
widths: a small char vocabulary (uint16) and one with ids above 65,535 (int32), and the document index.

    tests/scripts/token_shard_numpy_test.py --tapeformer build/tools/tapeformer --source .

Exits 77 (CTest's skip) without numpy (Debian: python3-numpy; scripts/setup.sh --test installs it).
"""
import argparse
import glob
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as e:
    print(f"SKIP: this test needs numpy (Debian: python3-numpy): {e}")
    sys.exit(77)


def run(cmd, cwd):
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def memmap_shard(path):
    """The ids and document starts of a shard, through numpy.memmap as docs/data.md documents."""
    magic, version, width = np.memmap(path, dtype="<i4", mode="r", shape=(3,))
    assert (magic, version) == (20261203, 1), f"{path}: magic {magic}, version {version}"
    count, documents = np.memmap(path, dtype="<u8", mode="r", offset=16, shape=(2,))
    ids = np.memmap(path, dtype="<u2" if width == 2 else "<i4", mode="r", offset=1024, shape=(int(count),))
    starts_at = (1024 + int(count) * int(width) + 7) // 8 * 8
    starts = np.memmap(path, dtype="<u8", mode="r", offset=starts_at, shape=(int(documents),))
    assert os.path.getsize(path) == starts_at + 8 * int(documents), f"{path}: size does not match its header"
    return ids, starts


def memmap_llmc(path):
    magic, version, count = np.memmap(path, dtype="<i4", mode="r", shape=(3,))
    assert (magic, version) == (20240520, 1), f"{path}: magic {magic}, version {version}"
    assert os.path.getsize(path) == 1024 + 2 * int(count)
    return np.memmap(path, dtype="<u2", mode="r", offset=1024, shape=(int(count),))


def char_ids(tokenizer_txt, text):
    """The char tokenizer's ids of `text`, from its serialised form (data/char_tokenizer.h)."""
    lines = open(tokenizer_txt, encoding="utf-8").read().split("\n")
    assert lines[0] == "tapeformer-tokenizer char 1" and lines[1].startswith("code_points ")
    n = int(lines[1].split()[1])
    code_points = [int(line[2:], 16) for line in lines[2:2 + n]]
    index = {chr(cp): i + 1 for i, cp in enumerate(code_points)}
    return np.array([index.get(c, 0) for c in text], dtype=np.int64)


def english(words, seed):
    vocabulary = ["the", "jury", "said", "it", "did", "find", "that", "many", "of", "voters", "über", "naïve",
                  "city", "was", "in", "a", "manner", "election", "conducted", "Fulton", "£5", "—"]
    state, out = seed, []
    for i in range(words):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        out.append(vocabulary[(state >> 33) % len(vocabulary)])
        if i % 13 == 12:
            out.append(".\n")
    return " ".join(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tapeformer", required=True)
    parser.add_argument("--source", required=True)
    a = parser.parse_args()
    recipe = os.path.join(a.source, "recipes", "tiny_gpt.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        # One file of fewer than ten: the last 10% of the text, from the first line break at or after
        # the 90% mark, is validation (docs/data.md, "Validation split").
        text = english(6000, 3)
        path = os.path.join(tmp, "text.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        cache, llmc = os.path.join(tmp, "cache"), os.path.join(tmp, "llmc")
        run([a.tapeformer, "prepare", recipe, "--set", "data.corpus=files", "--set", f"data.train_path={path}",
             "--set", f"data.cache_dir={cache}", "--llmc", llmc], tmp)
        folder = glob.glob(os.path.join(cache, "*"))[0]
        raw = text.encode()
        mark = len(raw) - len(raw) // 10
        cut = raw.find(b"\n", mark)
        cut = cut + 1 if cut != -1 else mark
        train_text, val_text = raw[:cut].decode(), raw[cut:].decode()
        for split, part in (("train", train_text), ("val", val_text)):
            ids, starts = memmap_shard(os.path.join(folder, f"{split}.tokens"))
            expected = char_ids(os.path.join(folder, "tokenizer.txt"), part)
            assert ids.dtype == np.dtype("<u2"), ids.dtype
            assert np.array_equal(np.asarray(ids, dtype=np.int64), expected), \
                f"{split}: the shard's {len(ids)} ids are not the text's {len(expected)}"
            assert list(starts) == [0], f"{split}: document starts {list(starts)}"
            assert np.array_equal(memmap_llmc(os.path.join(llmc, f"{split}.bin")), ids), f"{split}.bin"
            print(f"ok: {split}.tokens and {split}.bin: {len(ids)} uint16 ids through numpy.memmap")

        # int32 ids: a char vocabulary above 65,536 ids (CJK, Hangul and the supplementary ideographs);
        # ten files, so every tenth is validation and the other nine are nine documents joined by
        # line breaks (docs/data.md).
        letters = [chr(c) for r in ((0x3400, 0x4DC0), (0x4E00, 0xA000), (0xAC00, 0xD7A4), (0x20000, 0x2A6E0))
                   for c in range(*r)]
        docs = os.path.join(tmp, "docs")
        os.makedirs(docs)
        files = []
        for i in range(10):
            files.append("".join(letters[(i * 7919 + k * 31) % len(letters)] for k in range(len(letters) // 4)))
            files[-1] += "".join(letters[i::10])
            with open(os.path.join(docs, f"{i:02d}.txt"), "w", encoding="utf-8") as f:
                f.write(files[-1])
        cache2 = os.path.join(tmp, "cache2")
        run([a.tapeformer, "prepare", recipe, "--set", "data.corpus=files", "--set", f"data.train_path={docs}",
             "--set", f"data.cache_dir={cache2}"], tmp)
        folder = glob.glob(os.path.join(cache2, "*"))[0]
        ids, starts = memmap_shard(os.path.join(folder, "train.tokens"))
        assert ids.dtype == np.dtype("<i4"), ids.dtype
        expected = char_ids(os.path.join(folder, "tokenizer.txt"), "\n".join(files[:9]))
        assert int(expected.max()) > 65535, "the test's vocabulary is too small for int32 ids"
        assert np.array_equal(np.asarray(ids, dtype=np.int64), expected), "the int32 shard's ids are not the text's"
        lengths = [len(f) + 1 for f in files[:8]]
        assert list(starts) == [0] + list(np.cumsum(lengths)), list(starts)
        print(f"ok: a shard of {len(ids)} int32 ids (vocabulary {int(expected.max()) + 1}) in {len(starts)} documents"
              " through numpy.memmap")
    print("PASS")


if __name__ == "__main__":
    main()
