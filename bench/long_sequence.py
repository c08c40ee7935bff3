#!/usr/bin/python3
"""The longest sequence that trains under a memory limit, one process against N ranks of sequence
parallel training with recomputed blocks (docs/distributed.md, "A sequence 4N times longer").

Every run is `tapeformer train recipes/gpt_brown_char.yaml` with RoPE, L layers, batch 1, two steps,
evaluation and sampling off; each process's peak resident set (ru_maxrss, under mpirun per rank) is
printed against the limit:

  1. one process at T0 and at 2 T0, as a user runs it (train.recompute off);
  2. one process at T0 and 2 T0 with train.recompute blocks (what recomputation alone buys);
  3. N ranks, train.sequence_parallel zigzag and train.recompute blocks, at 4 N T0 (or --split-len).

From the two points of 1., a line gives the longest T one process fits under the limit (the fixed
part plus a cost per token), and the split run's T is printed as a multiple of it.

With the defaults (L 16, T0 4096, N 2, limit 700 MiB) one process holds T0 but not 2 T0, and each of
the 2 ranks holds 8 T0 = 32,768; with --layers 24 --limit-mib 900 --split-len 36864 the 2 ranks hold
8.85 times the longest T one process fits (docs/distributed.md). Needs the Brown corpus
(scripts/setup.sh --corpus) and mpirun.

  bench/long_sequence.py [--layers 16] [--t0 4096] [--ranks 2] [--limit-mib 700] [--split-len T]
"""
import json
import os
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from side_by_side import ROOT, arguments, mpirun  # noqa: E402


def child(argv):
    """Under mpirun, one rank: runs the program and prints its peak RSS."""
    code = subprocess.run(argv, stdout=subprocess.DEVNULL).returncode
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux reports KiB
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    print(json.dumps({"rank": rank, "peak_rss_mib": round(peak, 1), "code": code}), flush=True)


def train_args(build, work, name, seq_len, layers, recompute, split):
    sets = {"data.cache_dir": os.path.join(work, "cache"),
            "checkpoint.dir": os.path.join(work, name), "model.position": "rope", "model.n_layers": layers,
            "model.max_seq_len": seq_len, "data.seq_len": seq_len, "train.batch_size": 1, "train.steps": 2,
            "schedule.warmup_steps": 0, "eval.interval": 0, "sample.tokens": 0, "log.report": "false",
            "train.recompute": "blocks" if recompute else "off"}
    if split:
        sets["train.sequence_parallel"] = "zigzag"
    argv = [os.path.join(build, "tools", "tapeformer"), "train", os.path.join(ROOT, "recipes", "gpt_brown_char.yaml")]
    for key, value in sets.items():
        argv += ["--set", f"{key}={value}"]
    return argv


def measure(argv, ranks):
    """Peak RSS (MiB) of each process: one, or each rank in rank order under mpirun (one thread each)."""
    wrapped = [sys.executable, os.path.abspath(__file__), "--child", *argv]
    prefix = mpirun(ranks, 1) if ranks > 1 else []
    out = subprocess.run(prefix + wrapped, capture_output=True, text=True)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or len(rows) != ranks or any(r["code"] != 0 for r in rows):
        sys.exit(f"{' '.join(argv)}: exit {out.returncode}\n{out.stderr}")
    return [r["peak_rss_mib"] for r in sorted(rows, key=lambda r: r["rank"])]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2:])
    o = arguments(__doc__, 1, [("--layers", 16, int), ("--t0", 4096, int), ("--ranks", 2, int),
                               ("--limit-mib", 700.0, float), ("--split-len", 0, int)])
    split_len = o.split_len or 4 * o.ranks * o.t0
    runs = [("one process", 1, o.t0, False), ("one process", 1, 2 * o.t0, False),
            ("one process, recompute", 1, o.t0, True), ("one process, recompute", 1, 2 * o.t0, True),
            (f"{o.ranks} ranks zigzag, recompute", o.ranks, split_len, True)]
    results = []
    with tempfile.TemporaryDirectory() as work:
        for i, (label, ranks, seq_len, recompute) in enumerate(runs):
            peaks = measure(train_args(o.build, work, f"run{i}", seq_len, o.layers, recompute, ranks > 1), ranks)
            fits = max(peaks) <= o.limit_mib
            print(f"{label:<28} T {seq_len:>7,}: peak RSS {', '.join(f'{p:,.0f}' for p in peaks)} MiB "
                  f"({'within' if fits else 'over'} {o.limit_mib:,.0f} MiB)", flush=True)
            results.append({"run": label, "ranks": ranks, "seq_len": seq_len, "peak_rss_mib": peaks, "fits": fits})
    # One process: peak = fixed + per_token T, through the two measured points.
    (a,), (b,) = results[0]["peak_rss_mib"], results[1]["peak_rss_mib"]
    per_token = (b - a) / o.t0
    longest = o.t0 + (o.limit_mib - a) / per_token
    print(f"one process: {per_token * 1024:.1f} KiB per token above {a - per_token * o.t0:.0f} MiB, so it fits "
          f"T {longest:,.0f} under {o.limit_mib:,.0f} MiB; the split run's T {split_len:,} is {split_len / longest:.2f} "
          f"times that (4 N = {4 * o.ranks})")
    print(json.dumps({"bench": "long_sequence", "layers": o.layers, "limit_mib": o.limit_mib, "runs": results,
                      "one_process_longest": round(longest), "split_over_longest": round(split_len / longest, 3)}))


if __name__ == "__main__":
    main()
