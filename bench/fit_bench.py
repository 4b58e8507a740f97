#!/usr/bin/env python3
"""gpudoctor fit --search: trials per search (docs/design.md, Performance: the last row).

Target: no more than ceil(log2(max/min)) + 2 trials; anchor: PyTorch Lightning's
Tuner.scale_batch_size(mode="binsearch"), the same doubling-then-bisecting search in-process, which
bisects to the end (gpudoctor's --exact).

For each (--min, --max) pair and many thresholds T, the script runs

    gpudoctor fit --search --min M --max X --json [--exact] -- /bin/sh fake.sh {batch}

where fake.sh (written here) exits 0 for batch <= T and above T prints PyTorch's out-of-memory
message to stderr and exits 1. Thresholds: every min*2^j and 2^j and their neighbours in the
range, the threshold that makes the search longest (found with the Python model below), the
range's ends, and log-uniform random ones (fixed seed).

The default search keeps to the budget of ceil(log2(max/min)) + 2 trials: its answer must be T
(or X when T >= X), or, when the budget ran out first, a true bracket best <= T < first_oom; the
script counts how often it was exact. `--exact` bisects to the end: its trace must equal, trial
for trial, `lightning_binsearch`, a line-by-line Python port of Lightning 2.6's
_run_binary_scaling with init_val = M and max_val = X (its _adjust_batch_size caps each new size
at max_val and stops when the size does not change; it also stops after max_trials = 25
successful trials, which only very wide ranges reach). Plain bisection of [M, X] (try M, then
halve the interval) is shown for information.

Per pair it prints the default search's worst and mean trial count and its share of exact
answers, --exact's and Lightning's worst and mean, the design bound and --exact's worst case
(`trial_bound`), and PASS when the default search's worst stays within the design bound. One more
run per pair with T < M checks "nothing fits" (1 trial).

Then the default search again for every T >= M, with memory.sh, a step that tells its memory
(GPUKIT_PEAK_BYTES = 3 GiB + K x batch, K such that batches up to T fit on an 80 GiB GPU, and
GPUKIT_TOTAL_BYTES), once exact and once with 1 % noise on the peak: each answer must be a batch
that ran, at most T (or X), and at least 0.97 of it. It prints the trial counts against the
search without memory lines.

Usage: bench/fit_bench.py [BUILD_DIR] [--gpudoctor PATH] [--samples N] [--seed S] [--strict]

BUILD_DIR (default: build in the repository) holds doctor/gpudoctor. Needs python3 >= 3.9
(standard library only) and /bin/sh. Exit status 0 when all ran (and with --strict, every target
was met), 1 with --strict on a miss, 2 when something could not run or a trace differs from
Lightning's. Takes about 30 s on 2 CPUs.
"""

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))

sys.path.insert(0, BENCH)
from launch_bench import built_program, machine_facts  # noqa: E402  (same folder; no side effects on import)

# (min, max): gpudoctor's defaults, Lightning's defaults (init_val=2, max_val=8192), narrower and
# wider ranges, ranges whose ends are not powers of two, and one wide enough for max_trials.
RANGES = [(1, 4096), (2, 8192), (1, 1024), (8, 4096), (3, 1000), (16, 512), (5, 5000), (1, 65536)]

FAKE_SCRIPT = """#!/bin/sh
# A training step that fits up to FIT_BENCH_LIMIT samples and runs out of GPU memory above.
if [ "$1" -gt "$FIT_BENCH_LIMIT" ]; then
  echo "Traceback (most recent call last):" >&2
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of \
79.15 GiB of which 1.02 GiB is free." >&2
  exit 1
fi
echo "step 3/3 loss 0.41"
"""


