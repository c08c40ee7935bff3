#!/usr/bin/python3
"""Training throughput of tapeformer against PyTorch, one command (the performance issue's harness).

    cmake --build build -j2 --target bench_train_step
    /usr/bin/python3 bench/compare_torch.py [--build build] [--repeats 3] [--threads 2] [--quick]

For each config (A-E, see bench/train_step.cpp) it runs build/bench/bench_train_step and
bench/torch_twin.py as subprocesses, alternating them --repeats times (tapeformer first in odd
rounds, PyTorch first in even ones), both with OMP_WAIT_POLICY=PASSIVE and the same thread count
(OMP_NUM_THREADS; PyTorch also torch.set_num_threads), and prints medians: tokens/s, their ratio
against its target, peak RSS, and model FLOP utilisation against the best sgemm GFLOP/s measured in
the same run (oneDNN and OpenBLAS, n = 1024, before and after every config). Then decode tokens/s of
config B (batch 1, greedy, 256 tokens after an 8-token prompt) with and without a KV cache, and
peak RSS of config D's model at seq 1024 .. 8192.

FLOPs per token = 6 N + 12 L C T (N = non-embedding parameters; docs/performance.md).
PyTorch is Debian's python3-torch, installed on demand with apt-get. Its matmuls run in Debian's
OpenBLAS 0.3.21, which picks its kernels by CPU model and falls back to a generic one on CPUs newer
than itself; so before the configs, PyTorch's sgemm is timed with OPENBLAS_CORETYPE unset (OpenBLAS's
own choice), SkylakeX, Cooperlake, Haswell and Zen, and every PyTorch run gets the fastest
(--torch-coretype names one instead). CI does not run this.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"

# name -> (ratio target tapeformer/PyTorch or None, timed steps, warmup steps) for the default run.
CONFIGS = {
    "A": (2.5, 20, 2),
    "B": (1.4, 6, 1),
    "C": (2.0, 20, 2),
    "D": (2.0, 10, 1),
    "E": (None, 1, 1),
}
QUICK_STEPS = {"A": (5, 1), "B": (2, 1), "C": (5, 1), "D": (3, 1), "E": (1, 1)}
MFU_TARGET = 0.75          # config B: model FLOP/s >= 75% of the measured sgemm peak
RSS_TARGET = 0.5           # config B: tapeformer's peak RSS <= 0.5 x PyTorch's
DECODE_TARGET = 450.0      # config B: tokens/s with a KV cache
MEMORY_SEQS = [1024, 2048, 4096, 8192]


def ensure_torch():
    """Debian's python3-torch, installed with apt-get if `import torch` fails."""
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode == 0:
        return
    print("PyTorch missing: apt-get install -y python3-torch", flush=True)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run(sudo + ["apt-get", "install", "-y", "python3-torch"], check=True)


# PyTorch's sgemm (n = 1024, threads from OMP_NUM_THREADS) and the core type OpenBLAS chose, as JSON.
TORCH_SGEMM = r"""
import ctypes, json, os, time, torch
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
core = None
try:
    blas = ctypes.CDLL("libopenblas.so.0")
    blas.openblas_get_corename.restype = ctypes.c_char_p
    core = blas.openblas_get_corename().decode()
except (OSError, AttributeError):
    pass
n = 1024
a, b = torch.randn(n, n), torch.randn(n, n)
for _ in range(3):
    a @ b
start, count = time.perf_counter(), 0
while time.perf_counter() - start < float(os.environ["SGEMM_SECONDS"]):
    a @ b
    count += 1
print(json.dumps({"core": core, "gflops": 2 * n**3 * count / (time.perf_counter() - start) / 1e9}))
"""
TORCH_CORETYPES = ["", "SkylakeX", "Cooperlake", "Haswell", "Zen"]  # "": OpenBLAS's own choice


