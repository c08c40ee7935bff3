#!/usr/bin/python3
"""How much faster a pruned model evaluates and samples than the model it came from (docs/inspect.md).

    scripts/build.sh --target tapeformer
    /usr/bin/python3 bench/pruned_speed.py CKPT|RUN_DIR [--fractions 0.25 0.5] [--by raw] [--rounds 5]

It prunes the checkpoint with `tapeformer prune --heads F --by BY` for each fraction (into a temporary
folder), then times `tapeformer eval --batches N` and `tapeformer sample --tokens K` on the original and
on each pruned checkpoint, alternating them within every round so that the machine's drift falls on all
alike. It prints the median seconds of each and the ratio pruned / original (below 1 is faster), with
the range over rounds. Process start and checkpoint loading are inside the times; they are the same for
every checkpoint but the smaller ones' loading.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(args):
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("checkpoint")
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--fractions", type=float, nargs="+", default=[0.25, 0.5])
    p.add_argument("--by", default="raw", choices=["importance", "raw", "masked"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--tokens", type=int, default=300)
    a = p.parse_args()
    tool = os.path.join(a.build, "tools", "tapeformer")
    with tempfile.TemporaryDirectory() as tmp:
        models = [("original", a.checkpoint)]
        for f in a.fractions:
            out = os.path.join(tmp, f"pruned_{f}.h5")
            subprocess.run([tool, "prune", a.checkpoint, "--heads", str(f), "--by", a.by, "--out", out,
                            "--batches", str(a.batches)], check=True, stdout=subprocess.DEVNULL)
            models.append((f"pruned {f:g}", out))
        sampling = "bert" not in subprocess.run([tool, "info", a.checkpoint], check=True, capture_output=True,
                                                text=True).stdout.lower()
        tasks = {"eval": lambda m: [tool, "eval", m, "--batches", str(a.batches)]}
        if sampling:
            tasks["sample"] = lambda m: [tool, "sample", m, "--tokens", str(a.tokens), "--seed", "1"]
        seconds = {(t, name): [] for t in tasks for name, _ in models}
        for r in range(a.rounds):
            for t, command in tasks.items():
                for name, path in (models if r % 2 == 0 else models[::-1]):
                    seconds[(t, name)].append(timed(command(path)))
        print(f"{a.checkpoint}: {a.rounds} rounds, eval --batches {a.batches}"
              + (f", sample --tokens {a.tokens}" if sampling else "") + f"; heads removed by --by {a.by}")
        print(f"{'task':8} {'model':14} {'median s':>9} {'ratio':>7} {'range':>13}")
        for t in tasks:
            base = seconds[(t, "original")]
            for name, _ in models:
                s = seconds[(t, name)]
                ratios = [x / y for x, y in zip(s, base)]
                print(f"{t:8} {name:14} {statistics.median(s):9.3f} {statistics.median(ratios):7.3f} "
                      f"{min(ratios):6.3f}-{max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
