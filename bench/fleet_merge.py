#!/usr/bin/env python3
"""gpudoctor fleet at scale: N synthetic node snapshots (this node's own `gpudoctor snapshot`,
renamed per node, with a few odd nodes), merged by `gpudoctor fleet --from DIR`; the median
wall time of several runs against the target (1024 nodes in under 1 s).

Usage: bench/fleet_merge.py [BUILD_DIR] [--nodes N] [--runs R]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default="build", help="build directory (default: build)")
    ap.add_argument("--nodes", type=int, default=1024, help="nodes (default 1024)")
    ap.add_argument("--runs", type=int, default=7, help="timed runs (default 7)")
    args = ap.parse_args()
    gpudoctor = os.path.join(args.build, "doctor", "gpudoctor")
    snap = subprocess.run([gpudoctor, "snapshot"], capture_output=True, text=True)
    if snap.returncode != 0:
        sys.exit(f"gpudoctor snapshot failed ({snap.returncode}): {snap.stderr.strip()}")
    template = json.loads(snap.stdout)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.nodes):
            doc = json.loads(json.dumps(template))
            doc["facts"]["host"]["hostname"] = f"n{i:04}"
            if i % 100 == 7:  # a few odd nodes: an NCCL variable, a small /dev/shm
                doc["facts"]["env"]["variables"]["NCCL_P2P_DISABLE"] = "1"
                doc["facts"]["limits"]["shm"]["bytes"] = 67108864
            path = os.path.join(tmp, f"n{i:04}.json")
            with open(path, "w") as f:
                json.dump(doc, f)
        argv = [gpudoctor, "fleet", "--json", "--from", tmp]
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            out = subprocess.run(argv, capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            if out.returncode not in (0, 1):
                sys.exit(f"gpudoctor fleet failed ({out.returncode}): {out.stderr.strip()}")
        report = json.loads(out.stdout)
        odd = sum(len(d["odd"]) for d in report["drift"])
        median = statistics.median(times)
        verdict = "PASS" if args.nodes < 1024 or median < 1.0 else "MISS"
        print(f"gpudoctor fleet, {args.nodes} snapshots of {len(snap.stdout) // 1024} KiB: median {median * 1000:.0f} ms "
              f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}) over {args.runs} runs; "
              f"{len(report['drift'])} drifting facts, {odd} odd values; target < 1 s for 1024: {verdict}")


if __name__ == "__main__":
    main()