class Runner:
    def __init__(self, binary, threads, timeout):
        self.binary, self.threads, self.timeout = binary, threads, timeout
        self.env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(threads))
        self.torch_env = dict(self.env)  # plus OPENBLAS_CORETYPE once choose_torch_coretype ran
        self.log = []  # every JSON line, for --output

    def run(self, impl, args):
        """One subprocess; its JSON line, or {"error": ...} when it failed or timed out."""
        if impl == "tapeformer":
            cmd = [self.binary, "--threads", str(self.threads)] + args
        else:
            cmd = [PYTHON, os.path.join(HERE, "torch_twin.py"), "--threads", str(self.threads)] + args
        env = self.env if impl == "tapeformer" else self.torch_env
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {self.timeout} s"}
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not lines:
            return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}"}
        result = json.loads(lines[-1])
        self.log.append(result)
        return result


def median_of(runs, key):
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def fmt(value, spec=",.0f", missing="-"):
    return missing if value is None else format(value, spec)


def alternate(runner, config_args, repeats):
    """Runs both implementations `repeats` times, alternating which goes first."""
    runs = {"tapeformer": [], "torch": [], "rounds": []}  # rounds: (tapeformer, torch) both done
    for r in range(repeats):
        order = ["tapeformer", "torch"] if r % 2 == 0 else ["torch", "tapeformer"]
        done = {}
        for impl in order:
            result = runner.run(impl, config_args)
            if "error" in result:
                print(f"  {impl} {' '.join(config_args)}: {result['error']}", flush=True)
            else:
                runs[impl].append(result)
                done[impl] = result
        if len(done) == 2:
            runs["rounds"].append((done["tapeformer"], done["torch"]))
    return runs


def measure_sgemm(runner, quick, peaks):
    """Appends this measurement's best GFLOP/s (oneDNN or OpenBLAS, n = 1024) to peaks."""
    result = runner.run("tapeformer", ["--sgemm", "--sgemm-seconds", "0.3" if quick else "1.0"])
    if "best_gflops" in result:
        peaks.append(result["best_gflops"])
    return result


def choose_torch_coretype(runner, quick, forced):
    """Times PyTorch's sgemm under each OpenBLAS core type (twice, alternating) and gives every later
    PyTorch run the fastest; with `forced`, that one without timing."""
    if forced is not None:
        runner.torch_env["OPENBLAS_CORETYPE"] = forced
        print(f"PyTorch's OpenBLAS core type: {forced or 'its own choice'} (--torch-coretype)", flush=True)
        return
    best = {}
    for _ in range(2):
        for coretype in TORCH_CORETYPES:
            env = dict(runner.env, OPENBLAS_CORETYPE=coretype, SGEMM_SECONDS="0.3" if quick else "1.0")
            p = subprocess.run([PYTHON, "-c", TORCH_SGEMM], env=env, capture_output=True, text=True)
            if p.returncode != 0 or not p.stdout.strip():
                print(f"  PyTorch sgemm with OPENBLAS_CORETYPE={coretype!r} failed: {p.stderr.strip()[-200:]}")
                continue
            r = json.loads(p.stdout.strip().splitlines()[-1])
            if coretype not in best or r["gflops"] > best[coretype]["gflops"]:
                best[coretype] = r
    if not best:
        return
    print("PyTorch sgemm n=1024 by OpenBLAS core type (best of 2): " + ", ".join(
        f"{c or 'own choice'} ({r['core']}) {r['gflops']:.1f}" for c, r in best.items()) + " GFLOP/s")
    fastest = max(best, key=lambda c: best[c]["gflops"])
    runner.torch_env["OPENBLAS_CORETYPE"] = fastest
    print(f"PyTorch runs with OPENBLAS_CORETYPE={fastest or '(unset)'} ({best[fastest]['core']})", flush=True)


def verdict(ok):
    return "-" if ok is None else ("met" if ok else "not met")


def ratio_of(a, b):
    return a / b if a and b else None


