#!/usr/bin/env python3
"""Writes a large, realistic NCCL_DEBUG=INFO training log, the input of bench/nccl_log_bench.py.

The log is a sequence of job runs (attempts, as in a long log that a scheduler appends to), each
on the same cluster, by default 4 nodes x 8 GPUs = 32 ranks. Every run starts fresh processes
(new pids), creates a world communicator with ncclCommInitRank, then one tensor-parallel
communicator per node and one data-parallel communicator per local GPU index with
ncclCommSplit, then trains: lines from all ranks interleaved in time, mostly application output
(Python logging, per-rank progress prints, tqdm bars with carriage returns, warnings, evaluation
and checkpoint blocks, torchrun banners), NCCL INFO records in the formats of NCCL 2.19.3, 2.21.5
and 2.22.3 (init, network selection, ring order, trees, connection lines, channel summaries,
NVLS, lazily created send/recv connections, and in some runs NCCL_DEBUG_SUBSYS=COLL records
for every collective), and in a few runs a crash with NCCL WARN records (each after an empty
line, as NCCL prints them) and the Python tracebacks that follow. Some runs go through Open MPI
`--tag-output` (every line behind `[1,R]<stdout>:`), some through a Python logging wrapper
(`2025-11-12 20:41:43,851 - INFO - ` in front of NCCL lines). Most runs use NVLink P2P inside a
node and InfiniBand with GPUDirect RDMA across nodes; some fall back to SHM, to IB without
GDRDMA, or to TCP sockets.

Roughly 20 % of the lines are NCCL INFO records and 3-4 % are connection lines. The output
is reproducible: the same --seed and options give the same bytes; a smaller --size-mb gives a
prefix of the same runs (the last run is always complete, so the file ends up slightly larger
than asked: 213 MiB for the default 200). Takes about 5 s for 200 MiB on one core.

Usage: bench/nccl_log_gen.py OUTPUT [--size-mb N] [--seed S] [--nodes N] [--gpus-per-node G]
OUTPUT "-" writes to stdout; a name ending in .gz writes gzip. Prints what it wrote to stderr.
Python 3.9+ standard library only.
"""

import argparse
import gzip
import sys
import time

import random

START_EPOCH = 1762979703  # 2025-11-12 20:35:03 UTC

# DGX H100-like PCI bus ids of the eight GPUs, as NCCL prints busId (%lx).
BUS_IDS = ["18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"]

VERSIONS = [
    # (version string, weight)
    ("2.21.5+cuda12.4", 6),
    ("2.22.3+cuda12.6", 3),
    ("2.19.3+cuda12.3", 2),
]

MODES = [
    # transport behaviour of a run: (name, weight)
    ("nvlink_ib_gdr", 76),
    ("shm", 8),  # P2P disabled in the container: SHM inside the node
    ("ib_no_gdr", 8),  # nvidia-peermem missing: IB without GPUDirect RDMA
    ("socket", 8),  # NCCL_IB_DISABLE=1: TCP sockets across nodes
]

LAUNCHERS = [("torchrun", 5), ("mpirun_tag", 3), ("pylogging", 2)]

WARNINGS_AT_START = [
    "/opt/conda/lib/python3.11/site-packages/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader "
    "will create 16 worker processes in total. Our suggested max number of worker in current system is 12, which "
    "is smaller than what this DataLoader is going to create. Please be aware that excessive worker creation might "
    "get DataLoader running slow or even freeze, lower the worker number to avoid potential slowness/freeze if "
    "necessary.",
    "  warnings.warn(_create_warning_msg(",
    "/opt/conda/lib/python3.11/site-packages/transformers/training_args.py:1575: FutureWarning: "
    "`evaluation_strategy` is deprecated and will be removed in version 4.46 of Transformers. Use "
    "`eval_strategy` instead",
    "  warnings.warn(",
    "/opt/conda/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py:600: UserWarning: torch.utils.checkpoint: "
    "the use_reentrant parameter should be passed explicitly. In version 2.5 we will raise an exception if "
    "use_reentrant is not passed. use_reentrant=False is recommended, but if you need to preserve the current "
    "default behavior, you can pass use_reentrant=True. Refer to docs for more details on the differences between "
    "the two variants.",
    "  return fn(*args, **kwargs)",
]

