#!/usr/bin/env python3
"""gpudoctor fleet at scale: N synthetic node snapshots (this node's own `gpudoctor snapshot`,
renamed per node, with a few odd nodes), merged by `gpudoctor fleet --from DIR`; the median
wall time of several runs against the target (1024 nodes in under 1 s).

With --launch, the same snapshots come back as a launch would bring them: `gpudoctor fleet -H
n0000,...` runs gpurun, whose `mpirun` (a stand-in on PATH that answers --version as Open MPI
4.1.4 and prints what the nodes would send: each snapshot framed, in Open MPI's marked pieces
of up to 4 KiB, the nodes' pieces interleaved) is the only fake; gpurun's plan for N hosts, the
reading of the frames and the merge are timed together.

Usage: bench/fleet_merge.py [BUILD_DIR] [--nodes N] [--runs R] [--launch]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

FRAME_PAYLOAD = 900  # doctor/fleet/answers.hpp


def frames(rank, payload):
    """The frames a node's side writes (doctor/fleet/answers.cpp, frame_answer)."""
    data = payload.replace("<", "\\u003c").encode()
    total = max(1, (len(data) + FRAME_PAYLOAD - 1) // FRAME_PAYLOAD)
    out = b""
    for seq in range(total):
        part = data[seq * FRAME_PAYLOAD:(seq + 1) * FRAME_PAYLOAD]
        out += b"@gpudoctor-fleet %d snapshot %d %d %d %08x " % (rank, seq, total, len(part), zlib.crc32(part)) + part + b"\n"
    return out


def launcher_output(payloads):
    """What mpirun --tag-output prints: each rank's stream cut into pieces of up to 4 KiB, its mark
    before each piece and after each line break in it; the ranks' pieces interleaved."""
    rng = random.Random(1)
    pieces = []
    for rank, payload in enumerate(payloads):
        stream, mark, mine = frames(rank, payload), b"[1,%d]<stdout>:" % rank, []
        at = 0
        while at < len(stream):
            size = min(rng.randint(1, 4096), len(stream) - at)
            chunk = stream[at:at + size]
            inner = chunk[:-1].replace(b"\n", b"\n" + mark) + chunk[-1:]
            mine.append(mark + inner)
            at += size
        pieces.append(mine)
    out, nxt = [], [0] * len(pieces)
    live = [r for r in range(len(pieces)) if pieces[r]]
    while live:
        r = rng.choice(live)
        out.append(pieces[r][nxt[r]])
        nxt[r] += 1
        if nxt[r] == len(pieces[r]):
            live.remove(r)
    return b"".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default="build", help="build directory (default: build)")
    ap.add_argument("--nodes", type=int, default=1024, help="nodes (default 1024)")
    ap.add_argument("--runs", type=int, default=7, help="timed runs (default 7)")
    ap.add_argument("--launch", action="store_true", help="through gpurun and a stand-in mpirun's output")
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
        env = dict(os.environ)
        if args.launch:
            payloads = []
            for i in range(args.nodes):
                with open(os.path.join(tmp, f"n{i:04}.json")) as f:
                    payloads.append(json.dumps(json.load(f), separators=(",", ":")))
            output = os.path.join(tmp, "mpirun.out")
            with open(output, "wb") as f:
                f.write(launcher_output(payloads))
            bindir = os.path.join(tmp, "bin")
            os.mkdir(bindir)
            with open(os.path.join(bindir, "mpirun"), "w") as f:
                f.write("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'mpirun (Open MPI) 4.1.4'; exit 0; }\n"
                        f"exec cat '{output}'\n")
            os.chmod(os.path.join(bindir, "mpirun"), 0o755)
            env["PATH"] = bindir + os.pathsep + os.path.join(args.build, "launcher") + os.pathsep + env["PATH"]
            env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
            hosts = ",".join(f"n{i:04}" for i in range(args.nodes))
            argv = [gpudoctor, "fleet", "--json", "--launcher", "openmpi", "-H", hosts]
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            out = subprocess.run(argv, capture_output=True, text=True, env=env)
            times.append(time.perf_counter() - start)
            if out.returncode not in (0, 1):
                sys.exit(f"gpudoctor fleet failed ({out.returncode}): {out.stderr.strip()}")
        report = json.loads(out.stdout)
        answered = sum(1 for n in report["nodes"] if n["answer"] == "snapshot")
        if answered != args.nodes:
            sys.exit(f"only {answered} of {args.nodes} nodes answered: {out.stderr.strip()[:2000]}")
        odd = sum(len(d["odd"]) for d in report["drift"])
        median = statistics.median(times)
        verdict = "PASS" if args.nodes < 1024 or median < 1.0 else "MISS"
        how = "through gpurun and mpirun's output" if args.launch else "from files"
        print(f"gpudoctor fleet {how}, {args.nodes} snapshots of {len(snap.stdout) // 1024} KiB: median {median * 1000:.0f} ms "
              f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}) over {args.runs} runs; "
              f"{len(report['drift'])} drifting facts, {odd} odd values; target < 1 s for 1024: {verdict}")


if __name__ == "__main__":
    main()
