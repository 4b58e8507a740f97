#!/usr/bin/env python3
"""A straightforward Python regex parser of NCCL_DEBUG=INFO logs: the anchor that
bench/nccl_log_bench.py times `gpudoctor nccl-log` against (docs/design.md, Performance: "a Python
regex parser").

It is what a user would write: read the file line by line, search every line for the NCCL prefix
`host:pid:tid [dev] NCCL INFO|WARN` (unanchored, so launcher prefixes such as `[1,3]<stdout>:` or
Python logging timestamps in front do not matter), then match the record against the connection
regex of NCCL 2.3-2.30, the CollNet connection regex, the Init START/COMPLETE regex,
`Using network X`, `NCCL version` and the channel summary. It counts connection lines per
transport class (p2p, shm, collnet, net_ib, net_ib_gdr, net_socket, net_other), per exact path,
per host pair and per communicator (commId), and WARN records by kind, and prints a small JSON
summary. A connection line is attributed to the communicator whose init is in progress on the
same (host, pid, tid), else to the latest one the process started that has both ranks (lazily
created send/recv connections come from another thread after Init COMPLETE).

Usage: bench/nccl_log_python.py [--prefilter] FILE...   ("-" = stdin; *.gz is read with gzip)
--prefilter skips lines without "NCCL" before the regex search (not what the benchmark times).
Python 3.9+ standard library only.
"""

import argparse
import gzip
import io
import json
import re
import sys
from collections import Counter, defaultdict

PREFIX = re.compile(r"([^\s:\[\]]+):(\d+):(\d+) \[(\d+)\] (?:(\S+:\d+) )?NCCL (INFO|WARN) (.*)")
CONNECTION = re.compile(
    r"(Ring|Channel) (\d+)(?:/(\d+))? : (\d+)(?:\[([0-9a-f]+)\])? -> (\d+)(?:\[([0-9a-f]+)\])?"
    r"(?: \[(send|receive)\])? via (.+)$"
)
COLLNET = re.compile(r"(Coll|CollNet) (\d+)(?:/(\d+))? : (\d+) \[(send|receive)\] via (COLLNET/.+)$")
INIT = re.compile(
    r"(?:(ncclComm\w+) )?comm (0x[0-9a-f]+|\(nil\)) rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev (\d+))?"
    r"(?: busId ([0-9a-f]+))?(?: parent \S+(?: (?:splitCount|childCount) \d+)? color -?\d+ key -?\d+)?"
    r"(?: commId (0x[0-9a-f]+))? ?- Init (START|COMPLETE)"
)
NETWORK = re.compile(r"^Using network (.+)$")
VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+\S*)")
SUMMARY = re.compile(r"(\d+) coll channels, (?:(\d+) collnet channels, )?(?:(\d+) nvls channels, )?")

CLASSES = ["p2p", "shm", "nvls", "collnet", "net_ib", "net_ib_gdr", "net_socket", "net_other"]


def transport_class(path):
    if path.startswith("P2P/"):
        return "p2p"
    if path.startswith("SHM/") or path.startswith("direct shared memory"):
        return "shm"
    if path.startswith("COLLNET/"):
        return "collnet"
    if path.startswith("NET/"):
        name = path[4:].split("/", 1)[0]
        if name.startswith("IB"):
            return "net_ib_gdr" if "/GDRDMA" in path else "net_ib"
        if name == "Socket":
            return "net_socket"
        return "net_other"
    return "net_other"


def open_input(path):
    # newline="\n": a line ends at LF only, as for grep (tqdm's carriage returns stay inside a line).
    if path == "-":
        raw = sys.stdin.buffer
        if raw.peek(2)[:2] == b"\x1f\x8b":
            raw = gzip.GzipFile(fileobj=raw)
        return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n")
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="\n")
    return open(path, "r", encoding="utf-8", errors="replace", newline="\n")


class Comm:
    def __init__(self, comm_id, nranks):
        self.id = comm_id
        self.nranks = nranks
        self.hosts = {}  # comm rank -> host
        self.complete = set()
        self.nvls_channels = 0
        self.collnet_channels = 0
        # (logging host, direction, src rank, dst rank, class, path) -> lines; host pairs are
        # resolved at the end, when every rank's Init line has been seen.
        self.edges = Counter()


