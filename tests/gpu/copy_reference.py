#!/usr/bin/env python3
"""The copy reference of tests/gpu/copy_reference.cu, measured with PyTorch instead.

For a machine without nvcc. Same method as gpudoctor's deep tier (probes/gpu_bandwidth.hpp): per
sample an event, `copies` async copies of `bytes` on one stream, an event; GB/s = 1e9 bytes/s of
the bytes moved over the events' elapsed time; one warm-up sample thrown away; the median of
`samples`. Per visible GPU: host→device and device→host through a pinned host tensor
(non_blocking copies), and a device-local copy (tensor.copy_, counted as bytes / time); with two
GPUs or more, every ordered pair that can access each other both ways, copied on the source GPU's
stream into a tensor allocated beforehand on the destination (what `.to(device)` does, without
timing an allocation). Before a GPU's host copies the process moves onto the CPUs next to the
GPU (sysfs local_cpulist) and allocates the pinned buffer from there, as copy_reference.cu does
(--no-place: not).

    python3 tests/gpu/copy_reference.py [--bytes N] [--copies N] [--samples N] [--no-place]

Prints one JSON object on stdout (the shape copy_reference.cu prints, "tool": "copy_reference
(PyTorch)"); progress goes to stderr. Exit 1 when PyTorch or CUDA fails, 2 on a usage error.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys


def positive(text):
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: expected a whole number, 1 or more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: expected a whole number, 1 or more")
    return value


def bus_id_of(torch, index):
    """The GPU's PCI address, "0000:07:00.0" in lower case: from libcuda itself when it loads,
    else from the device properties PyTorch reports (function 0 assumed), else ""."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        device = ctypes.c_int()
        buffer = ctypes.create_string_buffer(64)
        if libcuda.cuDeviceGet(ctypes.byref(device), index) == 0 and \
                libcuda.cuDeviceGetPCIBusId(buffer, 64, device) == 0:
            return buffer.value.decode().lower()
    except OSError:
        pass
    props = torch.cuda.get_device_properties(index)
    if all(hasattr(props, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    return ""


def place_near(bus_id, original):
    """Moves this process onto the CPUs next to the PCI device (those it may use); says what it did."""
    os.sched_setaffinity(0, original)
    try:
        with open(f"/sys/bus/pci/devices/{bus_id}/local_cpulist", encoding="ascii") as f:
            text = f.read().strip()
    except OSError:
        return f"not placed: no /sys/bus/pci/devices/{bus_id}/local_cpulist"
    cpus = set()
    try:
        for part in filter(None, text.split(",")):
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    except ValueError:
        return f"not placed: cannot read local_cpulist '{text}'"
    cpus &= original
    if not cpus:
        return f"not placed: none of the CPUs {text} is allowed to this process"
    os.sched_setaffinity(0, cpus)
    return f"CPUs {text}"


def measure(torch, device, stream, settings, copy):
    """Median GB/s of `copy` (queues one copy on the current stream), timed as described above."""
    rates = []
    with torch.cuda.device(device), torch.cuda.stream(stream):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        for sample in range(settings.samples + 1):  # sample 0 is the warm-up
            start.record(stream)
            for _ in range(settings.copies):
                copy()
            stop.record(stream)
            stop.synchronize()
            ms = start.elapsed_time(stop)
            if sample > 0 and ms > 0:
                rates.append(settings.bytes * settings.copies / (ms / 1e3) / 1e9)
    if not rates:
        raise RuntimeError(f"GPU {device}: no sample took measurable time")
    return statistics.median(rates)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", type=positive, default=256 << 20, help="bytes per copy (default 256 MiB)")
    parser.add_argument("--copies", type=positive, default=8, help="copies per timed sample (default 8)")
    parser.add_argument("--samples", type=positive, default=5,
                        help="timed samples after one warm-up; the median is reported (default 5)")
    parser.add_argument("--no-place", action="store_true",
                        help="do not move onto the CPUs next to each GPU for its host copies")
    settings = parser.parse_args()

    try:
        import torch
    except ImportError as e:
        print(f"copy_reference.py: PyTorch is not importable: {e}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("copy_reference.py: torch.cuda.is_available() is False: no usable GPU or driver", file=sys.stderr)
        return 1

    n = torch.cuda.device_count()
    gpus = []
    for i in range(n):
        with torch.cuda.device(i):
            gpus.append({
                "index": i,
                "name": torch.cuda.get_device_name(i),
                "bus_id": bus_id_of(torch, i),
                "a": torch.full((settings.bytes,), 2, dtype=torch.uint8, device=f"cuda:{i}"),
                "b": torch.full((settings.bytes,), 3, dtype=torch.uint8, device=f"cuda:{i}"),
                "stream": torch.cuda.Stream(device=i),
            })
            torch.cuda.synchronize(i)

    out = {
        "tool": "copy_reference (PyTorch)",
        "settings": {"bytes": settings.bytes, "copies": settings.copies, "samples": settings.samples},
        "torch_version": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "gpus": [],
        "peers": [],
    }
    original = os.sched_getaffinity(0)
    for g in gpus:
        placement = place_near(g["bus_id"], original) if not settings.no_place else "not placed: --no-place"
        # Allocated here, after the move, and kept (in g) to the end, so that PyTorch's pinned-memory
        # cache cannot hand the next GPU this GPU's buffer.
        with torch.cuda.device(g["index"]):
            g["host"] = torch.full((settings.bytes,), 1, dtype=torch.uint8, pin_memory=True)
        i, host, a, b = g["index"], g["host"], g["a"], g["b"]
        h2d = measure(torch, i, g["stream"], settings, lambda: a.copy_(host, non_blocking=True))
        d2h = measure(torch, i, g["stream"], settings, lambda: host.copy_(a, non_blocking=True))
        d2d = measure(torch, i, g["stream"], settings, lambda: b.copy_(a, non_blocking=True))
        print(f"copy_reference.py: GPU {i} ({g['bus_id']}, {placement}): H2D {h2d:.1f}, D2H {d2h:.1f}, D2D {d2d:.1f} GB/s",
              file=sys.stderr)
        out["gpus"].append({"index": i, "bus_id": g["bus_id"], "name": g["name"], "placement": placement,
                            "h2d_gbps": round(h2d, 3), "d2h_gbps": round(d2h, 3), "d2d_gbps": round(d2d, 3)})

    os.sched_setaffinity(0, original)
    for src in gpus:
        for dst in gpus:
            s, d = src["index"], dst["index"]
            if s == d or not (torch.cuda.can_device_access_peer(s, d) and torch.cuda.can_device_access_peer(d, s)):
                continue
            src_a, dst_b = src["a"], dst["b"]
            gbps = measure(torch, s, src["stream"], settings, lambda: dst_b.copy_(src_a, non_blocking=True))
            print(f"copy_reference.py: GPU {s} → GPU {d}: {gbps:.1f} GB/s", file=sys.stderr)
            out["peers"].append({"src": s, "dst": d, "gbps": round(gbps, 3)})

    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:  # torch raises RuntimeError for CUDA errors
        print(f"copy_reference.py: {e}", file=sys.stderr)
        sys.exit(1)
