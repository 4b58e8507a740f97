#!/usr/bin/env python3
"""gpudoctor fit against published measurements (tests/data/fit_published.tsv).

For each row it runs `gpudoctor fit ARGS --json` and compares:
  nvml_mib   the device memory NVML showed, with the fit's peak at --batch (states, activations,
             CUDA context, workspaces)
  alloc_gb   torch.cuda.max_memory_allocated() in GB, with states + activations + PyTorch's
             cuBLAS workspaces at --batch, less a CNN preset's transient share (what its
             caching allocator has allocated at the peak)
  alloc_gib  the same in GiB (torchtune's "peak memory active")
  alloc_mib  the same in MiB
  max_batch  the largest batch that ran, with max_batch_per_gpu
  oom_at     the smallest batch that ran out of memory: max_batch_per_gpu must be below it
  ran        a batch that ran where the run's lengths are not known (sequences padded to each
             batch's longest): shown beside max_batch_per_gpu, not compared

and prints each row's ln(predicted / published), then per framework and overall the median and
worst |ln| and the rows whose max batch reaches a published out-of-memory batch. The max batch is
the one gpudoctor reports, where the upper estimate fits; the memory rows compare the central
estimate, and show the upper one beside it (it should not be below the published number).

Usage: bench/fit_accuracy.py [BUILD_DIR] [--table FILE] [--check MEDIAN WORST] [--covered N]
BUILD_DIR (default `build`) holds doctor/gpudoctor. Standard library only. Exit status 0; with
--check, 1 when the median or the worst |ln| over all rows is above the bound given, or when a max
batch reaches a published out-of-memory batch; with --covered, 1 when the upper estimate is at or
above fewer than N of the measured peaks.
"""

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The memory kinds: what of the fit's peak at --batch each is compared with, and its unit.
MEMORY_KINDS = {
    "nvml_mib": ("peak", 2**20),
    "alloc_gb": ("allocated", 1e9),
    "alloc_gib": ("allocated", 2**30),
    "alloc_mib": ("allocated", 2**20),
}


def read_table(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        header = None
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            cells = line.rstrip("\n").split("\t")
            if header is None:
                header = cells
                continue
            rows.append(dict(zip(header, cells)))
    return rows


def predict(gpudoctor, row):
    argv = [gpudoctor, "fit", *shlex.split(row["args"]), "--json"]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise SystemExit(f"{row['id']}: {' '.join(argv)} exited {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def compare(row, doc):
    """(predicted, upper or None, published, ln error or None, bound broken)"""
    kind = row["kind"]
    value = float(row["value"])
    upper = None
    if kind in MEMORY_KINDS:
        what, unit = MEMORY_KINDS[kind]
        predicted = doc["at_batch"][f"{what}_bytes"] / unit
        upper = doc["at_batch"][f"{what}_upper_bytes"] / unit
    elif kind == "max_batch":
        predicted = doc["max_batch_per_gpu"]
    elif kind == "oom_at":
        predicted = doc["max_batch_per_gpu"]
        return predicted, None, value, None, predicted >= value
    elif kind == "ran":
        return doc["max_batch_per_gpu"], None, value, None, False
    else:
        raise SystemExit(f"{row['id']}: unknown kind {kind}")
    ln = math.log(predicted / value) if predicted > 0 else -math.inf
    return predicted, upper, value, ln, False


def summary(name, results):
    errors = [abs(r[3]) for r in results if r[3] is not None]
    broken = [r[0] for r in results if r[4]]
    covered = [r for r in results if r[5] is not None]
    not_compared = sum(1 for r in results if r[2] == "ran")
    if errors:
        worst = max(errors)
        print(f"  {name:<11} {len(errors):>2} compared: median |ln| {statistics.median(errors):.3f} "
              f"(x{math.exp(statistics.median(errors)):.2f}), worst {worst:.3f} (x{math.exp(worst):.2f}); "
              f"{len(broken)} of {sum(1 for r in results if r[2] == 'oom_at')} out-of-memory bounds reached"
              + (f": {', '.join(broken)}" if broken else "")
              + (f"; the upper estimate covers {sum(1 for r in covered if r[5])} of {len(covered)} measured peaks"
                 if covered else "")
              + (f"; {not_compared} shown, not compared" if not_compared else ""))
    else:
        print(f"  {name:<11} no rows")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--table", default=os.path.join(REPO, "tests", "data", "fit_published.tsv"))
    parser.add_argument("--check", nargs=2, type=float, metavar=("MEDIAN", "WORST"))
    parser.add_argument("--covered", type=int, metavar="N")
    args = parser.parse_args()
    gpudoctor = os.path.join(args.build, "doctor", "gpudoctor")
    if not os.access(gpudoctor, os.X_OK):
        raise SystemExit(f"{gpudoctor}: not found; build first (cmake --build {args.build})")
    results = []
    print(f"{'id':<30} {'framework':<10} {'kind':<9} {'published':>10} {'predicted':>10} {'ln':>7} {'upper':>10}")
    for row in read_table(args.table):
        predicted, upper, value, ln, broken = compare(row, predict(gpudoctor, row))
        results.append((row["id"], row["framework"], row["kind"], ln, broken, None if upper is None else upper >= value))
        shown = f"{ln:+.3f}" if ln is not None else "bound" if row["kind"] == "oom_at" else "shown"
        if broken:
            shown = "REACHED"
        upper_shown = "" if upper is None else f"{upper:.5g}"
        print(f"{row['id']:<30} {row['framework']:<10} {row['kind']:<9} {value:>10g} {predicted:>10.5g} {shown:>7} "
              f"{upper_shown:>10}")
    print()
    for framework in sorted({r[1] for r in results}):
        summary(framework, [r for r in results if r[1] == framework])
    summary("all", results)
    if args.check:
        errors = [abs(r[3]) for r in results if r[3] is not None]
        median, worst = statistics.median(errors), max(errors)
        reached = [r[0] for r in results if r[4]]
        if median > args.check[0] or worst > args.check[1] or reached:
            print(f"FAIL: median {median:.3f} (bound {args.check[0]}), worst {worst:.3f} (bound {args.check[1]})"
                  + (f"; out-of-memory bounds reached: {', '.join(reached)}" if reached else ""))
            return 1
    if args.covered is not None:
        covered = sum(1 for r in results if r[5])
        if covered < args.covered:
            print(f"FAIL: the upper estimate covers {covered} measured peaks, fewer than {args.covered}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
