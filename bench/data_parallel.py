#!/usr/bin/python3
"""Data-parallel training on one machine: 1 process x 2 threads against 2 ranks x 1 thread (mpirun),
on configs A and B (bench/bench_configs.h), run alternately round after round (docs/distributed.md).

    scripts/build.sh --target bench_data_parallel
    /usr/bin/python3 bench/data_parallel.py [--build build] [--configs AB] [--rounds 5] [--steps 20]

Prints per config the median global tokens/s of each, their ratio, and the 2-rank run's seconds per
step, seconds per step waiting for all-reduces after backward, gradient bytes per step and the time
of one blocking all-reduce of all gradients.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from side_by_side import arguments, median, mpirun, run_rounds  # noqa: E402


def main():
    a = arguments(__doc__, 5, [("--configs", "AB", str), ("--steps", 20, int)])
    exe = os.path.join(a.build, "bench", "bench_data_parallel")
    for config in a.configs:
        args = [exe, "--config", config, "--steps", str(a.steps)]
        res = run_rounds({"1x2": (args, {"OMP_NUM_THREADS": "2"}),
                          "2x1": (mpirun(2, 1) + args, {})}, a.rounds)
        one, two = median(res["1x2"], "tokens_per_s"), median(res["2x1"], "tokens_per_s")
        last = res["2x1"][-1]
        print(f"config {config}: 1 process x 2 threads {one:.0f} tokens/s, 2 ranks x 1 thread {two:.0f} tokens/s, "
              f"ratio {two / one:.3f}; 2 ranks: {median(res['2x1'], 'step_s') * 1e3:.1f} ms/step, waiting "
              f"{median(res['2x1'], 'least_wait_s_per_step') * 1e3:.2f} ms/step after backward (the most waiting "
              f"rank {median(res['2x1'], 'wait_s_per_step') * 1e3:.2f} ms), "
              f"{last['bytes_per_step'] / 2**20:.2f} MiB of gradients per step in {last['buckets']} buckets "
              f"({last['buckets_during_backward']:.1f} started during backward), one blocking all-reduce of them "
              f"{median(res['2x1'], 'allreduce_s') * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
