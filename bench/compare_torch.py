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
PyTorch is Debian's python3-torch, installed on demand with apt-get. CI does not run this.
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
    "A": (2.0, 20, 2),
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


class Runner:
    def __init__(self, binary, threads, timeout):
        self.binary, self.threads, self.timeout = binary, threads, timeout
        self.env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(threads))
        self.log = []  # every JSON line, for --output

    def run(self, impl, args):
        """One subprocess; its JSON line, or {"error": ...} when it failed or timed out."""
        if impl == "tapeformer":
            cmd = [self.binary, "--threads", str(self.threads)] + args
        else:
            cmd = [PYTHON, os.path.join(HERE, "torch_twin.py"), "--threads", str(self.threads)] + args
        try:
            p = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=self.timeout)
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


def alternate(runner, config_args, repeats, with_torch=True):
    """Runs both implementations `repeats` times, alternating which goes first."""
    runs = {"tapeformer": [], "torch": []}
    for r in range(repeats):
        order = ["tapeformer", "torch"] if r % 2 == 0 else ["torch", "tapeformer"]
        for impl in order:
            if impl == "torch" and not with_torch:
                continue
            result = runner.run(impl, config_args)
            if "error" in result:
                print(f"  {impl} {' '.join(config_args)}: {result['error']}", flush=True)
            else:
                runs[impl].append(result)
    return runs


