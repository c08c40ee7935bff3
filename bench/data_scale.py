#!/usr/bin/python3
"""Corpora of any size (docs/data.md, "Measured"): for each corpus size, the preparation's speed and
peak RSS, and a training run's peak RSS (cold: preparing in-process; warm: mapping the shards), its
start to the first step, and its tokens per second, beside the same figures on Brown in the same
process tree. Corpora are Brown's training text repeated to the size (or --linux's C sources).

    bench/data_scale.py --sizes 6 268 2048 [--tokenizer char|bpe] [--linux ~/.cache/tapeformer/linux] [--old OLD_BINARY]

--old runs a tapeformer built before token shards on Brown, side by side, for the tokens/s ratio.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(argv, stop_at=None):
    """Runs argv; returns (seconds, peak RSS in MB, seconds until a stdout line matched stop_at, stdout)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if first is None and stop_at and re.search(stop_at, line):
            first = time.monotonic() - start
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read()
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)}: exit {proc.returncode}\n{err}")
    return time.monotonic() - start, usage.ru_maxrss / 1024, first, "".join(lines)


def corpus_of(size_mb, work, brown):
    """Brown's training text repeated to about size_mb megabytes."""
    path = os.path.join(work, f"corpus_{size_mb}MB.txt")
    want = int(size_mb * 1e6)
    if os.path.exists(path) and abs(os.path.getsize(path) - want) < 6e6:
        return path
    with open(brown, "rb") as f:
        text = f.read()
    with open(path, "wb") as f:
        written = 0
        while written < want:
            piece = text[: want - written]
            f.write(piece)
            written += len(piece)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tapeformer", default=os.path.join(ROOT, "build/tools/tapeformer"))
    parser.add_argument("--old", help="a tapeformer built before token shards, for the tokens/s peer on Brown")
    parser.add_argument("--sizes", type=float, nargs="+", default=[6, 268])
    parser.add_argument("--linux", help="a folder of C sources (scripts/setup.sh --corpus linux)")
    parser.add_argument("--tokenizer", choices=["char", "bpe"], default="char")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--work", default="/tmp/tapeformer_data_scale")
    root = os.environ.get("TAPEFORMER_DATA") or os.path.expanduser("~/.cache/tapeformer")  # data/root.h
    parser.add_argument("--brown", default=os.path.join(root, "brown/train.txt"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    recipe = os.path.join(ROOT, "recipes/gpt_brown_char.yaml")
    common = ["--set", f"data.tokenizer={args.tokenizer}", "--set", "data.corpus=files"]
    corpora = [(f"{s:g} MB (Brown repeated)", corpus_of(s, args.work, args.brown)) for s in args.sizes]
    if args.linux:
        corpora.append(("Linux C sources", os.path.join(args.linux, "**/*.[ch]")))

    def train_argv(binary, text, cache, run_dir):
        return [binary, "train", recipe, *common, "--set", f"data.train_path={text}", "--set", f"data.cache_dir={cache}",
                "--set", f"checkpoint.dir={run_dir}", "--overwrite", "--set", f"train.steps={args.steps}",
                "--set", "schedule.warmup_steps=2", "--set", "eval.interval=0", "--set", "sample.tokens=0",
                "--set", "checkpoint.interval=0"]

    rows = []
    for label, text in corpora:
        cache = os.path.join(args.work, "cache")
        shutil.rmtree(cache, ignore_errors=True)
        prep_s, prep_rss, _, out = run([args.tapeformer, "prepare", recipe, *common, "--set", f"data.train_path={text}",
                                        "--set", f"data.cache_dir={cache}"], None)
        tokens = re.search(r"tokens\s+(\d+) training, (\d+) validation", out)
        size = re.search(r"\(([\d.]+) MB\)", out)
        mb = float(size.group(1)) if size else float("nan")
        warm_s, warm_rss, warm_first, warm_out = run(train_argv(args.tapeformer, text, cache, os.path.join(args.work, "run")),
                                                     r"^step 1/")
        tok_s = re.findall(r"([\d.]+)k tok/s", warm_out)
        shutil.rmtree(cache, ignore_errors=True)
        _, cold_rss, _, _ = run(train_argv(args.tapeformer, text, cache, os.path.join(args.work, "run")), None)
        rows.append((label, mb, prep_s, mb / prep_s, prep_rss, cold_rss, warm_rss, warm_first,
                     float(tok_s[-1]) if tok_s else float("nan"), int(tokens.group(1)) + int(tokens.group(2))))
        print(f"{label}: {rows[-1]}", file=sys.stderr)

    print(f"\ntokenizer {args.tokenizer}, {os.cpu_count()} cores, {args.steps} steps of recipes/gpt_brown_char.yaml\n")
    print("| corpus | text MB | tokens | prepare s | prepare MB/s | prepare peak RSS MB | train peak RSS MB, cold | warm | warm: start to step 1, s | k tok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, mb, prep_s, rate, prep_rss, cold, warm, first, toks, tokens in rows:
        print(f"| {label} | {mb:.1f} | {tokens} | {prep_s:.2f} | {rate:.0f} | {prep_rss:.0f} | {cold:.0f} | {warm:.0f} | "
              f"{first:.2f} | {toks:.1f} |")
    base = rows[0]
    for row in rows[1:]:
        print(f"\n{row[0]}: warm peak RSS {row[6] - base[6]:+.0f} MB, cold {row[5] - base[5]:+.0f} MB against {base[0]}")
    if args.old:
        brown = corpora[0][1]
        new, old = [], []
        for _ in range(3):  # alternately, so that the machine's drift falls on both
            for binary, into in ((args.tapeformer, new), (args.old, old)):
                cache = os.path.join(args.work, "cache_" + ("new" if binary == args.tapeformer else "old"))
                _, _, _, out = run(train_argv(binary, brown, cache, os.path.join(args.work, "run")), None)
                into.append(float(re.findall(r"([\d.]+)k tok/s", out)[-1]))
        print(f"\ntokens/s on {corpora[0][0]}: shards {sorted(new)[1]:.1f}k, in-memory {sorted(old)[1]:.1f}k "
              f"(medians of 3, alternating): ratio {sorted(new)[1] / sorted(old)[1]:.3f}")


if __name__ == "__main__":
    main()
