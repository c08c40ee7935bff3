#!/usr/bin/python3
"""Training throughput on a quiet and on a shared machine, per OpenMP wait policy (docs/performance.md).

    scripts/build.sh --target tapeformer && scripts/setup.sh --corpus
    /usr/bin/python3 bench/contention.py [--build build] [--recipe recipes/gpt_brown_char.yaml] [--steps 300] [--rounds 3]

It trains the demo recipe for --steps steps under each setting below, once on a quiet machine and
once beside one competing busy process (a pure-Python counting loop, standing in for a browser tab
that keeps a core busy), alternating the settings within every round so that the machine's drift
falls on all of them alike. It prints the median tokens/s per setting, quiet and contended, their
ratio to libgomp's default, and how fast the competitor ran (million loop turns per second) beside
each setting: spinning threads take CPU from the other process too.

The settings are environment variables that libgomp reads when it loads:
  libgomp default   GOMP_SPINCOUNT=300000 (what libgomp does when neither variable is set)
  passive           OMP_WAIT_POLICY=PASSIVE (a waiting thread sleeps at once)
  spin N            GOMP_SPINCOUNT=N (spin N turns, then sleep)
  1 thread          OMP_NUM_THREADS=1
Setting one of them explicitly also stops tapeformer from applying its own default.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SETTINGS = [
    ("libgomp default", {"GOMP_SPINCOUNT": "300000"}),
    ("passive", {"OMP_WAIT_POLICY": "PASSIVE"}),
    ("spin 30000", {"GOMP_SPINCOUNT": "30000"}),
    ("spin 10000", {"GOMP_SPINCOUNT": "10000"}),
    ("spin 3000", {"GOMP_SPINCOUNT": "3000"}),
    ("spin 1000", {"GOMP_SPINCOUNT": "1000"}),
    ("1 thread", {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}),
]

COMPETITOR = r"""
import signal, sys, time
n, start = 0, time.monotonic()
def stop(*_):
    print(n / (time.monotonic() - start) / 1e6, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while True:
    n += 1
"""


def train_tokens_per_second(binary, recipe, steps, env, folder, sets=(), launcher=()):
    """Median-free: the run's own steady tokens/s (from the second step on), read from metrics.jsonl.
    sets: more --set overrides; launcher: what runs the program (mpirun and its arguments)."""
    shutil.rmtree(folder, ignore_errors=True)
    args = [*launcher, binary, "train", recipe]
    for s in ["train.time_budget=0", f"train.steps={steps}", "eval.interval=0", "checkpoint.interval=0",
              f"checkpoint.dir={folder}", "sample.tokens=0", f"log.interval={steps}", *sets]:
        args += ["--set", s]
    subprocess.run(args, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        last = [json.loads(line) for line in f][-1]
    return last["tokens_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--recipe", default="recipes/gpt_brown_char.yaml")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", nargs="+", metavar="SETTING", help="these settings only, e.g. --only passive 'spin 3000'")
    a = p.parse_args()
    settings = [s for s in SETTINGS if not a.only or s[0] in a.only]
    if "libgomp default" not in [name for name, _ in settings]:
        settings.insert(0, SETTINGS[0])  # the ratios are against it
    binary = os.path.join(a.build, "tools", "tapeformer")
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    base["OMP_NUM_THREADS"] = "2"
    tokens = {(name, c): [] for name, _ in settings for c in (False, True)}
    competitor = {name: [] for name, _ in settings}
    alone = []
    print(f"{os.cpu_count()} CPUs; {a.steps} steps of {a.recipe} per run; {a.rounds} rounds", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "run")
        for r in range(a.rounds):
            order = settings if r % 2 == 0 else settings[::-1]
            for contended in (False, True):
                for name, extra in order:
                    env = dict(base, **extra)
                    proc = None
                    if contended:
                        proc = subprocess.Popen([sys.executable, "-c", COMPETITOR], stdout=subprocess.PIPE, text=True)
                    tps = train_tokens_per_second(binary, a.recipe, a.steps, env, folder)
                    tokens[(name, contended)].append(tps)
                    if proc:
                        proc.terminate()
                        competitor[name].append(float(proc.communicate()[0]))
                    print(f"  round {r + 1} {'contended' if contended else 'quiet':9} {name:16} {tps:9,.0f} tok/s", flush=True)
            # The competitor alone, for its own scale.
            proc = subprocess.Popen([sys.executable, "-c", COMPETITOR], stdout=subprocess.PIPE, text=True)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.terminate()
            alone.append(float(proc.communicate()[0]))

    med = {k: statistics.median(v) for k, v in tokens.items()}
    q0, c0 = med[("libgomp default", False)], med[("libgomp default", True)]
    print(f"\ncompetitor alone: {statistics.median(alone):.1f} M turns/s")
    print(f"{'setting':16} {'quiet tok/s':>12} {'vs default':>10} {'contended':>12} {'vs default':>10} "
          f"{'kept':>6} {'competitor':>11}")
    for name, _ in settings:
        q, c = med[(name, False)], med[(name, True)]
        print(f"{name:16} {q:12,.0f} {q / q0:10.2f} {c:12,.0f} {c / c0:10.2f} {c / q:6.2f} "
              f"{statistics.median(competitor[name]):8.1f} M/s")
    print("kept = contended / quiet tokens/s of the same setting; competitor = its loop turns/s beside us")


if __name__ == "__main__":
    main()
