#!/usr/bin/python3
"""Ring attention on 2 ranks x 1 thread, zigzag and contiguous, against ops::attention (flash) in one
process x 2 threads, at the same sequence length; causal, float32, forward + backward, run
alternately round after round (docs/distributed.md).

    scripts/build.sh --target bench_ring_attention
    /usr/bin/python3 bench/ring_attention.py [--build build] [--seqs 2048,8192] [--rounds 3]

Prints per length the median milliseconds of each, the ratio to the single process, and per rank
the seconds in kernels and waiting: the load balance of each layout.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from side_by_side import arguments, median, mpirun, run_rounds  # noqa: E402


def main():
    a = arguments(__doc__, 3, [("--seqs", "2048,8192", str), ("--ranks", 2, int)])
    exe = os.path.join(a.build, "bench", "bench_ring_attention")
    for seq in [int(s) for s in a.seqs.split(",")]:
        args = [exe, "--seq", str(seq)]
        res = run_rounds({"single": (args, {"OMP_NUM_THREADS": str(a.ranks)}),
                          "zigzag": (mpirun(a.ranks, 1) + args + ["--layout", "zigzag"], {}),
                          "contiguous": (mpirun(a.ranks, 1) + args + ["--layout", "contiguous"], {})}, a.rounds)
        single = median(res["single"], "ms")
        print(f"T = {seq}: one process x {a.ranks} threads {single:.1f} ms")
        for layout in ("zigzag", "contiguous"):
            ms = median(res[layout], "ms")
            ranks = "; ".join(f"rank {r}: {x['compute_s'] * 1e3:.0f} ms kernels, {x['wait_s'] * 1e3:.0f} ms waiting"
                              for r, x in enumerate(res[layout][-1]["per_rank"]))
            print(f"  ring {layout}: {ms:.1f} ms ({ms / single:.2f}x the single process); {ranks}; "
                  f"{res[layout][-1]['bytes_sent_per_pass'] / 2**20:.1f} MiB sent per rank per pass")


if __name__ == "__main__":
    main()