CONFIG_DUMP = [
    "{",
    '  "_name_or_path": "/models/llama-3-8b",',
    '  "architectures": [',
    '    "LlamaForCausalLM"',
    "  ],",
    '  "attention_bias": false,',
    '  "attention_dropout": 0.0,',
    '  "bos_token_id": 128000,',
    '  "eos_token_id": 128001,',
    '  "hidden_act": "silu",',
    '  "hidden_size": 4096,',
    '  "initializer_range": 0.02,',
    '  "intermediate_size": 14336,',
    '  "max_position_embeddings": 8192,',
    '  "model_type": "llama",',
    '  "num_attention_heads": 32,',
    '  "num_hidden_layers": 32,',
    '  "num_key_value_heads": 8,',
    '  "pretraining_tp": 1,',
    '  "rms_norm_eps": 1e-05,',
    '  "rope_scaling": null,',
    '  "rope_theta": 500000.0,',
    '  "tie_word_embeddings": false,',
    '  "torch_dtype": "bfloat16",',
    '  "transformers_version": "4.44.2",',
    '  "use_cache": true,',
    '  "vocab_size": 128256',
    "}",
]

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 412, in <module>',
    "    main()",
    '  File "/workspace/train.py", line 388, in main',
    "    trainer.train()",
    '  File "/opt/conda/lib/python3.11/site-packages/transformers/trainer.py", line 1938, in train',
    "    return inner_training_loop(",
    "           ^^^^^^^^^^^^^^^^^^^^^",
    '  File "/opt/conda/lib/python3.11/site-packages/transformers/trainer.py", line 2279, in _inner_training_loop',
    "    tr_loss_step = self.training_step(model, inputs)",
    "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "/opt/conda/lib/python3.11/site-packages/accelerate/accelerator.py", line 2151, in backward',
    "    loss.backward(**kwargs)",
    '  File "/opt/conda/lib/python3.11/site-packages/torch/autograd/__init__.py", line 289, in backward',
    "    _engine_run_backward(",
]


def weighted(rng, table):
    total = sum(w for _, w in table)
    x = rng.random() * total
    for name, w in table:
        x -= w
        if x < 0:
            return name
    return table[-1][0]


class Clock:
    """Formats wall-clock times the way Python logging and glog-style c10d messages do, cached per second."""

    def __init__(self):
        self.cache = {}

    def parts(self, t):
        sec = int(t)
        p = self.cache.get(sec)
        if p is None:
            g = time.gmtime(sec)
            p = (time.strftime("%Y-%m-%d %H:%M:%S", g), time.strftime("%m%d %H:%M:%S", g))
            if len(self.cache) > 4096:
                self.cache.clear()
            self.cache[sec] = p
        return p, int((t - sec) * 1000000)

    def logging(self, t):  # 2025-11-12 20:41:43,851
        (full, _), us = self.parts(t)
        return f"{full},{us // 1000:03d}"

    def glog(self, t):  # 1112 20:41:43.851000
        (_, short), us = self.parts(t)
        return f"{short}.{us:06d}"


class Proc:
    """One rank's process in one run."""

    __slots__ = ("rank", "node", "local", "host", "pid", "tid", "proxy_tid", "prefix", "warn_prefix",
                 "tag", "ip", "banner_shown")

    def __init__(self, rank, node, local, host, pid, ip):
        self.rank = rank
        self.node = node
        self.local = local
        self.host = host
        self.pid = pid
        self.tid = pid + 60 + local
        self.proxy_tid = pid + 900 + 7 * local
        self.prefix = f"{host}:{pid}:{self.tid} [{local}] NCCL INFO "
        self.warn_prefix = f"{host}:{pid}:{self.proxy_tid} [{local}] "
        self.tag = f"[1,{rank}]<stdout>:"
        self.ip = ip
        self.banner_shown = False


class Comm:
    """A communicator: members[i] is the Proc of comm rank i."""

    def __init__(self, rng, members, kind, color=0, parent=None):
        self.members = members
        self.kind = kind  # "world", "tp" (one node), "dp" (one GPU per node)
        self.n = len(members)
        self.comm_id = f"0x{rng.getrandbits(64):016x}"
        self.ptrs = [f"0x{0x55d000000000 + 16 * rng.getrandbits(32):x}" for _ in members]
        self.color = color
        self.parent = parent
        self.index = {p.rank: i for i, p in enumerate(members)}


