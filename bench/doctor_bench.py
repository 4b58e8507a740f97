#!/usr/bin/env python3
"""gpudoctor check --quick wall time (docs/design.md, Performance: the third row).

Target: < 0.5 s on a node without GPUs, < 2 s on 8 GPUs. The anchor, `dcgmi diag -r 1`, takes
"seconds" and needs a running DCGM daemon; it is not installed here, so the table prints our
absolute times against the targets.

Two runs, interleaved, medians of N rounds:
  - this machine as it is (no NVIDIA driver here: the driver/gpus probes fail fast, the host
    probes run);
  - a fake 8-GPU node: the test fake libnvidia-ml (BUILD_DIR/tests/libfake_nvml.so) answering
    with eight healthy A100s, so every NVML call of the quick tier is made.

Usage: bench/doctor_bench.py [BUILD_DIR] [--rounds N]
BUILD_DIR (default `build`) must hold doctor/gpudoctor and tests/libfake_nvml.so (build with tests).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def fake_node(count=8):
    buses = ["07", "0f", "47", "4e", "87", "90", "b7", "bd"]
    gpus = []
    for i in range(count):
        gpus.append({
            "bus_id": f"00000000:{buses[i]}:00.0", "name": "NVIDIA A100-SXM4-80GB",
            "uuid": f"GPU-{i:08d}-1111-2222-3333-444444444444", "memory_total": 85899345920,
            "compute_mode": 0, "persistence": 1, "processes": 0,
            "ecc": {"enabled": 1, "corrected": 0, "uncorrected": 0},
            "retired_pages": {"single": 0, "double": 0, "pending": 0},
            "remapped_rows": {"corrected": 0, "uncorrected": 0, "pending": 0, "failure": 0},
            "clock_event_reasons": 1, "pcie": {"gen": 4, "max_gen": 4, "width": 16, "max_width": 16},
            "utilization": 0, "nvlinks": [f"0000:{buses[j]}:00.0" for j in range(count) if j != i],
        })
    return {"driver": "550.54.15", "cuda_driver_version": 12040, "gpus": gpus}


def timed(cmd, env):
    start = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, r.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    doctor = os.path.join(args.build, "doctor", "gpudoctor")
    fake = os.path.abspath(os.path.join(args.build, "tests", "libfake_nvml.so"))
    for path in (doctor, fake):
        if not os.path.exists(path):
            sys.exit(f"doctor_bench: {path} is missing; build {args.build} with tests")
    with tempfile.TemporaryDirectory() as tmp:
        fixture = os.path.join(tmp, "node.json")
        with open(fixture, "w") as f:
            json.dump(fake_node(), f)
        base = dict(os.environ)
        runs = {
            "check --quick, this machine (no GPU)": ([doctor, "check", "--quick"], base, 0.5),
            "check --quick, fake 8-GPU node": ([doctor, "check", "--quick"],
                                               dict(base, GPUKIT_NVML_LIBRARY=fake, FAKE_NVML_FIXTURE=fixture), 2.0),
        }
        times = {k: [] for k in runs}
        codes = {}
        for _ in range(3):
            for cmd, env, _ in runs.values():
                timed(cmd, env)
        for _ in range(args.rounds):
            for name, (cmd, env, _) in runs.items():
                t, rc = timed(cmd, env)
                times[name].append(t)
                codes[name] = rc
    print(f"gpudoctor check wall time, {args.rounds} interleaved rounds, median [min, max]; "
          f"{os.cpu_count()} CPUs")
    print(f"{'what':<40} {'median':>9} {'min':>9} {'max':>9}  target     exit")
    missed = False
    for name, (_, _, target) in runs.items():
        v = times[name]
        med = statistics.median(v)
        ok = med < target
        missed |= not ok
        print(f"{name:<40} {med*1000:7.1f}ms {min(v)*1000:7.1f}ms {max(v)*1000:7.1f}ms  < {target:.1f} s  "
              f"{codes[name]}  {'PASS' if ok else 'MISS'}")
    print("anchor: dcgmi diag -r 1 takes seconds and needs the DCGM daemon (not available here)")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
