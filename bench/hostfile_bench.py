#!/usr/bin/env python3
"""gpurun --dry-run on large hostfiles (docs/design.md, Performance: many nodes).

Target: `gpurun --dry-run` with a 1024-node hostfile (the same topology for every node) takes
< 0.2 s, and the time grows linearly with the number of nodes.

For 128, 256, 512 and 1024 nodes of 8 GPUs (hostfile lines `nNNNN slots=8`), it times
`gpurun --dry-run --hostfile FILE --topology share/gpukit/topologies/dgx-a100-like.xml
--master-addr 10.0.0.1 --master-port 29500 python train.py`, text and --json, interleaved in a
fresh random order each round, and prints per size the median wall time, its ratio to the 0.2 s
target, and the time per node. Linear growth shows as the cost of each added node staying flat
from one size to the next (and t(1024)/t(512) near 2 once the fixed cost is small).
--master-addr keeps the resolver out of the measurement: the first host's name would otherwise be
looked up once (one getaddrinfo call, whatever the node count).

Usage: bench/hostfile_bench.py [BUILD_DIR] [--rounds N] [--strict]
BUILD_DIR (default `build`) holds launcher/gpurun; build it Release. Needs python3 >= 3.9 and
Open MPI's mpirun in PATH (gpurun asks `mpirun --version` once per run, which is part of the
time). --strict exits 1 when the 1024-node median misses the target.
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = [128, 256, 512, 1024]
TARGET_S = 0.2


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir", nargs="?", default="build")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()

    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    gpurun = os.path.join(args.build_dir, "launcher", "gpurun")
    topology = os.path.join(source, "share", "gpukit", "topologies", "dgx-a100-like.xml")
    if not os.access(gpurun, os.X_OK):
        sys.exit(f"{gpurun} not found; build first: cmake --build {args.build_dir} --target gpurun gpurun-rank")

    env = dict(os.environ)
    env.pop("SLURM_JOB_ID", None)
    env.pop("SLURM_JOB_NODELIST", None)
    with tempfile.TemporaryDirectory(prefix="gpurun-hostfile-bench-") as tmp:
        commands = {}
        for n in SIZES:
            path = os.path.join(tmp, f"hosts-{n}")
            with open(path, "w") as f:
                f.write("# bench\n")
                for i in range(n):
                    f.write(f"n{i + 1:04d} slots=8\n")
            base = [gpurun, "--dry-run", "--hostfile", path, "--topology", topology, "--master-addr", "10.0.0.1",
                    "--master-port", "29500"]
            commands[(n, "text")] = base + ["python", "train.py"]
            commands[(n, "json")] = base + ["--json", "python", "train.py"]

        def run(argv):
            start = time.perf_counter()
            done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            elapsed = time.perf_counter() - start
            if done.returncode != 0:
                sys.exit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')}")
            return elapsed

        for argv in commands.values():  # warm-up: page cache, mpirun --version
            run(argv)
        times = {key: [] for key in commands}
        keys = list(commands)
        for _ in range(args.rounds):
            random.shuffle(keys)
            for key in keys:
                times[key].append(run(commands[key]))

    print(f"gpurun --dry-run with N-node hostfiles (8 GPUs per node, dgx-a100-like.xml), {args.rounds} rounds, "
          f"median wall time")
    print(f"{'NODES':>5}  {'RANKS':>5}  {'FORMAT':6}  {'MEDIAN':>9}  {'VS 0.2 s':>8}  {'PER NODE':>9}  "
          f"{'ADDED NODE':>10}")
    missed = False
    for fmt in ("text", "json"):
        previous = None
        for n in SIZES:
            median = statistics.median(times[(n, fmt)])
            added = "" if previous is None else f"{(median - previous[1]) / (n - previous[0]) * 1e6:7.1f} us"
            print(f"{n:5d}  {n * 8:5d}  {fmt:6}  {median * 1000:6.1f} ms  {median / TARGET_S:8.2f}  "
                  f"{median / n * 1e6:6.1f} us  {added:>10}")
            previous = (n, median)
            if n == SIZES[-1] and median >= TARGET_S:
                missed = True
        big = statistics.median(times[(SIZES[-1], fmt)])
        half = statistics.median(times[(SIZES[-2], fmt)])
        print(f"       {fmt}: t(1024)/t(512) = {big / half:.2f} (2.00 = linear with no fixed cost)")
    print(f"target: 1024 nodes < {TARGET_S} s: {'missed' if missed else 'met'}")
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