def train_section(runner, a, repeats, began, verdicts):
    """Runs the configs; prints the throughput table. Returns {config: runs}."""
    # The sgemm peak is measured before the first config and after every one, and the best taken:
    # on a shared machine a single measurement may land in a busy moment.
    peaks = []
    first = measure_sgemm(runner, a.quick, peaks)
    print(f"sgemm n={first.get('n')}: oneDNN {fmt(first.get('onednn_gflops'), '.1f')} GFLOP/s, "
          f"OpenBLAS {fmt(first.get('blas_gflops'), '.1f')} GFLOP/s", flush=True)
    results = {}
    for name in a.configs:
        _, steps, warmup = CONFIGS[name]
        if a.quick:
            steps, warmup = QUICK_STEPS[name]
        print(f"config {name}: {steps} steps after {warmup} warm-up, {time.time() - began:.0f} s so far", flush=True)
        results[name] = alternate(runner, ["--config", name, "--steps", str(steps), "--warmup", str(warmup)], repeats)
        measure_sgemm(runner, a.quick, peaks)
    peak = max(peaks) if peaks else None

    def mfu(run_list):
        flops = median_of(run_list, "model_gflops")
        return None if flops is None or not peak else flops / peak

    print(f"\nTraining throughput (medians; fp32; vocab 256; AdamW; {a.threads} threads)")
    print(f"FLOPs/token = 6 N + 12 L C T (N non-embedding params); MFU against the best sgemm of this run: "
          f"{fmt(peak, '.1f')} GFLOP/s (oneDNN/OpenBLAS, n=1024, best of {len(peaks)})")
    head = ["config", "tf tok/s", "torch tok/s", "ratio", "target", "", "tf RSS MB", "torch RSS MB", "RSS ratio",
            "tf MFU", "torch MFU"]
    rows = []
    for name, runs in results.items():
        target = CONFIGS[name][0]
        tf_tps, pt_tps = median_of(runs["tapeformer"], "tokens_per_s"), median_of(runs["torch"], "tokens_per_s")
        tf_rss, pt_rss = median_of(runs["tapeformer"], "peak_rss_mb"), median_of(runs["torch"], "peak_rss_mb")
        ratio = ratio_of(tf_tps, pt_tps)
        met = "" if target is None else verdict(None if ratio is None else ratio >= target)
        if target is not None:
            verdicts.append((f"{name} throughput ratio >= {target} ({fmt(ratio, '.2f')})", met))
        rows.append([name, fmt(tf_tps), fmt(pt_tps), fmt(ratio, ".2f"), "-" if target is None else f">= {target}", met,
                     fmt(tf_rss), fmt(pt_rss), fmt(ratio_of(tf_rss, pt_rss), ".2f"),
                     fmt(mfu(runs["tapeformer"]), ".0%"), fmt(mfu(runs["torch"]), ".0%")])
    print_table(head, rows)
    # Rounds side by side: the two runs of a round are close in time, so on a busy machine their
    # ratio is steadier than either throughput.
    for name, runs in results.items():
        ratios = " ".join(fmt(t["tokens_per_s"] / p["tokens_per_s"], ".2f") for t, p in runs["rounds"])
        print(f"  {name} per-round ratios: {ratios or '-'}; tapeformer tok/s "
              + " ".join(fmt(r["tokens_per_s"]) for r in runs["tapeformer"])
              + "; torch tok/s " + " ".join(fmt(r["tokens_per_s"]) for r in runs["torch"]))

    if "B" in results:
        b = results["B"]
        b_mfu = mfu(b["tapeformer"])
        verdicts.append((f"B MFU >= {MFU_TARGET:.0%} of sgemm peak ({fmt(b_mfu, '.0%')})",
                         verdict(None if b_mfu is None else b_mfu >= MFU_TARGET)))
        rss = ratio_of(median_of(b["tapeformer"], "peak_rss_mb"), median_of(b["torch"], "peak_rss_mb"))
        verdicts.append((f"B peak RSS <= {RSS_TARGET} x PyTorch's ({fmt(rss, '.2f')} x)",
                         verdict(None if rss is None else rss <= RSS_TARGET)))
    return results