# The same step telling its memory: peak = A + K * batch (times 1 + noise), on a GPU of C bytes, K
# chosen so that batches up to FIT_BENCH_LIMIT fit. The noise is a per-batch hash in
# [-FIT_BENCH_NOISE, +FIT_BENCH_NOISE] per mille.
MEMORY_SCRIPT = """#!/bin/sh
peak=$(( FIT_BENCH_A + FIT_BENCH_K * $1 ))
if [ "$peak" -gt "$FIT_BENCH_C" ]; then
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB." >&2
  exit 1
fi
n=$(( ($1 * 2654435761 + 12345) % 2001 - 1000 ))
echo "GPUKIT_PEAK_BYTES=$(( peak + peak / 1000000 * n * FIT_BENCH_NOISE ))"
echo "GPUKIT_TOTAL_BYTES=$FIT_BENCH_C"
echo "step 3/3 loss 0.41"
"""
CAPACITY = 80 << 30
INTERCEPT = 3 << 30


class Fail(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Models of the searches (fits: batch <= limit)


def lightning_binsearch(init_val, max_val, limit, max_trials=25):
    """Lightning 2.6 _run_binary_scaling: the batch sizes it tries and the size it returns."""
    trace = []
    new_size = init_val
    low, high, count = 1, None, 0
    while True:
        size = new_size
        trace.append(size)
        if size <= limit:  # _try_loop_run succeeded
            count += 1
            if count > max_trials:
                break
            low = size
            if high:
                if high - low <= 1:
                    break
                new_size = (high + low) // 2
            else:
                new_size = int(size * 2.0)
            new_size = min(new_size, max_val)  # _adjust_batch_size's max_val cap
            if new_size == size:  # "not changed"
                break
        else:  # is_oom_error
            high = size
            new_size = (high + low) // 2
            if high - low <= 1:
                break
    return trace, new_size


def bisection_trials(lo, hi, limit):
    """Try lo; then bisect (lo, hi + 1): the exact search that needs about log2(hi - lo) trials."""
    if limit < lo:
        return 1
    low, high, n = lo, hi + 1, 1
    while high - low > 1:
        mid = (low + high) // 2
        n += 1
        if mid <= limit:
            low = mid
        else:
            high = mid
    return n


def design_bound(lo, hi):
    return math.ceil(math.log2(hi / lo)) + 2


def thresholds(lo, hi, samples, rng):
    picked = {lo, lo + 1, hi - 1, hi, hi + 1}
    j = 0
    while lo << j <= 2 * hi:
        for t in ((lo << j) - 1, lo << j, (lo << j) + 1, (1 << j) - 1, 1 << j, (1 << j) + 1):
            picked.add(t)
        j += 1
    # The longest search, from the model (gpudoctor's traces equal it, checked below).
    worst = max(range(lo, hi + 2), key=lambda t: (len(lightning_binsearch(lo, hi, t, 10**9)[0]), -t))
    picked.add(worst)
    while len(picked) < samples + 5:
        picked.add(int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))
    return sorted(t for t in picked if lo <= t <= hi + 1)


# ---------------------------------------------------------------------------------------------
# Running gpudoctor


