#!/usr/bin/env python3
"""Launch benchmarks for gpurun (docs/design.md, Performance: the first two rows).

  1. Launch overhead: `gpurun --cpu-only -np 2 true` against `mpirun -np 2 true` (and against
     mpirun with the very flags gpurun passes), run interleaved in one go; median ratio.
     Target: ratio <= 1.10. Also `gpurun --launcher local --cpu-only -np 2 true` (gpurun's own
     launcher, no MPI) against `mpirun -np 2 true`; target: ratio <= 0.30.
  2. Rank helper cost: `gpurun-rank ... -- true` run directly with the Open MPI rank variables
     set by hand, against `true` run directly; the difference is the helper's own cost
     (topology load + plan + bind + exec). Target: <= 10 ms. Also with the plan gpurun hands the
     helpers on its own node (GPURUN_NODE_PLAN, made here from gpurun --dry-run --json): no
     topology load. The helper job of the decomposition below is given it too, as gpurun's is.
     The live-topology GPU mode needs GPUs; its PCI scan is estimated from
     `lstopo-no-graphics` with and without I/O discovery (the design anchor "hwloc load with
     I/O ~ 9 ms"), and where no GPU is present the helper's run up to its "no GPUs" exit is
     timed too, for information.

Usage: bench/launch_bench.py [BUILD_DIR] [--launch-rounds N] [--helper-rounds N] [--lstopo-rounds N]
                             [--strict]

BUILD_DIR (default `build`) holds launcher/gpurun and launcher/gpurun-rank; build it Release. Needs
only python3 >= 3.9 (standard library), Open MPI's mpirun and hwloc's lstopo-no-graphics. Runs as
root too (it sets OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM}=1 then). Commands run interleaved, in a fresh
random order each round; every command's stdout and stderr go to /dev/null while it is timed; one
that exits with an unexpected status is run once more with its output shown and the benchmark
stops (exit 2). Besides the table it prints where gpurun's launch overhead goes (the helper job
gpurun starts, run by hand; gpurun --dry-run) and how much CPU other processes took during each
phase, with a warning when the machine was busy. Exit status 0 when all targets are met or
--strict is not given; 1 with --strict when one is missed. Takes about 20 s on 2 CPUs.
"""

import argparse
import json
import math
import os
import platform
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPOLOGY_XML = os.path.join(REPO, "share", "gpukit", "topologies", "dgx-a100-like.xml")