class Run:
    def __init__(self, gen, index, t0):
        rng = gen.rng
        self.gen = gen
        self.rng = rng
        self.index = index
        self.t0 = t0
        self.version = weighted(rng, VERSIONS)
        self.vnum = tuple(int(x) for x in self.version.split("+")[0].split("."))
        self.mode = weighted(rng, MODES) if gen.nodes > 1 else "nvlink_ib_gdr"
        self.launcher = weighted(rng, LAUNCHERS)
        self.coll = rng.random() < 0.35  # NCCL_DEBUG_SUBSYS=INIT,ENV,COLL
        self.pxn = rng.random() < 0.3
        self.steps = rng.randint(1500, 4000)
        self.crash = rng.choice([None, None, None, None, "ib", "socket", "oom"])
        self.events = []  # (time, text of one or more lines, proc or None)
        nodes, g = gen.nodes, gen.gpus
        self.procs = []
        for node in range(nodes):
            base = rng.randint(20000, 3000000)
            for local in range(g):
                self.procs.append(Proc(node * g + local, node, local, gen.hosts[node], base + 17 + 3 * local,
                                       gen.ips[node]))
        self.world = Comm(rng, self.procs, "world")
        self.tp = [Comm(rng, self.procs[n * g:(n + 1) * g], "tp", color=n, parent=self.world) for n in range(nodes)]
        self.dp = [Comm(rng, [self.procs[n * g + l] for n in range(nodes)], "dp", color=l, parent=self.world)
                   for l in range(g)]
        self.clock = gen.clock

    # -- emitting ---------------------------------------------------------------------------

    def emit(self, t, text, proc=None):
        self.events.append((t, text, proc))

    def info(self, t, proc, msg):
        self.events.append((t, proc.prefix + msg, proc))

    def info_lines(self, t0, t1, proc, msgs):
        """NCCL INFO lines of one process spread over [t0, t1), in order."""
        n = len(msgs)
        if n == 0:
            return
        step = (t1 - t0) / n
        rnd = self.rng.random
        prefix = proc.prefix
        ev = self.events
        for i, m in enumerate(msgs):
            ev.append((t0 + (i + rnd()) * step, prefix + m, proc))

    # -- NCCL formats -----------------------------------------------------------------------

    def process_setup(self, t, p):
        v = self.vnum
        msgs = []
        if self.mode == "socket":
            msgs.append("NCCL_IB_DISABLE set by environment to 1.")
        if self.mode == "shm":
            msgs.append("NCCL_P2P_DISABLE set by environment to 1" if v >= (2, 23) else
                        "NCCL_P2P_LEVEL set by environment to LOC")
        msgs.append("NCCL_SOCKET_IFNAME set by environment to ib0,eth0")
        msgs.append(f"Bootstrap : Using ib0:{p.ip}<0>")
        if v >= (2, 22):
            msgs.append("NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")
        elif v >= (2, 21):
            msgs.append("NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: "
                        "No such file or directory : when loading libnccl-net.so")
            msgs.append("NET/Plugin: Using internal network plugin.")
        else:
            msgs.append("NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or "
                        "directory No plugin found (libnccl-net.so), using internal implementation")
        msgs.append("cudaDriverVersion 12040")
        if v >= (2, 22):
            msgs.append(f"NCCL version {self.version}")
        if self.mode == "socket":
            msgs.append("NET/IB : No device found.")
            msgs.append(f"NET/Socket : Using [0]ib0:{p.ip}<0> [1]eth0:172.16.{p.ip.rsplit('.', 1)[1]}.10<0>")
            msgs.append("Using network Socket")
        else:
            devs = " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(self.gen.gpus))
            msgs.append(f"NET/IB : Using {devs} [RO]; OOB ib0:{p.ip}<0>")
            if self.mode == "ib_no_gdr":
                msgs.append(f"NET/IB : GPU Direct RDMA Disabled for HCA {p.local} 'mlx5_{p.local}' (no module)")
            msgs.append("Using network IB")
            if v >= (2, 19) and v < (2, 22):
                msgs.append("Using non-device net plugin version 0")
        msgs.append(f"DMA-BUF is available on GPU device {p.local}")
        self.info_lines(t, t + 0.4, p, msgs)

    def init_line(self, comm, i, what):
        p = comm.members[i]
        v = self.vnum
        busid = BUS_IDS[p.local % len(BUS_IDS)]
        body = (f"comm {comm.ptrs[i]} rank {i} nranks {comm.n} cudaDev {p.local} nvmlDev {p.local} "
                f"busId {busid}")
        if v >= (2, 21):
            if comm.parent is None:
                body = "ncclCommInitRank " + body
            else:
                parent_ptr = comm.parent.ptrs[comm.parent.index[p.rank]]
                body = f"ncclCommSplit {body} parent {parent_ptr} color {comm.color} key {i}"
        return f"{body} commId {comm.comm_id} - Init {what}"

    def edge(self, comm, c, conn, i, j, nic_i, nic_j, proxy=None):
        """Connection lines for comm rank i -> comm rank j on channel c: (proc, line) pairs."""
        a, b = comm.members[i], comm.members[j]
        if a.node == b.node:
            if self.mode == "shm":
                return [(a, f"Channel {c:02d} : {i}[{a.local}] -> {j}[{b.local}] via SHM/direct/direct")]
            return [(a, f"Channel {c:02d}/{conn} : {i}[{a.local}] -> {j}[{b.local}] via P2P/CUMEM/read")]
        shared = "/Shared" if conn == 1 else ""
        if self.mode == "socket":
            return [
                (a, f"Channel {c:02d}/{conn} : {i}[{a.local}] -> {j}[{b.local}] [send] via NET/Socket/{nic_i % 2}"),
                (b, f"Channel {c:02d}/{conn} : {i}[{a.local}] -> {j}[{b.local}] [receive] via NET/Socket/{nic_j % 2}"),
            ]
        gdr = "" if self.mode == "ib_no_gdr" else "/GDRDMA"
        via = f"NET/IB/{nic_i}({proxy}){gdr}" if proxy is not None else f"NET/IB/{nic_i}{gdr}"
        return [
            (a, f"Channel {c:02d}/{conn} : {i}[{a.local}] -> {j}[{b.local}] [send] via {via}{shared}"),
            (b, f"Channel {c:02d}/{conn} : {i}[{a.local}] -> {j}[{b.local}] [receive] via NET/IB/{nic_j}{gdr}{shared}"),
        ]

    def rings(self, comm, nch):
        """Ring order per channel as comm ranks: inside a node, rotated by the channel; nodes in order."""
        g = self.gen.gpus
        by_node = {}
        for i, p in enumerate(comm.members):
            by_node.setdefault(p.node, []).append(i)
        order = []
        for c in range(nch):
            ring = []
            for node in sorted(by_node):
                ids = by_node[node]
                k = c % len(ids)
                ring.extend(ids[k:] + ids[:k])
            order.append(ring)
        return order

    def comm_init(self, t, comm, nch, nvls=0):
        """All lines of one communicator's init, from t; returns the time init completes."""
        rng = self.rng
        v = self.vnum
        n = comm.n
        nodes = sorted({p.node for p in comm.members})
        rings = self.rings(comm, nch)
        per_rank_conn = [[] for _ in range(n)]
        # Ring connections: each rank connects to its successor on every channel.
        for c, ring in enumerate(rings):
            for k in range(n):
                i, j = ring[k], ring[(k + 1) % n]
                if i == j:
                    continue
                a, b = comm.members[i], comm.members[j]
                proxy = None
                if self.pxn and a.node != b.node and a.local != b.local:
                    # PXN: the sender goes through the GPU on its node that shares the receiver's rail.
                    proxy = next((x for x, q in enumerate(comm.members) if q.node == a.node and q.local == b.local),
                                 None)
                nic_i = b.local if proxy is not None else a.local
                for proc, line in self.edge(comm, c, 0, i, j, nic_i, b.local, proxy):
                    per_rank_conn[comm.index[proc.rank]].append(line)
        # Tree connections across nodes: the first rank of each node's ring segment is its leader;
        # a chain of nodes, up and down.
        per_rank_tree = [[] for _ in range(n)]
        if len(nodes) > 1:
            for c, ring in enumerate(rings):
                leaders = []
                for node in nodes:
                    leaders.append(next(i for i in ring if comm.members[i].node == node))
                if c % 2:
                    leaders.reverse()
                for x in range(1, len(leaders)):
                    child, parent = leaders[x], leaders[(x - 1) // 2]
                    lc, lp = comm.members[child].local, comm.members[parent].local
                    for proc, line in self.edge(comm, c, 0, child, parent, lc, lp):
                        per_rank_tree[comm.index[proc.rank]].append(line)
                    for proc, line in self.edge(comm, c, 0, parent, child, lp, lc):
                        per_rank_tree[comm.index[proc.rank]].append(line)
        # Timeline: START on all ranks, then topology, ring connections, trees, COMPLETE.
        t_start = t
        t_topo = t + 0.25 + rng.random() * 0.2
        t_conn = t_topo + 0.3
        t_tree = t_conn + 0.25 + nch * 0.01
        t_done = t_tree + 0.25
        t_end = t_done + 0.1
        nnodes = len(nodes)
        for i, p in enumerate(comm.members):
            if comm.kind == "world":
                self.process_setup(t_start - 0.5, p)
            if i == 0 and not p.banner_shown and v < (2, 22):
                p.banner_shown = True
                self.emit(t_start - 0.01, f"NCCL version {self.version}", p)
            self.info(t_start + rng.random() * 0.2, p, self.init_line(comm, i, "START"))
            msgs = []
            if comm.kind == "world":
                mask = "ffffffff,00000000,ffffffff" if p.local < 4 else "00000000,ffffffff,00000000"
                msgs.append(f"Setting affinity for GPU {p.local} to {mask}")
            if nvls:
                msgs.append(f"NVLS multicast support is available on dev {p.local}")
            if v >= (2, 20):
                local_ranks = sum(1 for q in comm.members if q.node == p.node)
                local_rank = sum(1 for q in comm.members[:i] if q.node == p.node)
                msgs.append(f"comm {comm.ptrs[i]} rank {i} nRanks {n} nNodes {nnodes} localRanks {local_ranks} "
                            f"localRank {local_rank} MNNVL 0")
            if nvls:
                msgs.append(f"NVLS Head  {p.local}: {i} ")
            if i == 0:
                for c, ring in enumerate(rings):
                    if v >= (2, 23):
                        msgs.append(f"Channel {c:02d}/{nch:02d} : " + " ".join(str(r) for r in ring))
                    else:
                        msgs.append(f"Channel {c:02d}/{nch:02d} : " + "".join(f" {r:3d}" for r in ring[:20]))
            trees = []
            for c, ring in enumerate(rings):
                k = ring.index(i)
                up = ring[k - 1] if k > 0 and comm.members[ring[k - 1]].node == p.node else -1
                down = ring[k + 1] if k + 1 < n and comm.members[ring[k + 1]].node == p.node else -1
                trees.append(f" [{c}] {down}/-1/-1->{i}->{up}")
            msgs.append("Trees" + "".join(trees))
            msgs.append("P2P Chunksize set to 524288")
            self.info_lines(t_start + 0.3, t_topo, p, msgs)
            conn = per_rank_conn[i]
            self.info_lines(t_conn, t_conn + 0.2 + nch * 0.01, p, conn)
            tail = ["Connected all rings"]
            self.info_lines(t_tree - 0.05, t_tree - 0.01, p, tail)
            tree = per_rank_tree[i]
            msgs = tree + ["Connected all trees"]
            if nvls:
                msgs.append(f"NVLS comm {comm.ptrs[i]} headRank {i} nHeads {n} buffSize 1048576 memSize 2097152 "
                            f"nvlsPerRankSize 201326592 nvlsTotalSize {201326592 * n}")
                msgs.append("Connected NVLS tree")
            msgs.append("threadThresholds 8/8/64 | 256/8/64 | 512 | 512")
            if v >= (2, 20):
                msgs.append(f"{nch} coll channels, 0 collnet channels, {nvls} nvls channels, 32 p2p channels, "
                            "32 p2p channels per peer")
            else:
                msgs.append(f"{nch} coll channels, {nvls} nvls channels, 32 p2p channels, 32 p2p channels per peer")
            self.info_lines(t_tree, t_done, p, msgs)
            if v >= (2, 22):
                self.info(t_done + rng.random() * 0.03, p,
                          f"Init timings: rank {i} nranks {n} total {0.6 + rng.random():.2f} (kernels 0.12, "
                          f"bootstrap 0.05, allgathers 0.01, topo 0.21, graphs 0.02, connections 0.19, rest 0.04)")
            self.info(t_done + 0.04 + rng.random() * 0.05, p, self.init_line(comm, i, "COMPLETE"))
        return t_end

    def lazy_p2p(self, t):
        """Send/recv connections created at the first pipeline step (connIndex 1, proxy thread)."""
        comm = self.world
        g = self.gen.gpus
        rng = self.rng
        for i, p in enumerate(comm.members):
            j = i + g
            if j >= comm.n:
                continue
            for c in (p.local * 2, p.local * 2 + 1):
                for proc, line in self.edge(comm, c, 1, i, j, p.local, p.local):
                    # connIndex 1 lines come from the proxy thread, not the init thread.
                    self.emit(t + rng.random() * 0.3,
                              f"{proc.host}:{proc.pid}:{proc.proxy_tid} [{proc.local}] NCCL INFO {line}", proc)

    # -- application output ------------------------------------------------------------------

    def startup(self, t):
        rng = self.rng
        clock = self.clock
        for node in range(self.gen.nodes):
            lp = rng.randint(1000, 99999)
            head = f"W{clock.glog(t)} {lp} torch/distributed/run.py:793] "
            for text in ["", "*****************************************",
                         "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
                         "your system being overloaded, please further tune the variable for optimal performance in "
                         "your application as needed. ",
                         "*****************************************"]:
                self.emit(t + node * 0.01, head + text)
        for p in self.procs:
            ts = t + 2 + rng.random() * 3
            self.emit(ts, f"[rank{p.rank}]: initializing process group backend=nccl world_size={len(self.procs)} "
                          f"local_rank={p.local} master=node01:29500", p)
            for k, w in enumerate(WARNINGS_AT_START):
                self.emit(ts + 1 + k * 0.001, w, p)
        p0 = self.procs[0]
        ts = t + 6
        self.emit(ts, f"{clock.logging(ts)} - INFO - __main__ - loading model config from "
                      "/models/llama-3-8b/config.json", p0)
        for k, line in enumerate(CONFIG_DUMP):
            self.emit(ts + 0.001 * (k + 1), line, p0)
        self.emit(ts + 0.1, f"\x1b[32m{clock.logging(ts + 0.1)} - INFO - __main__ - \x1b[0mtokenizer loaded: "
                            "128256 tokens, pad token <|end_of_text|>", p0)

    def training(self, t, step_time):
        rng = self.rng
        rnd = rng.random
        clock = self.clock
        procs = self.procs
        p0 = procs[0]
        steps = self.steps
        emit = self.events.append
        total_steps = 5000
        loss = 2.9 + rnd()
        coll_every = 1
        op = 0
        dp = self.dp
        tp = self.tp
        for s in range(1, steps + 1):
            ts = t + s * step_time
            loss = max(0.8, loss - 0.0004 + (rnd() - 0.5) * 0.02)
            # Rank 0: Python logging progress every step.
            emit((ts + 0.01, f"{clock.logging(ts)} - INFO - trainer - step {s}/{total_steps} | loss {loss:.4f} | "
                              f"grad_norm {0.5 + rnd():.3f} | lr {3e-4 * min(1.0, s / 200):.3e} | "
                              f"tokens/s {380000 + int(rnd() * 40000)} | mem 61.{int(rnd() * 10)}GB", p0))
            # Every rank prints its own short line on most steps (naive print in the training loop).
            for p in procs:
                if rnd() < 0.7:
                    emit((ts + rnd() * step_time, f"[rank {p.rank}] step {s} loss={loss + (rnd() - 0.5) * 0.05:.4f} "
                                                  f"time/step={step_time * (0.95 + rnd() * 0.1):.3f}s "
                                                  f"data={rnd() * 0.02:.4f}s", p))
            # tqdm on rank 0: one line per 10 steps, with the carriage-return updates in between.
            if s % 10 == 0:
                bars = []
                for k in range(s - 9, s + 1):
                    pct = k * 100 // total_steps
                    filled = pct // 10
                    bar = "\u2588" * filled + " " * (10 - filled)
                    bars.append(f"Epoch 1: {pct:3d}%|{bar}| {k}/{total_steps} [{k // 150:02d}:{k % 60:02d}<"
                                f"{(total_steps - k) // 150:02d}:{(total_steps - k) % 60:02d}, "
                                f"{1 / step_time:.2f}it/s, loss={loss:.3f}]")
                emit((ts + 0.02, "\r".join(bars), p0))
            if self.coll and s % coll_every == 0:
                op += 1
                for p in procs:
                    if rnd() >= 0.4:
                        continue
                    c = dp[p.local]
                    i = c.index[p.rank]
                    emit((ts + rnd() * step_time,
                          f"{p.prefix}AllReduce: opCount {op:x} sendbuff 0x7f3a{p.local:x}c000000 recvbuff "
                          f"0x7f3a{p.local:x}c000000 count 25165824 datatype 9 op 0 root 0 comm {c.ptrs[i]} "
                          f"[nranks={c.n}] stream 0x55d0c9e1a{p.local:x}b0", p))
                    if rnd() < 0.25:
                        c = tp[p.node]
                        i = c.index[p.rank]
                        emit((ts + rnd() * step_time,
                              f"{p.prefix}AllGather: opCount {op:x} sendbuff 0x7f2b{p.local:x}4000000 recvbuff "
                              f"0x7f2b{p.local:x}8000000 count 4194304 datatype 9 op 0 root 0 comm {c.ptrs[i]} "
                              f"[nranks={c.n}] stream 0x55d0c9e1a{p.local:x}b0", p))
            if s % 500 == 0:
                te = ts + 1
                emit((te, f"{clock.logging(te)} - INFO - trainer - ***** Running Evaluation *****", p0))
                emit((te + 0.001, f"{clock.logging(te)} - INFO - trainer -   Num examples = 20480", p0))
                emit((te + 0.002, f"{clock.logging(te)} - INFO - trainer -   Batch size = 8", p0))
                for p in procs:
                    emit((te + rnd(), f"[rank{p.rank}]:[W{clock.glog(te)} ProcessGroupNCCL.cpp:4115] [PG ID 0 PG "
                                      f"GUID 0 Rank {p.rank}]  using GPU {p.local} to perform barrier as devices "
                                      "used by this process are currently unknown. This can potentially cause a hang "
                                      "if this rank to GPU mapping is incorrect.", p))
                emit((te + 2, "***** eval metrics *****", p0))
                emit((te + 2.001, f"  epoch                   = {s / total_steps:.4f}", p0))
                emit((te + 2.002, f"  eval_loss               = {loss + 0.07:.4f}", p0))
                emit((te + 2.003, f"  eval_runtime            = 0:00:{20 + int(rnd() * 30):02d}."
                                  f"{int(rnd() * 100):02d}", p0))
                emit((te + 2.004, f"  eval_samples_per_second = {900 + rnd() * 100:.3f}", p0))
                emit((te + 2.005, f"  perplexity              = {2.718 ** (loss + 0.07):.4f}", p0))
            if s % 1000 == 0:
                tc = ts + 3
                emit((tc, f"{clock.logging(tc)} - INFO - trainer - Saving model checkpoint to "
                          f"/checkpoints/run-{self.index:03d}/checkpoint-{s}", p0))
                emit((tc + 0.5, f"{clock.logging(tc + 0.5)} - INFO - configuration_utils - Configuration saved in "
                                f"/checkpoints/run-{self.index:03d}/checkpoint-{s}/config.json", p0))
        return t + (steps + 1) * step_time

    def crash_lines(self, t):
        rng = self.rng
        clock = self.clock
        victim = rng.choice(self.procs)
        g = self.gen.gpus
        n = len(self.procs)
        peer = self.procs[(victim.rank + g) % n]
        v = self.vnum
        wp = victim.warn_prefix
        if self.crash == "ib" and self.mode != "socket":
            if v >= (2, 22):
                what = "NET/IB: Got completion from peer"
            else:
                what = "NET/IB : Got completion from peer"
            for k in range(rng.randint(1, 3)):
                self.emit(t + k * 0.001, f"\n{wp}transport/net_ib.cc:1295 NCCL WARN {what} {peer.ip}<{40112 + k}> "
                                         f"with status=12 opcode=0 len=0 vendor err 129 (Send) localGid "
                                         f"::ffff:{victim.ip} remoteGid ::ffff:{peer.ip} hca mlx5_{victim.local}",
                          victim)
            unwind = ["transport/net_ib.cc:1430 -> 6", "transport/net.cc:1302 -> 6",
                      "proxy.cc:698 -> 6", "proxy.cc:866 -> 6 [Progress Thread]"]
            for k, u in enumerate(unwind):
                self.emit(t + 0.01 + k * 0.001, f"{wp}NCCL INFO {u}", victim)
        elif self.crash in ("ib", "socket"):
            self.emit(t, f"\n{wp}misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
                         f"{peer.host}<{35000 + rng.randint(0, 999)}>", victim)
            self.emit(t + 0.01, f"{wp}NCCL INFO misc/socket.cc:752 -> 6", victim)
            self.emit(t + 0.02, f"\n{wp}proxy.cc:1494 NCCL WARN [Proxy Service {victim.rank}] Failed to execute "
                                f"operation Connect from rank {victim.rank}, retcode 6", victim)
        else:
            self.emit(t, f"\n{wp}include/alloc.h:125 NCCL WARN Cuda failure 'out of memory'", victim)
            self.emit(t + 0.01, f"{wp}NCCL INFO include/alloc.h:132 -> 1", victim)
            self.emit(t + 0.02, f"{wp}NCCL INFO transport/p2p.cc:212 -> 1", victim)
        # Every rank's watchdog fires ten minutes later; some print a traceback.
        tw = t + 600
        for p in self.procs:
            ts = tw + rng.random()
            self.emit(ts, f"[rank{p.rank}]:[E{clock.glog(ts)} ProcessGroupNCCL.cpp:616] [Rank {p.rank}] Watchdog "
                          f"caught collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, "
                          f"NumelIn=25165824, NumelOut=25165824, Timeout(ms)=600000) ran for 600012 milliseconds "
                          "before timing out.", p)
            if p.rank % 8 == 0:
                for k, line in enumerate(TRACEBACK):
                    self.emit(ts + 0.5 + k * 0.0001, line, p)
                self.emit(ts + 0.6, "torch.distributed.DistBackendError: NCCL error in: "
                                    "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, remote process exited or "
                                    f"there was a network error, NCCL version {self.version.split('+')[0]}", p)
        self.emit(tw + 5, f"E{clock.glog(tw + 5)} 1234 torch/distributed/elastic/multiprocessing/api.py:833] "
                          f"failed (exitcode: 1) local_rank: {victim.local} (pid: {victim.pid}) of binary: "
                          "/opt/conda/bin/python3.11")
        return tw + 10

    # -- the whole run --------------------------------------------------------------------------

    def build(self):
        rng = self.rng
        t = self.t0
        self.startup(t)
        t += 12
        nvls = 16 if self.mode == "nvlink_ib_gdr" and self.vnum >= (2, 20) else 0
        t = self.comm_init(t, self.world, rng.choice([16, 24, 32]))
        # Split communicators are created on all nodes at once.
        t_split = t + 0.5
        ends = [self.comm_init(t_split + rng.random() * 0.05, c, 24, nvls) for c in self.tp]
        t = max(ends) + 0.3
        if self.gen.nodes > 1:
            nch = rng.choice([4, 8])
            ends = [self.comm_init(t + rng.random() * 0.05, c, nch) for c in self.dp]
            t = max(ends) + 0.3
        self.lazy_p2p(t + 1)
        step_time = 0.35 + rng.random() * 0.2
        t = self.training(t + 1, step_time)
        if self.crash:
            t = self.crash_lines(t)
        return t

    def render(self):
        """The run's text, lines in time order, launcher prefixes applied."""
        ev = self.events
        ev.sort(key=lambda e: e[0])
        out = []
        add = out.append
        if self.launcher == "mpirun_tag":
            for _, text, p in ev:
                tag = p.tag if p is not None else "[1,0]<stdout>:"
                if "\n" in text:
                    add("\n".join(tag + x for x in text.split("\n")))
                else:
                    add(tag + text)
        elif self.launcher == "pylogging":
            clock = self.clock
            for ts, text, p in ev:
                if p is not None and "NCCL " in text and not text.startswith("\n") and ":" in text[:40]:
                    add(f"{clock.logging(ts)} - INFO - {text}")
                else:
                    add(text)
        else:
            for _, text, _ in ev:
                add(text)
        out.append("")
        return "\n".join(out)


class Generator:
    def __init__(self, seed, nodes, gpus):
        self.rng = random.Random(seed)
        self.nodes = nodes
        self.gpus = gpus
        self.hosts = [f"node{n + 1:02d}" for n in range(nodes)]
        self.ips = [f"10.0.{n // 250}.{n % 250 + 1}" for n in range(nodes)]
        self.clock = Clock()

    def runs(self):
        t = float(START_EPOCH)
        index = 0
        while True:
            run = Run(self, index, t)
            t = run.build() + 30 + self.rng.random() * 120
            stats = (run.version, run.mode, run.launcher, run.coll, run.crash)
            yield run.render(), stats
            index += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("output", help='file to write ("-" = stdout, *.gz = gzip)')
    ap.add_argument("--size-mb", type=float, default=200,
                    help="stop after the run that reaches this many MiB (default 200)")
    ap.add_argument("--seed", type=int, default=20251112, help="random seed (default 20251112)")
    ap.add_argument("--nodes", type=int, default=4, help="nodes (default 4)")
    ap.add_argument("--gpus-per-node", type=int, default=8, help="GPUs and ranks per node (default 8)")
    args = ap.parse_args()
    if args.nodes < 1 or args.gpus_per_node < 1 or args.gpus_per_node > 8 or args.size_mb <= 0:
        ap.error("need --nodes >= 1, 1 <= --gpus-per-node <= 8, --size-mb > 0")

    target = int(args.size_mb * 2**20)
    started = time.monotonic()
    if args.output == "-":
        out = sys.stdout.buffer
    elif args.output.endswith(".gz"):
        out = gzip.open(args.output, "wb", compresslevel=3)
    else:
        out = open(args.output, "wb", buffering=16 * 2**20)
    written = 0
    lines = 0
    nccl = 0
    runs = 0
    kinds = {}
    gen = Generator(args.seed, args.nodes, args.gpus_per_node)
    try:
        for text, stats in gen.runs():
            data = text.encode("utf-8")
            out.write(data)
            written += len(data)
            lines += data.count(b"\n")
            nccl += data.count(b"NCCL INFO")
            runs += 1
            for k in (stats[0], stats[1], stats[2]):
                kinds[k] = kinds.get(k, 0) + 1
            if written >= target:
                break
    finally:
        if out is not sys.stdout.buffer:
            out.close()
        else:
            out.flush()
    took = time.monotonic() - started
    print(f"nccl_log_gen: {args.output}: {written / 2**20:.1f} MiB, {lines} lines, {runs} runs, "
          f"{nccl} NCCL INFO ({100 * nccl / max(lines, 1):.1f} %), {args.nodes}x{args.gpus_per_node} ranks, "
          f"seed {args.seed}, {took:.1f} s", file=sys.stderr)
    print("nccl_log_gen: runs by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