def run_search(doctor, script, lo, hi, limit, exact=False, noise=None):
    argv = [doctor, "fit", "--search", "--min", str(lo), "--max", str(hi), "--json"] + (["--exact"] if exact else []) + [
        "--", "/bin/sh", script, "{batch}"]
    env = dict(os.environ, FIT_BENCH_LIMIT=str(limit), GPUKIT_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
    if noise is not None:
        # Batches up to `limit` fit: K per sample puts the limit halfway between limit and limit + 1.
        per_sample = max(1, int((CAPACITY - INTERCEPT) / (max(limit, 0) + 0.5)))
        env.update(FIT_BENCH_A=str(INTERCEPT), FIT_BENCH_K=str(per_sample), FIT_BENCH_C=str(CAPACITY),
                   FIT_BENCH_NOISE=str(noise))
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise Fail(f"`{' '.join(argv)}` (limit {limit}) exited {r.returncode}: {r.stderr.strip()[:400]}")
    try:
        doc = json.loads(r.stdout)
    except ValueError as e:
        raise Fail(f"`{' '.join(argv)}` printed no JSON ({e}): {r.stdout[:400]!r}")
    return doc, wall


def check_answer(doc, lo, hi, limit):
    """The answer is exact, or (default search, budget spent) a true bracket of the limit."""
    best = doc.get("best_batch")
    want = None if limit < lo else min(limit, hi)
    if doc.get("budget_spent"):
        first_oom = doc.get("first_oom")
        if best is None or first_oom is None or not (best <= limit < first_oom):
            raise Fail(f"--min {lo} --max {hi}, fits up to {limit}: bracket [{best}, {first_oom}) misses it")
    elif best != want:
        raise Fail(f"--min {lo} --max {hi}, fits up to {limit}: best_batch {best}, expected {want}")
    for t in doc["trials"]:
        want_verdict = "fits" if t["batch"] <= limit else "oom"
        if t["verdict"] != want_verdict:
            raise Fail(f"--min {lo} --max {hi}, fits up to {limit}: batch {t['batch']} is {t['verdict']}, "
                       f"expected {want_verdict} (evidence {t.get('evidence')!r})")


def check_extrapolated(doc, lo, hi, limit):
    """Within 3 % under the limit (or max), a batch that ran, never above it."""
    best = doc.get("best_batch")
    want = min(limit, hi)
    tried = [t["batch"] for t in doc["trials"]]
    if best is None or best > want or best < 0.97 * want or best not in tried:
        raise Fail(f"with memory lines, --min {lo} --max {hi}, fits up to {limit}: best_batch {best}, tried {tried}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("build", nargs="?", default=None,
                    help="build directory holding doctor/gpudoctor (default: build in the repository)")
    ap.add_argument("--gpudoctor", metavar="PATH", help="the gpudoctor binary (default: BUILD_DIR/doctor/gpudoctor)")
    ap.add_argument("--samples", type=int, default=200, help="random thresholds per range, on top of the fixed ones "
                                                            "(default 200)")
    ap.add_argument("--seed", type=int, default=20251112, help="seed of the random thresholds (default 20251112)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    if args.samples < 0:
        ap.error("--samples must be >= 0")

    doctor = built_program("fit_bench", args.build, args.gpudoctor, "doctor", "gpudoctor")
    if doctor is None:
        return 2
    probe = subprocess.run([doctor, "fit", "--help"], capture_output=True, text=True)
    if probe.returncode != 0 or "--search" not in probe.stdout:
        print(f"fit_bench: `{doctor} fit --help` shows no --search: this gpudoctor cannot search by trial",
              file=sys.stderr)
        return 2

    print(machine_facts())
    print(f"gpudoctor: {doctor}")
    tmp = tempfile.mkdtemp(prefix="fit_bench.")
    try:
        script = os.path.join(tmp, "fake.sh")
        with open(script, "w") as f:
            f.write(FAKE_SCRIPT)
        memory_script = os.path.join(tmp, "memory.sh")
        with open(memory_script, "w") as f:
            f.write(MEMORY_SCRIPT)
        return bench(args, doctor, script, memory_script)
    except Fail as e:
        print(f"fit_bench: {e}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench(args, doctor, script, memory_script):
    rng = random.Random(args.seed)
    started = time.monotonic()
    rows = []
    missed = False
    walls = []
    trials_total = 0
    capped = 0
    extrapolated_rows = []
    for lo, hi in RANGES:
        ours, exact_runs, theirs, bisect = [], [], [], []
        lines = {0: [], 10: []}  # trials with memory lines: exact, and 1 % noise
        resolved = 0
        exact_bound = None
        for limit in thresholds(lo, hi, args.samples, rng):
            # The default search: within the budget, exact when the bisection closes.
            doc, wall = run_search(doctor, script, lo, hi, limit)
            check_answer(doc, lo, hi, limit)
            ours.append(len(doc["trials"]))
            resolved += 0 if doc.get("budget_spent") else 1
            walls.append(wall)
            trials_total += len(doc["trials"])
            # --exact: Lightning's binsearch, trace for trace.
            doc, wall = run_search(doctor, script, lo, hi, limit, exact=True)
            check_answer(doc, lo, hi, limit)
            batches = [t["batch"] for t in doc["trials"]]
            trace, _ = lightning_binsearch(lo, hi, limit)
            uncapped, _ = lightning_binsearch(lo, hi, limit, max_trials=10**9)
            if batches != uncapped:
                raise Fail(f"--exact --min {lo} --max {hi}, fits up to {limit}: gpudoctor tried {batches}, "
                           f"Lightning's binsearch {uncapped}")
            if trace != uncapped:
                capped += 1  # Lightning stopped after max_trials successes: its answer is not exact
            exact_bound = doc["trial_bound"]
            exact_runs.append(len(batches))
            theirs.append(len(trace))
            bisect.append(bisection_trials(lo, hi, limit))
            walls.append(wall)
            trials_total += len(batches)
            # The default search again, the trials telling their memory.
            if limit >= lo:
                for noise, counts in lines.items():
                    doc, wall = run_search(doctor, memory_script, lo, hi, limit, noise=noise)
                    check_extrapolated(doc, lo, hi, limit)
                    counts.append(len(doc["trials"]))
                    walls.append(wall)
                    trials_total += len(doc["trials"])
        extrapolated_rows.append((f"{lo}..{hi}", str(len(lines[0])), f"{max(ours)} / {statistics.mean(ours):.1f}",
                                  f"{max(lines[0])} / {statistics.mean(lines[0]):.1f}",
                                  f"{sum(c <= 6 for c in lines[0]) * 100 / len(lines[0]):.0f} %",
                                  f"{max(lines[10])} / {statistics.mean(lines[10]):.1f}",
                                  f"{sum(c <= 6 for c in lines[10]) * 100 / len(lines[10]):.0f} %"))
        doc, wall = run_search(doctor, script, lo, hi, lo - 1)
        check_answer(doc, lo, hi, lo - 1)
        if len(doc["trials"]) != 1:
            raise Fail(f"--min {lo} --max {hi}: nothing fits, yet {len(doc['trials'])} trials")
        bound = design_bound(lo, hi)
        ok = max(ours) <= bound
        missed |= not ok
        rows.append((f"{lo}..{hi}", str(len(ours)), f"{max(ours)} / {statistics.mean(ours):.1f}",
                     f"{100 * resolved / len(ours):.0f} %", f"{max(exact_runs)} / {statistics.mean(exact_runs):.1f}",
                     f"{max(theirs)} / {statistics.mean(theirs):.1f}", str(bound), str(exact_bound),
                     f"{max(bisect)} / {statistics.mean(bisect):.1f}", "PASS" if ok else "MISS"))
        print(f"  {lo}..{hi}: {len(ours)} thresholds; default worst {max(ours)} (bound {bound}), exact answers "
              f"{100 * resolved / len(ours):.0f} %; --exact worst {max(exact_runs)} (Lightning {max(theirs)})",
              flush=True)

    head = ("range", "thresholds", "default worst / mean", "answered exactly", "--exact worst / mean",
            "Lightning worst / mean", "ceil(log2(max/min))+2", "--exact bound", "bisection worst / mean", "")
    widths = [max(len(x[i]) for x in rows + [head]) for i in range(len(head))]
    print()
    for x in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip())
    print()
    print("With the trials printing GPUKIT_PEAK_BYTES (3 GiB + K x batch on an 80 GiB GPU) and GPUKIT_TOTAL_BYTES,")
    print("the default search; every answer within 3 % under the limit (or --max), a batch that ran:")
    head = ("range", "limits", "no memory lines worst / mean", "lines worst / mean", "<= 6 trials",
            "1 % noise worst / mean", "<= 6 trials")
    widths = [max(len(x[i]) for x in extrapolated_rows + [head]) for i in range(len(head))]
    for x in [head] + extrapolated_rows:
        print("  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip())
    print()
    print(f"{len(walls) + len(RANGES)} gpudoctor runs in {time.monotonic() - started:.0f} s; every --exact trace "
          f"equal to Lightning's binsearch" + (f" (except {capped} runs where Lightning's max_trials=25 cut it short)"
                                               if capped else "") + "; every default answer exact or a true bracket.")
    print(f"gpudoctor wall time per run: median {statistics.median(walls) * 1000:.0f} ms; per trial "
          f"{sum(walls) / trials_total * 1000:.1f} ms (a /bin/sh start, the NVML attempt, the classifier).")
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
