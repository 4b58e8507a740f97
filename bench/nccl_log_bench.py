#!/usr/bin/env python3
"""gpudoctor nccl-log throughput and memory (docs/design.md, Performance: the fourth row).

Targets, on the same file:
  1. wall time of `gpudoctor nccl-log FILE` (the text report) and of `gpudoctor nccl-log --json
     FILE` <= 2x that of `grep -c 'NCCL INFO' FILE`;
  2. >= 10x faster than a straightforward Python regex parser (bench/nccl_log_python.py);
  3. peak memory flat as the file grows: max RSS on the full log <= 1.25x max RSS on a log a
     quarter its size. For information, also on that quarter repeated four times (the size of
     the full log, the communicators of the quarter: the log's size alone), and on the full log
     without --json.

The log is written by bench/nccl_log_gen.py (default 200 MiB, fixed seed: 4 nodes x 8 GPUs,
application output with NCCL INFO records interleaved, launcher prefixes, a few WARN records),
or given with --log (plain text); the quarter-size log is generated with the same seed, or for
--log, is the log's first quarter cut at a line end. Both files are read once before timing,
so every run finds them in the page cache. grep, gpudoctor and the Python parser then run
interleaved, in a fresh random order each round (the Python parser in --python-runs of the
rounds, spread out); each is started with posix_spawn and reaped with wait4, which gives its
wall time and CPU time, with no shell in between. gpudoctor's and the parser's stdout go to
/dev/null; grep's goes to a file, because GNU grep stops reading at the first match when its
output is /dev/null. Ratios are medians of per-round pairs, with a distribution-free 95% interval.

Max RSS is the ru_maxrss that wait4 returns, taken by GNU time (`/usr/bin/time -f %M`), which
forks its child from its own small process: a child that this Python process starts directly
reports at least this process's own peak RSS (posix_spawn's vfork shares its memory until exec,
and exec records the old memory's peak), which would hide anything smaller. Without GNU time the
script falls back to its own wait4 and says when a value is only that floor.

One extra gpudoctor run and the first Python run keep their JSON, and the two parsers' counts
are compared: lines, NCCL records, connection lines per transport class, per host pair and per
communicator; differences are listed, for information.

--breakdown also times gpudoctor and grep on the log split in three (NCCL per-collective
records of NCCL_DEBUG_SUBSYS=COLL, the other lines containing "NCCL", application output), to
show where the time goes.

Usage: bench/nccl_log_bench.py [BUILD_DIR] [--gpudoctor PATH] [--log FILE] [--size-mb N]
                               [--seed S] [--runs N] [--python-runs N] [--rss-runs N]
                               [--time PATH] [--breakdown] [--keep] [--strict]

BUILD_DIR (default: build in the repository) holds doctor/gpudoctor; --gpudoctor names the
binary directly. Build it Release. Needs python3 >= 3.9 (standard library only), grep, and for
memory GNU time (Debian package `time`). Generated files go to a temporary directory, removed at
the end unless --keep. Exit status 0 when all targets are met or --strict is not given; 1 with
--strict when one is missed; 2 when something could not run. Takes about 45 s at 200 MiB on
2 CPUs, most of it the Python parser.
"""

import argparse
import json
import os
import platform
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

BENCH = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(BENCH, "nccl_log_gen.py")
PYTHON_PARSER = os.path.join(BENCH, "nccl_log_python.py")

sys.path.insert(0, BENCH)
from launch_bench import OtherLoad, built_program, machine_facts, median_ci  # noqa: E402  (same folder; no side effects on import)


