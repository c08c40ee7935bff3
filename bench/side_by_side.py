#!/usr/bin/python3
"""Runs benchmark commands alternately, round after round, so that a noisy machine's drift falls on
all of them alike, and collects the JSON line each prints. Shared by bench/data_parallel.py and
bench/ring_attention.py; bench/long_sequence.py uses its arguments and mpirun."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mpirun(ranks, threads):
    """The mpirun prefix for `ranks` ranks of `threads` threads each (as root too: CI runs as root)."""
    exe = shutil.which("mpirun")
    if exe is None:
        sys.exit("mpirun not found: run scripts/setup.sh (openmpi-bin)")
    extra = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return [exe, *extra, "--oversubscribe", "--bind-to", "none", "-np", str(ranks), "-x", f"OMP_NUM_THREADS={threads}"]


def run_rounds(commands, rounds):
    """commands: {label: (argv, env overrides)}. Returns {label: [parsed JSON line per round]}."""
    results = {label: [] for label in commands}
    for r in range(rounds):
        for label, (argv, env) in commands.items():
            out = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"{label}: exit {out.returncode}\n{out.stderr}")
            line = [l for l in out.stdout.splitlines() if l.startswith("{")][-1]
            results[label].append(json.loads(line))
            print(f"round {r + 1} {label}: {line}", file=sys.stderr)
    return results


def median(rows, key):
    return statistics.median(row[key] for row in rows)


def arguments(doc, rounds, extra):
    """Parses --build, --rounds and the script's own options (extra: [(flag, default, type)])."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=rounds)
    for flag, default, kind in extra:
        p.add_argument(flag, default=default, type=kind)
    return p.parse_args()