class Fail(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Running and timing one command


def rank_env(base):
    env = dict(base)
    env.update(
        OMPI_COMM_WORLD_LOCAL_RANK="0",
        OMPI_COMM_WORLD_LOCAL_SIZE="1",
        OMPI_COMM_WORLD_RANK="0",
        OMPI_COMM_WORLD_SIZE="1",
    )
    return env


class Cmd:
    def __init__(self, name, argv, env, expect_rc=0):
        self.name = name
        self.argv = argv
        self.env = env
        self.expect_rc = expect_rc
        self.wall = []  # seconds
        self.cpu = []  # user + sys seconds of the command and the children it waited for

    def run_once(self):
        """Times one run: posix_spawnp (vfork-like, so the timer adds little) to wait4."""
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        t0 = time.perf_counter_ns()
        pid = os.posix_spawnp(self.argv[0], self.argv, self.env, file_actions=actions)
        _, status, usage = os.wait4(pid, 0)
        t1 = time.perf_counter_ns()
        rc = os.waitstatus_to_exitcode(status)
        if rc != self.expect_rc:
            shown = subprocess.run(self.argv, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
            raise Fail(
                f"{self.name}: `{shlex.join(self.argv)}` exited {rc}, expected {self.expect_rc}\n"
                f"  stdout: {shown.stdout.strip()!r}\n  stderr: {shown.stderr.strip()!r}"
            )
        return (t1 - t0) / 1e9, usage.ru_utime + usage.ru_stime

    def sample(self):
        wall, cpu = self.run_once()
        self.wall.append(wall)
        self.cpu.append(cpu)


def interleaved(cmds, rounds, warmup):
    """Runs every command once per round, in a fresh random order each round, so drift in the
    machine's speed hits all of them alike. The first `warmup` rounds are thrown away."""
    rng = random.Random(12345)
    for r in range(warmup + rounds):
        order = list(cmds)
        rng.shuffle(order)
        for c in order:
            if r < warmup:
                c.run_once()
            else:
                c.sample()


class OtherLoad:
    """How much CPU other processes (any namespace: /proc/stat is system-wide) and the hypervisor
    (steal) took while a phase ran: on a 2-CPU machine, anything else running skews wall times."""

    def __init__(self):
        self.start = self._sample()

    @staticmethod
    def _sample():
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            fields = []
        tick = os.sysconf("SC_CLK_TCK")
        fields += [0] * (8 - len(fields))
        idle = fields[3] + fields[4]
        steal = fields[7]
        busy = sum(fields[:8]) - idle - steal
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        ours = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
        return time.monotonic(), busy / tick, steal / tick, ours, bool(fields[0])

    def stop(self):
        """(other, steal) as fractions of all CPUs over the phase, or None without /proc/stat."""
        t0, busy0, steal0, ours0, ok = self.start
        t1, busy1, steal1, ours1, _ = self._sample()
        capacity = (t1 - t0) * (os.cpu_count() or 1)
        if not ok or capacity <= 0:
            return None
        other = max(0.0, (busy1 - busy0) - (ours1 - ours0))
        return other / capacity, (steal1 - steal0) / capacity


# ---------------------------------------------------------------------------------------------
# Statistics


def median_ci(values, confidence=0.95):
    """Distribution-free confidence interval of the median from order statistics (binomial)."""
    xs = sorted(values)
    n = len(xs)
    if n < 6:
        return xs[0], xs[-1]
    # Largest k with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2.
    tail = (1 - confidence) / 2
    cumulative = 0.0
    k = 0
    while True:
        p = math.comb(n, k) / 2**n
        if cumulative + p > tail:
            break
        cumulative += p
        k += 1
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


def paired(a, b, op):
    return [op(x, y) for x, y in zip(a, b)]


def ms(seconds):
    return seconds * 1000.0


def quartiles(values):
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


# ---------------------------------------------------------------------------------------------
# Benchmarks


def find_tool(name):
    path = shutil.which(name)
    if path is None:
        raise Fail(f"{name} not found in PATH")
    return path


def gpurun_mpirun_command(gpurun, env, extra=()):
    """The mpirun command gpurun would run (from its --dry-run report): the rank helper job
    itself, and the same with `true` in place of the rank helper, the fairest anchor (same
    mapping, binding and -x flags)."""
    out = subprocess.run(
        [gpurun, "--dry-run", *extra, "-np", "2", "true"], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise Fail(f"gpurun --dry-run failed ({out.returncode}): {out.stderr.strip()}")
    for line in out.stdout.splitlines():
        if line.startswith("command: "):
            argv = shlex.split(line[len("command: "):])
            helper = next((i for i, a in enumerate(argv) if os.path.basename(a) == "gpurun-rank"), None)
            if helper is None:
                break
            return argv, argv[:helper] + ["true"]
    raise Fail("gpurun --dry-run printed no 'command:' line with gpurun-rank in it")


def cpulist(cpus):
    """A Linux cpulist ("0-3,8"), as gpukit writes one."""
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def handed_plan(gpurun, env, ranks):
    """GPURUN_NODE_PLAN as gpurun sets it for a CPU-only job of `ranks` ranks on this node (from
    its --dry-run --json plan), so that helpers run by hand bind from it as gpurun's do."""
    out = subprocess.run(
        [gpurun, "--dry-run", "--json", "--cpu-only", "-np", str(ranks), "true"], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise Fail(f"gpurun --dry-run --json failed ({out.returncode}): {out.stderr.strip()}")
    plan = json.loads(out.stdout)
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot_id = f.read().strip()
    handed = [
        {"local_rank": r["local_rank"], "gpu": None, "cuda_index": 0, "cpus": r["cpus"], "numa": r["numa"],
         "cores": r["cores"], "shared": r["shared_cpus"], "hca": ""}
        for r in plan["ranks"]
    ]
    return json.dumps({"host": os.uname().nodename, "boot_id": boot_id, "affinity": cpulist(os.sched_getaffinity(0)),
                       "visible_devices": env.get("CUDA_VISIBLE_DEVICES"), "ranks": handed}, separators=(",", ":"))


def bench_launch(build, env, rounds):
    gpurun = os.path.join(build, "launcher", "gpurun")
    mpirun = find_tool("mpirun")
    job, anchor = gpurun_mpirun_command(gpurun, env, ["--cpu-only"])
    ours = Cmd("gpurun", [gpurun, "--cpu-only", "-np", "2", "true"], env)
    plain = Cmd("mpirun", [mpirun, "-np", "2", "true"], env)
    same = Cmd("mpirun+flags", anchor, env)
    # Decomposition: the helper job gpurun starts, run by hand with the plan gpurun hands its
    # helpers; gpurun's planning alone.
    helpers = Cmd("mpirun+flags gpurun-rank", job, dict(env, GPURUN_NODE_PLAN=handed_plan(gpurun, env, 2)))
    dry = Cmd("gpurun --dry-run", [gpurun, "--dry-run", "--cpu-only", "-np", "2", "true"], env)
    # GPU mode, planned from the XML topology (no GPU needed, no PCI scan, no binding).
    gpu_xml = Cmd("gpurun GPU mode, XML topology", [gpurun, "--topology", TOPOLOGY_XML, "-np", "2", "true"], env)
    # gpurun's own launcher: the helper forks the ranks, no MPI.
    local = Cmd("gpurun --launcher local", [gpurun, "--launcher", "local", "--cpu-only", "-np", "2", "true"], env)
    cmds = [ours, plain, same, helpers, dry, gpu_xml, local]
    interleaved(cmds, rounds, warmup=3)
    return cmds


def bench_helper(build, env, rounds):
    helper = os.path.join(build, "launcher", "gpurun-rank")
    renv = rank_env(env)
    direct = Cmd("true", ["true"], renv)
    cpu = Cmd("helper cpu-only", [helper, "--cpu-only", "--", "true"], renv)
    gpurun = os.path.join(build, "launcher", "gpurun")
    handed = Cmd("helper cpu-only, plan handed", [helper, "--cpu-only", "--", "true"],
                 dict(renv, GPURUN_NODE_PLAN=handed_plan(gpurun, env, 1)))
    xml = Cmd("helper gpu xml", [helper, "--topology", TOPOLOGY_XML, "--", "true"], renv)
    cmds = [direct, cpu, handed, xml]
    # Live topology, GPU mode: with no GPU the helper stops with "no GPUs" (exit 2) after the
    # I/O topology load and the NVML attempt; timed for information only.
    probe = subprocess.run([helper, "--", "true"], env=renv, capture_output=True, text=True)
    live = None
    if probe.returncode == 2 and "no GPUs" in probe.stderr:
        live = Cmd("helper gpu live (no GPU: exit 2)", [helper, "--", "true"], renv, expect_rc=2)
    elif probe.returncode == 0:
        live = Cmd("helper gpu live", [helper, "--", "true"], renv)
    if live is not None:
        cmds.append(live)
    interleaved(cmds, rounds, warmup=5)
    return direct, cpu, handed, xml, live


def bench_lstopo(env, rounds):
    lstopo = find_tool("lstopo-no-graphics")
    base = [lstopo, "--of", "xml", "-"]  # "/dev/null" is refused: "File exists"
    no_io = Cmd("lstopo --no-io", base[:1] + ["--no-io"] + base[1:], env)
    important = Cmd("lstopo (important I/O)", base, env)
    whole = Cmd("lstopo --whole-io", base[:1] + ["--whole-io"] + base[1:], env)
    interleaved([no_io, important, whole], rounds, warmup=3)
    return no_io, important, whole


# ---------------------------------------------------------------------------------------------
# Report


def file_field(path, prefix, value=lambda line: line.split(":", 1)[1].strip()):
    """The value of the first line of `path` that starts with `prefix` ("?" when none)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return value(line)
    except (OSError, ValueError, IndexError):
        pass
    return "?"


def built_program(name, build_arg, explicit, *parts):
    """The program `explicit` (--gpudoctor PATH), else BUILD_DIR/parts... (default BUILD_DIR: build in
    the repository); None, after saying what to do, when it is not there."""
    if explicit:
        path = os.path.abspath(explicit)
    else:
        build = os.path.abspath(build_arg) if build_arg else os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build")
        path = os.path.join(build, *parts)
    if not os.access(path, os.X_OK):
        print(f"{name}: {path} is missing; build first (cmake --build BUILD_DIR --target {parts[-1]})",
              file=sys.stderr)
        return None
    return path


def machine_facts():
    """CPU count and model, memory, kernel and Debian release of this machine, on one line."""
    model = file_field("/proc/cpuinfo", "model name")
    mem = file_field("/proc/meminfo", "MemTotal:", lambda line: f"{int(line.split()[1]) / 2**20:.0f} GiB")
    debian = file_field("/etc/debian_version", "", lambda line: line.strip())
    return f"cpus: {os.cpu_count()} ({model}); memory {mem}; kernel {platform.release()}; Debian {debian}"


def machine_lines():
    def first(cmd):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "?"

    return [
        machine_facts(),
        f"{first(['mpirun', '--version'])}; {first(['lstopo-no-graphics', '--version'])}; "
        f"python {platform.python_version()}; load average {os.getloadavg()[0]:.2f} at start",
    ]


def verdict(value, target):
    return "PASS" if value <= target else "MISS"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default="build", help="build directory (default: build)")
    ap.add_argument("--launch-rounds", type=int, default=60, help="interleaved launch rounds (default 60)")
    ap.add_argument("--helper-rounds", type=int, default=200, help="interleaved helper rounds (default 200)")
    ap.add_argument("--lstopo-rounds", type=int, default=40, help="interleaved lstopo rounds (default 40)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    for prog in ("gpurun", "gpurun-rank"):
        if not os.access(os.path.join(build, "launcher", prog), os.X_OK):
            print(f"launch_bench: {build}/launcher/{prog} is missing; build first", file=sys.stderr)
            return 2

    env = dict(os.environ)
    if os.geteuid() == 0:
        # Open MPI refuses root without these; gpurun honours them and passes --allow-run-as-root.
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for name in ("MASTER_PORT", "CUDA_VISIBLE_DEVICES"):
        env.pop(name, None)

    for line in machine_lines():
        print(line)
    started = time.monotonic()
    try:
        loads = []
        watch = OtherLoad()
        launch = bench_launch(build, env, args.launch_rounds)
        loads.append(("launch", watch.stop()))
        ours, plain, same, helpers, dry, gpu_xml, local = launch
        watch = OtherLoad()
        direct, cpu, handed, xml, live = bench_helper(build, env, args.helper_rounds)
        loads.append(("helper", watch.stop()))
        watch = OtherLoad()
        no_io, important, whole = bench_lstopo(env, args.lstopo_rounds)
        loads.append(("lstopo", watch.stop()))
    except Fail as e:
        print(f"launch_bench: {e}", file=sys.stderr)
        return 2
    elapsed = time.monotonic() - started

    rows = []  # what, anchor, ours, ratio/diff, target, verdict
    missed = False

    def launch_row(anchor, label, cmd=ours, target=1.10, what="launch -np 2 true"):
        nonlocal missed
        ratios = paired(cmd.wall, anchor.wall, lambda a, b: a / b)
        r = statistics.median(ratios)
        lo, hi = median_ci(ratios)
        v = verdict(r, target)
        missed |= v == "MISS"
        rows.append(
            (
                f"{what} vs {label}",
                f"{ms(statistics.median(anchor.wall)):.1f} ms",
                f"{ms(statistics.median(cmd.wall)):.1f} ms",
                f"x{r:.3f} [{lo:.3f}, {hi:.3f}]",
                f"ratio <= {target:.2f}",
                v,
            )
        )

    launch_row(plain, "`mpirun -np 2 true`")
    launch_row(same, "mpirun, gpurun's flags")
    launch_row(plain, "`mpirun -np 2 true`", cmd=local, target=0.30, what="--launcher local -np 2 true")
    r = statistics.median(paired(gpu_xml.wall, same.wall, lambda a, b: a / b))
    lo, hi = median_ci(paired(gpu_xml.wall, same.wall, lambda a, b: a / b))
    rows.append(
        (
            "launch, GPU mode from XML, vs same flags",
            f"{ms(statistics.median(same.wall)):.1f} ms",
            f"{ms(statistics.median(gpu_xml.wall)):.1f} ms",
            f"x{r:.3f} [{lo:.3f}, {hi:.3f}]",
            "ratio <= 1.10",
            "info",
        )
    )

    def helper_row(cmd, label, informational=False):
        nonlocal missed
        diffs = paired(cmd.wall, direct.wall, lambda a, b: ms(a - b))
        d = statistics.median(diffs)
        lo, hi = median_ci(diffs)
        v = "info" if informational else verdict(d, 10.0)
        missed |= v == "MISS"
        rows.append(
            (
                label,
                f"{ms(statistics.median(direct.wall)):.2f} ms",
                f"{ms(statistics.median(cmd.wall)):.2f} ms",
                f"+{d:.2f} ms [{lo:.2f}, {hi:.2f}]",
                "<= 10 ms",
                v,
            )
        )

    helper_row(cpu, "helper --cpu-only (live, no I/O)")
    helper_row(handed, "helper --cpu-only, plan handed by gpurun")
    helper_row(xml, "helper GPU mode, XML topology")
    if live is not None:
        helper_row(live, "helper GPU mode, live" + (" (no GPU: to exit 2)" if live.expect_rc == 2 else ""),
                   informational=live.expect_rc == 2)

    def lstopo_row(cmd, label):
        diffs = paired(cmd.wall, no_io.wall, lambda a, b: ms(a - b))
        d = statistics.median(diffs)
        lo, hi = median_ci(diffs)
        rows.append(
            (
                label,
                f"{ms(statistics.median(no_io.wall)):.2f} ms",
                f"{ms(statistics.median(cmd.wall)):.2f} ms",
                f"+{d:.2f} ms [{lo:.2f}, {hi:.2f}]",
                "design: ~9 ms",
                "info",
            )
        )

    lstopo_row(important, "PCI scan: lstopo I/O vs --no-io")
    lstopo_row(whole, "PCI scan: lstopo --whole-io vs --no-io")

    head = ("what", "anchor", "ours", "ratio / extra [95% CI]", "target", "")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    print()
    for r in [head] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    print()
    print(
        f"{args.launch_rounds} interleaved launch rounds, {args.helper_rounds} helper rounds, "
        f"{args.lstopo_rounds} lstopo rounds, in {elapsed:.0f} s. Medians of wall time; ratio and"
    )
    print("extra are medians of per-round pairs, with a distribution-free 95% interval for that median.")
    print("Helper anchor: `true` run directly. PCI-scan rows: anchor is `lstopo-no-graphics --no-io`.")
    busy = []
    parts = []
    for phase, load in loads:
        if load is None:
            continue
        other, steal = load
        parts.append(f"{phase} {100 * other:.0f}% (steal {100 * steal:.0f}%)")
        if other + steal > 0.10:
            busy.append(phase)
    if parts:
        print(f"CPU taken by other processes while each phase ran, share of all {os.cpu_count()} CPUs: " + ", ".join(parts))
    if busy:
        print(
            f"WARNING: the machine was busy during the {', '.join(busy)} phase(s) (over 10% of its CPUs went "
            "elsewhere): those wall times and ratios are unreliable; rerun on an idle machine."
        )
    print()
    print("detail (wall ms: median, IQR; CPU ms user+sys incl. waited children: median):")
    for c in launch + [direct, cpu, handed, xml] + ([live] if live else []) + [no_io, important, whole]:
        q1, q3 = quartiles(c.wall)
        print(
            f"  {c.name:<34} {ms(statistics.median(c.wall)):7.2f}  [{ms(q1):7.2f}, {ms(q3):7.2f}]"
            f"  cpu {ms(statistics.median(c.cpu)):7.2f}   n={len(c.wall)}"
        )
    print(f"  mpirun+flags = {shlex.join(same.argv)}")
    print()

    def extra(a, b):
        return statistics.median(paired(a.wall, b.wall, lambda x, y: ms(x - y)))

    print("where gpurun's launch overhead goes (medians of per-round differences, ms):")
    print(f"  gpurun - mpirun+flags (the whole overhead)          {extra(ours, same):6.2f}")
    print(f"    rank helpers: mpirun+flags gpurun-rank - mpirun+flags  {extra(helpers, same):6.2f}")
    print(f"    front end: gpurun - mpirun+flags gpurun-rank           {extra(ours, helpers):6.2f}")
    print(f"  gpurun --dry-run alone (start, topology, plan, report) {ms(statistics.median(dry.wall)):6.2f}")
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