def measure_sgemm(runner, quick, peaks):
    """Appends this measurement's best GFLOP/s (oneDNN or OpenBLAS, n = 1024) to peaks."""
    result = runner.run("tapeformer", ["--sgemm", "--sgemm-seconds", "0.3" if quick else "1.0"])
    if "best_gflops" in result:
        peaks.append(result["best_gflops"])
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"), help="build directory (default build/)")
    p.add_argument("--repeats", type=int, default=3, help="alternated runs per config (default 3)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="a ~2 minute smoke run: 1 repeat, few steps")
    p.add_argument("--configs", default="ABCDE", help="which configs, e.g. AB")
    p.add_argument("--timeout", type=int, default=900, help="seconds before one subprocess is given up")
    p.add_argument("--output", help="also write every run's JSON line to this file")
    a = p.parse_args()
    binary = os.path.join(a.build, "bench", "bench_train_step")
    if not os.path.exists(binary):
        sys.exit(f"{binary} not found: build it first (cmake --build {a.build} -j2 --target bench_train_step)")
    ensure_torch()
    repeats = 1 if a.quick else a.repeats
    runner = Runner(binary, a.threads, a.timeout)
    began = time.time()
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"tapeformer vs PyTorch, {a.threads} threads, OMP_WAIT_POLICY=PASSIVE, {repeats} alternated run(s) "
          f"per config, load average at start {load} (1, 5, 15 min)", flush=True)

    # The sgemm peak is measured before and after every config, and the best taken: on a shared
    # machine a single measurement may land in a busy moment.
    peaks = []
    first = measure_sgemm(runner, a.quick, peaks)
    print(f"sgemm n={first.get('n')}: oneDNN {fmt(first.get('onednn_gflops'), '.1f')} GFLOP/s, "
          f"OpenBLAS {fmt(first.get('blas_gflops'), '.1f')} GFLOP/s", flush=True)

    # ---- training throughput ----------------------------------------------------------------------
    results = {}
    for name in a.configs:
        target, steps, warmup = CONFIGS[name]
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
    verdicts = []
    for name, runs in results.items():
        target = CONFIGS[name][0]
        tf_tps, pt_tps = median_of(runs["tapeformer"], "tokens_per_s"), median_of(runs["torch"], "tokens_per_s")
        tf_rss, pt_rss = median_of(runs["tapeformer"], "peak_rss_mb"), median_of(runs["torch"], "peak_rss_mb")
        ratio = tf_tps / pt_tps if tf_tps and pt_tps else None
        met = "" if target is None or ratio is None else ("met" if ratio >= target else "not met")
        if met:
            verdicts.append((f"{name} throughput ratio >= {target}", met))
        rows.append([name, fmt(tf_tps), fmt(pt_tps), fmt(ratio, ".2f"), "-" if target is None else f">= {target}", met,
                     fmt(tf_rss), fmt(pt_rss), fmt(tf_rss / pt_rss if tf_rss and pt_rss else None, ".2f"),
                     fmt(mfu(runs["tapeformer"]), ".0%"), fmt(mfu(runs["torch"]), ".0%")])
    print_table(head, rows)

    if "B" in results:
        b = results["B"]
        b_mfu = mfu(b["tapeformer"])
        verdicts.append((f"B MFU >= {MFU_TARGET:.0%} of sgemm peak ({fmt(b_mfu, '.0%')})",
                         "-" if b_mfu is None else ("met" if b_mfu >= MFU_TARGET else "not met")))
        tf_rss, pt_rss = median_of(b["tapeformer"], "peak_rss_mb"), median_of(b["torch"], "peak_rss_mb")
        rss_ratio = tf_rss / pt_rss if tf_rss and pt_rss else None
        verdicts.append((f"B peak RSS <= {RSS_TARGET} x PyTorch's ({fmt(rss_ratio, '.2f')} x)",
                         "-" if rss_ratio is None else ("met" if rss_ratio <= RSS_TARGET else "not met")))

    # ---- decode -----------------------------------------------------------------------------------
    tokens = 64 if a.quick else 256
    print(f"\nDecode, config B model, batch 1, greedy, {tokens} tokens after an 8-token prompt (tokens/s)")
    decode_rows = []
    for cache in (False, True):
        args = ["--decode", "--decode-tokens", str(tokens)] + (["--kv-cache"] if cache else [])
        runs = alternate(runner, args, 1)
        tf = runs["tapeformer"][0] if runs["tapeformer"] else {}
        tf_text = fmt(tf.get("tokens_per_s"), ",.1f") if tf.get("available", True) else "no KV cache yet"
        pt = median_of(runs["torch"], "tokens_per_s")
        decode_rows.append(["with KV cache" if cache else "no KV cache", tf_text, fmt(pt, ",.1f")])
        if cache:
            tps = tf.get("tokens_per_s") if tf.get("available", False) else None
            verdicts.append((f"B decode with KV cache >= {DECODE_TARGET:.0f} tok/s ({fmt(tps, '.0f', 'no KV cache yet')})",
                             "not met" if tps is None or tps < DECODE_TARGET else "met"))
    print_table(["decode", "tapeformer", "torch"], decode_rows)

    # ---- memory -----------------------------------------------------------------------------------
    print("\nPeak RSS (MB) of config D's model (C 128, L 2, H 4, batch 1) training at each sequence length")
    memory_rows = []
    for seq in MEMORY_SEQS:
        reuse = {2048: "D", 8192: "E"}.get(seq)
        if reuse in results:
            runs = results[reuse]
        else:
            runs = alternate(runner, ["--config", "D", "--seq", str(seq), "--steps", "1", "--warmup", "1"], 1)
        tf_rss, pt_rss = median_of(runs["tapeformer"], "peak_rss_mb"), median_of(runs["torch"], "peak_rss_mb")
        memory_rows.append([str(seq), fmt(tf_rss), fmt(pt_rss), fmt(tf_rss / pt_rss if tf_rss and pt_rss else None, ".2f")])
    print_table(["seq", "tapeformer", "torch", "ratio"], memory_rows)

    print("\nTargets")
    for what, verdict in verdicts:
        print(f"  {verdict:8s} {what}")
    print(f"\n{time.time() - began:.0f} s in all")
    if a.output:
        with open(a.output, "w") as f:
            for line in runner.log:
                f.write(json.dumps(line) + "\n")


def print_table(head, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