def decode_section(runner, quick, verdicts):
    tokens = 64 if quick else 256
    print(f"\nDecode, config B model, batch 1, greedy, {tokens} tokens after an 8-token prompt (tokens/s)", flush=True)
    rows = []
    for cache in (False, True):
        runs = alternate(runner, ["--decode", "--decode-tokens", str(tokens)] + (["--kv-cache"] if cache else []), 1)
        tf = runs["tapeformer"][0] if runs["tapeformer"] else {}
        available = tf.get("available", False)
        tf_text = fmt(tf.get("tokens_per_s"), ",.1f") if available or not tf else "no KV cache yet"
        rows.append(["with KV cache" if cache else "no KV cache", tf_text, fmt(median_of(runs["torch"], "tokens_per_s"), ",.1f")])
        if cache:
            tps = tf.get("tokens_per_s") if available else None
            verdicts.append((f"B decode with KV cache >= {DECODE_TARGET:.0f} tok/s "
                             f"({fmt(tps, '.0f', 'no KV cache yet')})", "met" if tps and tps >= DECODE_TARGET else "not met"))
    print_table(["decode", "tapeformer", "torch"], rows)


def memory_section(runner, results):
    print("\nPeak RSS (MB) of config D's model (C 128, L 2, H 4, batch 1) training at each sequence length", flush=True)
    rows = []
    for seq in MEMORY_SEQS:
        reuse = {2048: "D", 8192: "E"}.get(seq)  # those runs are configs D and E
        if reuse in results:
            runs = results[reuse]
        else:
            runs = alternate(runner, ["--config", "D", "--seq", str(seq), "--steps", "1", "--warmup", "1"], 1)
        tf_rss, pt_rss = median_of(runs["tapeformer"], "peak_rss_mb"), median_of(runs["torch"], "peak_rss_mb")
        rows.append([str(seq), fmt(tf_rss), fmt(pt_rss), fmt(ratio_of(tf_rss, pt_rss), ".2f")])
    print_table(["seq", "tapeformer", "torch", "ratio"], rows)


def print_table(head, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]

    def line(cells):
        return "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"), help="build directory (default build/)")
    p.add_argument("--repeats", type=int, default=3, help="alternated runs per config (default 3)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="a ~2 minute smoke run: 1 round, few steps, 64 decode tokens")
    p.add_argument("--configs", default="ABCDE", help="which configs, e.g. AB (default ABCDE)")
    p.add_argument("--sections", default="train,decode,memory", help="which sections (default all three)")
    p.add_argument("--timeout", type=int, default=900, help="seconds before one subprocess is given up")
    p.add_argument("--output", help="also write every run's JSON line to this file")
    p.add_argument("--torch-coretype", help="OPENBLAS_CORETYPE for PyTorch ('' for OpenBLAS's own choice) "
                   "instead of timing each and taking the fastest")
    a = p.parse_args()
    binary = os.path.join(a.build, "bench", "bench_train_step")
    if not os.path.exists(binary):
        sys.exit(f"{binary} not found: build it first (cmake --build {a.build} -j2 --target bench_train_step)")
    unknown = set(a.configs) - set(CONFIGS)
    if unknown:
        sys.exit(f"--configs: unknown {''.join(sorted(unknown))}; choose from {''.join(CONFIGS)}")
    ensure_torch()
    repeats = 1 if a.quick else a.repeats
    runner = Runner(binary, a.threads, a.timeout)
    began = time.time()
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"tapeformer vs PyTorch, {a.threads} threads, OMP_WAIT_POLICY=PASSIVE, {repeats} alternated run(s) "
          f"per config, load average at start {load} (1, 5, 15 min)", flush=True)

    choose_torch_coretype(runner, a.quick, a.torch_coretype)
    sections = a.sections.split(",")
    verdicts = []
    results = train_section(runner, a, repeats, began, verdicts) if "train" in sections else {}
    if "decode" in sections:
        decode_section(runner, a.quick, verdicts)
    if "memory" in sections:
        memory_section(runner, results)

    print("\nTargets")
    for what, met in verdicts:
        print(f"  {met:8s} {what}")
    print(f"\n{time.time() - began:.0f} s in all")
    if a.output:
        with open(a.output, "w") as f:
            for line in runner.log:
                f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