class Parser:
    def __init__(self, prefilter=False):
        self.prefilter = prefilter
        self.lines = 0
        self.records = Counter()  # INFO / WARN
        self.comms = {}
        self.current = {}  # (host, pid, tid) -> Comm during its init
        self.joined = defaultdict(list)  # (host, pid) -> the Comms it started, in order
        self.unattributed = Counter()  # (class, path) -> lines
        self.networks = Counter()
        self.versions = set()
        self.warnings = Counter()
        self.warn_first = {}
        self.anonymous = 0

    def feed(self, name, f):
        search = PREFIX.search
        prefilter = self.prefilter
        for number, line in enumerate(f, 1):
            self.lines += 1
            if prefilter and "NCCL" not in line:
                continue
            m = search(line)
            if m is None:
                continue
            host, pid, tid, _dev, where, level, msg = m.groups()
            msg = msg.rstrip("\r\n")
            self.records[level] += 1
            if level == "WARN":
                kind = " ".join(msg.split()[:4])
                self.warnings[kind] += 1
                self.warn_first.setdefault(kind, f"{name}:{number}")
                continue
            c = CONNECTION.search(msg)
            if c is not None:
                self.connection(host, pid, tid, c.group(8), c.group(4), c.group(6), c.group(9))
                continue
            c = COLLNET.search(msg)
            if c is not None:
                self.connection(host, pid, tid, c.group(5), c.group(4), None, c.group(6))
                continue
            i = INIT.search(msg)
            if i is not None:
                self.init(host, pid, tid, i)
                continue
            n = NETWORK.search(msg)
            if n is not None:
                self.networks[n.group(1)] += 1
                continue
            v = VERSION.search(msg)
            if v is not None:
                self.versions.add(v.group(1))
                continue
            s = SUMMARY.search(msg)
            if s is not None:
                comm = self.current.get((host, pid, tid))
                if comm is not None:
                    comm.collnet_channels = max(comm.collnet_channels, int(s.group(2) or 0))
                    comm.nvls_channels = max(comm.nvls_channels, int(s.group(3) or 0))

    def init(self, host, pid, tid, m):
        _, _ptr, rank, nranks, _cuda, _nvml, _bus, comm_id, what = m.groups()
        if comm_id is None:
            self.anonymous += 1
            comm_id = f"#{self.anonymous}"
        comm = self.comms.get(comm_id)
        if comm is None:
            comm = self.comms[comm_id] = Comm(comm_id, int(nranks))
        comm.hosts[int(rank)] = host
        if what == "START":
            self.current[(host, pid, tid)] = comm
            self.joined[(host, pid)].append(comm)
        else:
            comm.complete.add(int(rank))
            self.current.pop((host, pid, tid), None)

    def connection(self, host, pid, tid, direction, src, dst, path):
        cls = transport_class(path)
        comm = self.current.get((host, pid, tid))
        if comm is None:
            # After init (send/recv connections, proxy thread): the latest communicator of this
            # process that has both ranks.
            top = max(int(src), -1 if dst is None else int(dst))
            comm = next((c for c in reversed(self.joined.get((host, pid), ())) if c.nranks > top), None)
        if comm is None:
            self.unattributed[(cls, path)] += 1
            return
        comm.edges[(host, direction, int(src), -1 if dst is None else int(dst), cls, path)] += 1

    def summary(self):
        transports = Counter()
        paths = Counter()
        pairs = defaultdict(Counter)
        comms = []
        total = 0
        for comm in self.comms.values():
            by_class = Counter()
            for (host, direction, src, dst, cls, path), n in comm.edges.items():
                if direction == "receive":
                    a, b = comm.hosts.get(src, "?"), host
                else:
                    a, b = host, comm.hosts.get(dst, host if dst < 0 else "?")
                pairs[f"{a}->{b}"][cls] += n
                by_class[cls] += n
                paths[path] += n
            transports.update(by_class)
            conns = sum(by_class.values())
            total += conns
            comms.append({
                "id": comm.id, "nranks": comm.nranks, "ranks_seen": len(comm.hosts),
                "init_complete": len(comm.complete), "hosts": sorted(set(comm.hosts.values())),
                "connections": conns, "transports": dict(sorted(by_class.items())),
                "nvls_channels": comm.nvls_channels, "collnet_channels": comm.collnet_channels,
            })
        for (cls, path), n in self.unattributed.items():
            transports[cls] += n
            paths[path] += n
            total += n
        return {
            "lines": self.lines,
            "records": self.records["INFO"] + self.records["WARN"],
            "info": self.records["INFO"],
            "warn": self.records["WARN"],
            "nccl_versions": sorted(self.versions),
            "networks": dict(self.networks),
            "connections": total,
            "unattributed_connections": sum(self.unattributed.values()),
            "transports": {k: transports.get(k, 0) for k in CLASSES},
            "paths": dict(sorted(paths.items())),
            "host_pairs": {k: dict(sorted(v.items())) for k, v in sorted(pairs.items())},
            "communicators": comms,
            "warnings": [{"kind": k, "count": n, "first": self.warn_first[k]} for k, n in self.warnings.most_common()],
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("files", nargs="+", metavar="FILE", help='NCCL log ("-" = stdin, gzip accepted)')
    ap.add_argument("--prefilter", action="store_true", help='skip lines without "NCCL" before the regex search')
    args = ap.parse_args()
    parser = Parser(args.prefilter)
    for path in args.files:
        try:
            f = open_input(path)
        except OSError as e:
            print(f"nccl_log_python: {path}: {e.strerror}", file=sys.stderr)
            return 2
        with f:
            parser.feed(path, f)
    json.dump(parser.summary(), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
