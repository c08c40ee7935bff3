#!/usr/bin/python3
"""How a training step uses a second core (docs/performance.md, "Threads in a training step").

    scripts/build.sh --target tapeformer && scripts/setup.sh --corpus
    /usr/bin/python3 bench/thread_scaling.py [--recipe recipes/gpt_brown_5min.yaml] [--steps 200] [--rounds 3]
                                             [--threads 2] [--contended]

It trains the recipe for --steps steps (no evaluation, no time budget) under each setting, the
settings alternated within every round so that the machine's drift falls on all of them alike, and
prints the median tokens/s of each and its ratio to one thread:
  1 thread        OMP_NUM_THREADS=1
  N threads, ops  train.thread_split=ops: the threads share each op
  N threads, rows train.thread_split=batch: each thread runs forward and backward on its rows of the
                  batch (the default, auto, where it applies)
  N ranks         mpirun -np N, one thread each, train.grad_accum N at batch_size / N, so the step
                  holds the same rows: data parallel over processes, the figure threads should reach
With --contended, every run has a competing busy process beside it (a pure-Python counting loop).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from contention import COMPETITOR, ROOT, train_tokens_per_second


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--recipe", default="recipes/gpt_brown_5min.yaml")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=16, help="train.batch_size of the one-process settings")
    p.add_argument("--contended", action="store_true", help="a competing busy process beside every run")
    p.add_argument("--no-mpi", action="store_true", help="leave out the N ranks setting")
    a = p.parse_args()
    n = a.threads
    binary = os.path.join(a.build, "tools", "tapeformer")
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",)}
    common = ["log.report=false", f"train.batch_size={a.batch}"]
    settings = [
        ("1 thread", {"OMP_NUM_THREADS": "1"}, common, ()),
        (f"{n} threads, ops", {"OMP_NUM_THREADS": str(n)}, common + ["train.thread_split=ops"], ()),
        (f"{n} threads, rows", {"OMP_NUM_THREADS": str(n)}, common + ["train.thread_split=batch"], ()),
    ]
    mpirun = shutil.which("mpirun")
    if mpirun and not a.no_mpi:
        launcher = (mpirun, "-np", str(n), "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS")
        env = {"OMP_NUM_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        settings.append((f"{n} ranks", env, ["log.report=false", f"train.batch_size={a.batch // n}",
                                             f"train.grad_accum={n}"], launcher))
    tokens = {name: [] for name, *_ in settings}
    print(f"{os.cpu_count()} CPUs; {a.steps} steps of {a.recipe}, {a.batch} rows a step; {a.rounds} rounds"
          f"{'; beside a busy process' if a.contended else ''}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "run")
        for r in range(a.rounds):
            for name, extra, sets, launcher in (settings if r % 2 == 0 else settings[::-1]):
                proc = subprocess.Popen([sys.executable, "-c", COMPETITOR], stdout=subprocess.PIPE,
                                        text=True) if a.contended else None
                tps = train_tokens_per_second(binary, a.recipe, a.steps, dict(base, **extra), folder, sets, launcher)
                if proc:
                    proc.terminate()
                    proc.communicate()
                tokens[name].append(tps)
                print(f"  round {r + 1} {name:18} {tps:9,.0f} tok/s", flush=True)
    one = statistics.median(tokens["1 thread"])
    print(f"\n{'setting':18} {'tok/s (median)':>15} {'vs 1 thread':>12}   rounds")
    for name, *_ in settings:
        m = statistics.median(tokens[name])
        print(f"{name:18} {m:15,.0f} {m / one:12.2f}   " + " ".join(f"{t:,.0f}" for t in tokens[name]))


if __name__ == "__main__":
    main()