class Fail(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Running and measuring one command


class Cmd:
    def __init__(self, name, argv, expect_rc=(0,), stdout=os.devnull):
        self.name = name
        self.argv = argv
        self.expect_rc = expect_rc
        self.stdout = stdout
        self.wall = []  # seconds
        self.cpu = []  # user + sys seconds

    def run_once(self, stdout=None):
        """posix_spawn to wait4: wall time, and the child's own rusage (no shell in between)."""
        stdout = stdout or self.stdout
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        t0 = time.perf_counter_ns()
        pid = os.posix_spawn(self.argv[0], self.argv, os.environ, file_actions=actions)
        _, status, usage = os.wait4(pid, 0)
        t1 = time.perf_counter_ns()
        rc = os.waitstatus_to_exitcode(status)
        if rc not in self.expect_rc:
            shown = subprocess.run(self.argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
            raise Fail(
                f"{self.name}: `{shlex.join(self.argv)}` exited {rc}, expected {self.expect_rc[0]}\n"
                f"  stdout: {shown.stdout.strip()[:400]!r}\n  stderr: {shown.stderr.strip()[:400]!r}"
            )
        return (t1 - t0) / 1e9, usage.ru_utime + usage.ru_stime, usage.ru_maxrss

    def sample(self, stdout=None):
        wall, cpu, _ = self.run_once(stdout)
        self.wall.append(wall)
        self.cpu.append(cpu)


class Rss:
    """Peak RSS of a command, KiB, from GNU time (see the module docstring), or from this
    process's own wait4 without it; then `floor` is what any child reports at least."""

    def __init__(self, name, argv, time_path, out_dir):
        self.name = name
        self.argv = argv
        self.time_path = time_path
        self.out = os.path.join(out_dir, "rss.txt")
        self.values = []
        self.floor = 0

    def sample(self):
        if self.time_path:
            Cmd(self.name, [self.time_path, "-f", "%M", "-o", self.out] + self.argv, expect_rc=(0, 1)).run_once()
            with open(self.out) as f:
                self.values.append(int(f.read().split()[-1]))
        else:
            self.floor = max(self.floor, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
            _, _, rss = Cmd(self.name, self.argv, expect_rc=(0, 1)).run_once()
            self.values.append(rss)

    def median(self):
        return statistics.median(self.values)

    def text(self):
        m = self.median()
        if not self.time_path and m <= self.floor:
            return f"<= {m / 1024:.1f} MiB"
        return f"{m / 1024:.1f} MiB"

    def known(self):
        return bool(self.time_path) or self.median() > self.floor


# ---------------------------------------------------------------------------------------------
# Inputs


def generate(path, size_mb, seed):
    argv = [sys.executable, GENERATOR, path, "--size-mb", str(size_mb), "--seed", str(seed)]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if r.returncode != 0:
        raise Fail(f"`{shlex.join(argv)}` exited {r.returncode}: {r.stderr.strip()}")
    return r.stderr.strip().splitlines()[0]


def first_quarter(src, dst):
    """The first quarter of src's bytes, cut after a newline."""
    size = os.path.getsize(src)
    with open(src, "rb") as f, open(dst, "wb") as out:
        left = size // 4
        while left > 0:
            chunk = f.read(min(left, 8 << 20))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)
        out.write(f.readline())


def split_log(src, parts):
    """Splits src by kind of line: NCCL per-collective records (NCCL_DEBUG_SUBSYS=COLL, with
    "opCount"), the other lines that contain "NCCL", and the rest (application output)."""
    with open(src, "rb") as f, open(parts[0], "wb") as coll, open(parts[1], "wb") as nccl, \
            open(parts[2], "wb") as other:
        for line in f:
            if b"NCCL" in line:
                (coll if b" opCount " in line else nccl).write(line)
            else:
                other.write(line)


def repeat(src, dst, times):
    with open(dst, "wb") as out:
        for _ in range(times):
            with open(src, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


# ---------------------------------------------------------------------------------------------
# Cross-check of the two parsers' counts


def compare(gd, py):
    """Lines describing where gpudoctor's and the Python parser's counts differ."""
    out = []
    summary = gd.get("summary", {})

    def row(what, a, b):
        out.append(f"  {what:<34} {a!s:>10} {b!s:>10}  {'' if a == b else 'DIFFERS'}")

    row("physical lines", summary.get("lines"), py["lines"])
    row("NCCL records (INFO + WARN)", summary.get("records"), py["records"])
    row("WARN records", summary.get("warnings"), py["warn"])
    row("communicators", summary.get("communicators"), len(py["communicators"]))
    row("connection lines", summary.get("connections"), py["connections"])
    gt = summary.get("transports", {})
    for cls in sorted(set(gt) | set(py["transports"])):
        row(f"  {cls}", gt.get(cls, 0), py["transports"].get(cls, 0))

    gpairs = defaultdict(Counter)
    gcomms = {}
    for comm in gd.get("communicators", []):
        per = Counter()
        for link in comm.get("links", []):
            gpairs[f"{link['from']}->{link['to']}"].update(link.get("transports", {}))
            per.update(link.get("transports", {}))
        gcomms[comm.get("id")] = (comm.get("nranks"), comm.get("connections"), per)
    pairs = sorted(set(gpairs) | set(py["host_pairs"]))
    differing = [p for p in pairs if dict(gpairs.get(p, {})) != py["host_pairs"].get(p, {})]
    out.append(f"  host pairs: {len(pairs)}, {len(differing)} with different counts")
    for p in differing[:12]:
        out.append(f"    {p}: gpudoctor {dict(sorted(gpairs.get(p, {}).items()))}, "
                   f"python {py['host_pairs'].get(p, {})}")
    pcomms = {c["id"]: c for c in py["communicators"]}
    diff = []
    for cid in sorted(set(gcomms) | set(pcomms)):
        g = gcomms.get(cid)
        q = pcomms.get(cid)
        if g is None or q is None:
            diff.append(f"    {cid}: only in {'python' if g is None else 'gpudoctor'}")
            continue
        if dict(g[2]) != q["transports"]:
            delta = Counter(g[2])
            delta.subtract(q["transports"])
            delta = {k: v for k, v in sorted(delta.items()) if v}
            diff.append(f"    {cid} (nranks {q['nranks']}): gpudoctor - python = {delta}")
    out.append(f"  communicators with different transport counts: {len(diff)} of {len(pcomms)}")
    kinds = Counter()
    for d in diff:
        kinds[d.split(": ", 1)[1].replace("gpudoctor - python = ", "")] += 1
    for what, n in kinds.most_common(8):
        out.append(f"    {n} x {what}")
    return out


# ---------------------------------------------------------------------------------------------
# Report


def machine_lines(grep):
    try:
        grep_version = subprocess.run([grep, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        grep_version = "grep ?"
    return [
        machine_facts(),
        f"{grep_version}; python {platform.python_version()}; LANG={os.environ.get('LANG', '')} "
        f"LC_ALL={os.environ.get('LC_ALL', '')}; load average {os.getloadavg()[0]:.2f} at start",
    ]


def comm_count(path):
    try:
        with open(path) as f:
            return len(json.load(f).get("communicators", []))
    except (OSError, ValueError, AttributeError):
        return "?"


def fmt_time(seconds):
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.2f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("build", nargs="?", default=None,
                    help="build directory holding doctor/gpudoctor (default: build in the repository)")
    ap.add_argument("--gpudoctor", metavar="PATH", help="the gpudoctor binary (default: BUILD_DIR/doctor/gpudoctor)")
    ap.add_argument("--log", metavar="FILE", help="an existing plain-text NCCL log instead of a generated one")
    ap.add_argument("--size-mb", type=float, default=200, help="size of the generated log, MiB (default 200)")
    ap.add_argument("--seed", type=int, default=20251112, help="generator seed (default 20251112)")
    ap.add_argument("--runs", type=int, default=9, help="interleaved rounds of grep and gpudoctor (default 9)")
    ap.add_argument("--python-runs", type=int, default=3, help="rounds that also run the Python parser (default 3)")
    ap.add_argument("--rss-runs", type=int, default=3, help="runs per max-RSS measurement (default 3)")
    ap.add_argument("--time", metavar="PATH", default="/usr/bin/time",
                    help='GNU time, for max RSS (default /usr/bin/time; "" = wait4 of this process)')
    ap.add_argument("--breakdown", action="store_true", help="also time the log's kinds of lines separately")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory with the logs and JSON")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    if args.runs < 1 or not 1 <= args.python_runs <= args.runs or args.rss_runs < 1:
        ap.error("need --runs >= 1, 1 <= --python-runs <= --runs, --rss-runs >= 1")

    doctor = built_program("nccl_log_bench", args.build, args.gpudoctor, "doctor", "gpudoctor")
    if doctor is None:
        return 2
    probe = subprocess.run([doctor, "nccl-log", "--help"], capture_output=True, text=True)
    usage = [line for line in probe.stdout.splitlines() if line.startswith("Usage:")]
    if probe.returncode != 0 or not usage or "nccl-log" not in usage[0]:
        print(f"nccl_log_bench: `{doctor} nccl-log --help` shows no nccl-log usage: this gpudoctor has no "
              f"nccl-log subcommand", file=sys.stderr)
        return 2
    if args.time and not os.access(args.time, os.X_OK):
        print(f"nccl_log_bench: {args.time} (GNU time) not found: max RSS from this process's wait4, "
              "which cannot show less than its own peak", file=sys.stderr)
        args.time = ""
    grep = shutil.which("grep")
    if grep is None:
        print("nccl_log_bench: grep not found in PATH", file=sys.stderr)
        return 2
    if args.log and not os.path.isfile(args.log):
        print(f"nccl_log_bench: --log {args.log}: no such file", file=sys.stderr)
        return 2

    for line in machine_lines(grep):
        print(line)
    print(f"gpudoctor: {doctor}")
    tmp = tempfile.mkdtemp(prefix="nccl_log_bench.")
    try:
        return bench(args, doctor, grep, tmp)
    except Fail as e:
        print(f"nccl_log_bench: {e}", file=sys.stderr)
        return 2
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def bench(args, doctor, grep, tmp):
    started = time.monotonic()
    quarter = os.path.join(tmp, "quarter.log")
    if args.log:
        log = os.path.abspath(args.log)
        first_quarter(log, quarter)
        print(f"log: {log} (given); quarter: its first {os.path.getsize(quarter) / 2**20:.1f} MiB")
    else:
        log = os.path.join(tmp, "nccl.log")
        print(f"log: {generate(log, args.size_mb, args.seed)}")
        print(f"quarter: {generate(quarter, args.size_mb / 4, args.seed)}")
    size = os.path.getsize(log)
    qsize = os.path.getsize(quarter)
    warm(log)
    warm(quarter)

    # GNU grep stops at the first match when its output is /dev/null (nothing to print): its
    # count goes to a file.
    grep_out = os.path.join(tmp, "grep.out")
    grep_c = Cmd("grep", [grep, "-c", "NCCL INFO", log], stdout=grep_out)
    # Exit 1 is a report too: the generated log's failing runs (watchdog timeouts) are failing findings.
    judged = (0, 1)
    doc = Cmd("gpudoctor", [doctor, "nccl-log", "--json", log], expect_rc=judged)
    doc_text = Cmd("gpudoctor nccl-log (text)", [doctor, "nccl-log", "--no-color", log], expect_rc=judged)
    pyp = Cmd("python parser", [sys.executable, PYTHON_PARSER, log])
    doc_q = Cmd("gpudoctor, quarter log", [doctor, "nccl-log", "--json", quarter], expect_rc=judged)
    grep_q = Cmd("grep, quarter log", [grep, "-c", "NCCL INFO", quarter], stdout=grep_out)

    # One untimed gpudoctor run keeps its JSON (and warms the binary); grep's count for the record.
    gd_json_path = os.path.join(tmp, "gpudoctor.json")
    py_json_path = os.path.join(tmp, "python.json")
    gd_q_json_path = os.path.join(tmp, "gpudoctor-quarter.json")
    doc.run_once(gd_json_path)
    doc_q.run_once(gd_q_json_path)
    grep_count = subprocess.run([grep, "-c", "NCCL INFO", log], capture_output=True, text=True).stdout.strip()

    watch = OtherLoad()
    rng = random.Random(12345)
    python_rounds = {(k * args.runs) // args.python_runs for k in range(args.python_runs)}
    # Whole rounds are paired: the ratios below pair runs from the same round.
    pairs_py = []  # (python wall, gpudoctor wall) of rounds with both
    for r in range(args.runs):
        order = [grep_c, doc, doc_text] + ([pyp] if r in python_rounds else [])
        rng.shuffle(order)
        for c in order:
            if c is pyp and not pyp.wall:
                c.sample(py_json_path)
            else:
                c.sample()
        if r in python_rounds:
            pairs_py.append((pyp.wall[-1], doc.wall[-1]))
        print(f"  round {r + 1}/{args.runs}: grep {fmt_time(grep_c.wall[-1])}, gpudoctor {fmt_time(doc.wall[-1])}"
              f" (text {fmt_time(doc_text.wall[-1])})"
              + (f", python {fmt_time(pyp.wall[-1])}" if r in python_rounds else ""), flush=True)
    for _ in range(args.rss_runs):
        for c in (doc_q, grep_q):
            c.sample()
    load = watch.stop()

    # Peak memory: the full log and its quarter; the quarter four times over (the full size, the
    # quarter's communicators); the full log rendered as text instead of JSON.
    quarter4 = os.path.join(tmp, "quarter-x4.log")
    repeat(quarter, quarter4, 4)
    warm(quarter4)
    rss_full = Rss("max RSS, full log", [doctor, "nccl-log", "--json", log], args.time, tmp)
    rss_q = Rss("max RSS, quarter log", [doctor, "nccl-log", "--json", quarter], args.time, tmp)
    rss_q4 = Rss("max RSS, quarter x4", [doctor, "nccl-log", "--json", quarter4], args.time, tmp)
    rss_text = Rss("max RSS, full log, text", [doctor, "nccl-log", "--no-color", log], args.time, tmp)
    for _ in range(args.rss_runs):
        for m in (rss_full, rss_q, rss_q4, rss_text):
            m.sample()
    os.unlink(quarter4)

    breakdown = None
    if args.breakdown:
        labels = ("NCCL collective records", "other NCCL lines", "application lines")
        parts = [os.path.join(tmp, f"part-{k}.log") for k in range(3)]
        split_log(log, parts)
        breakdown = []
        for label, path in zip(labels, parts):
            warm(path)
            d = Cmd(f"gpudoctor, {label}", [doctor, "nccl-log", "--json", path], expect_rc=(0, 1))
            g = Cmd(f"grep, {label}", [grep, "-c", "NCCL INFO", path], expect_rc=(0, 1), stdout=grep_out)
            for _ in range(max(3, args.runs // 2)):
                for c in (g, d):
                    c.sample()
            breakdown.append((label, os.path.getsize(path), g, d))
    elapsed = time.monotonic() - started

    # -- table --------------------------------------------------------------------------------
    med = statistics.median
    rows = []
    missed = False

    def verdict(ok):
        nonlocal missed
        missed |= not ok
        return "PASS" if ok else "MISS"

    mib = size / 2**20
    for c, n in ((grep_c, args.runs), (doc_text, args.runs), (doc, args.runs), (pyp, args.python_runs)):
        m = med(c.wall)
        rows.append((c.name if c is not doc else "gpudoctor nccl-log --json", fmt_time(m), f"{mib / m:.0f} MiB/s",
                     f"cpu {fmt_time(med(c.cpu))}, n={n}", "", ""))
    for label, cmd in (("gpudoctor (text) / grep", doc_text), ("gpudoctor --json / grep", doc)):
        ratios = [d / g for d, g in zip(cmd.wall, grep_c.wall)]
        r = med(ratios)
        lo, hi = median_ci(ratios)
        rows.append((label, f"x{r:.2f}", "", f"[{lo:.2f}, {hi:.2f}]", "<= 2.0", verdict(r <= 2.0)))
    cpu_ratios = [d / g for d, g in zip(doc.cpu, grep_c.cpu) if g > 0]
    if cpu_ratios:
        rows.append(("gpudoctor / grep, CPU time", f"x{med(cpu_ratios):.2f}", "", "user+sys, less sensitive to load",
                     "", "info"))
    speedups = [p / d for p, d in pairs_py]
    s = med(speedups)
    lo, hi = (min(speedups), max(speedups))
    rows.append(("python / gpudoctor", f"x{s:.1f}", "", f"[{lo:.1f}, {hi:.1f}] (min, max)", ">= 10",
                 verdict(s >= 10)))
    rows.append((f"gpudoctor {rss_full.name}", rss_full.text(), "", f"{mib:.0f} MiB of log", "", ""))
    rows.append((f"gpudoctor {rss_q.name}", rss_q.text(), "", f"{qsize / 2**20:.0f} MiB of log", "", ""))
    ratio = rss_full.median() / rss_q.median()
    known = rss_full.known() and rss_q.known()
    rows.append(("RSS full / quarter", f"x{ratio:.2f}" if known else "?", "", "" if known else
                 "not measurable: no GNU time", "<= 1.25", verdict(ratio <= 1.25) if known else "n/a"))
    rows.append((f"gpudoctor {rss_q4.name}", rss_q4.text(), "",
                 f"x{rss_q4.median() / rss_q.median():.2f} the quarter's, same communicators", "", "info"))
    rows.append((f"gpudoctor {rss_text.name}", rss_text.text(), "", "without --json", "", "info"))
    rows.append(("time full / quarter (gpudoctor)", f"x{med(doc.wall) / med(doc_q.wall):.2f}", "",
                 f"size x{size / qsize:.2f}; grep x{med(grep_c.wall) / med(grep_q.wall):.2f}", "", "info"))

    head = ("what", "median", "throughput", "detail", "target", "")
    widths = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
    print()
    for x in [head] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(x, widths)).rstrip())
    print()
    print(f"{args.runs} interleaved rounds (the Python parser in {args.python_runs} of them), "
          f"{args.rss_runs} run(s) for each RSS row, in {elapsed:.0f} s. Medians of wall time; the grep ratio")
    print("is the median of per-round ratios with a distribution-free 95% interval; max RSS "
          + ("from GNU time (ru_maxrss of its child), median." if args.time else
             "from this process's wait4 (no GNU time): '<=' marks values that are only its own peak."))
    print(f"communicators in gpudoctor's JSON: full log {comm_count(gd_json_path)}, quarter "
          f"{comm_count(gd_q_json_path)}.")
    print(f"grep -c 'NCCL INFO' counted {grep_count} lines.")
    if load is not None:
        other, steal = load
        print(f"CPU taken by other processes while it ran, share of all {os.cpu_count()} CPUs: "
              f"{100 * other:.0f}% (steal {100 * steal:.0f}%)")
        if other + steal > 0.10:
            print("WARNING: the machine was busy (over 10% of its CPUs went elsewhere): wall times and ratios "
                  "are unreliable; rerun on an idle machine.")

    if breakdown:
        print()
        print("breakdown (the log split in three; medians):")
        for label, nbytes, g, d in breakdown:
            print(f"  {label:<24} {nbytes / 2**20:7.1f} MiB   grep {fmt_time(med(g.wall)):>9}   gpudoctor "
                  f"{fmt_time(med(d.wall)):>9} ({nbytes / 2**20 / med(d.wall):.0f} MiB/s, "
                  f"x{med(d.wall) / med(g.wall):.1f} grep)")

    print()
    print("cross-check of the counts (gpudoctor, python):")
    try:
        with open(gd_json_path) as f:
            gd = json.load(f)
        with open(py_json_path) as f:
            py = json.load(f)
        for line in compare(gd, py):
            print(line)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"  could not compare: {e}")
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
