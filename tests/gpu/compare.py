#!/usr/bin/env python3
"""Puts gpudoctor's deep-tier bandwidth beside an independent reference, as ratios.

    compare.py --ours check-deep.json --reference reference.json \\
        [--nccl-tests all_reduce_perf.txt] [--out-dir DIR] [--driver V] [--cuda V] [--date D]
    compare.py --settings-of check-deep.json

--ours: `gpudoctor check --deep --json` output (the bandwidth report is read from
"measurements" → "bandwidth", or "facts" → "bandwidth"), a `gpudoctor snapshot` ("facts" →
"bandwidth"), or that report itself; in the shape of probes::to_json(BandwidthReport). --reference: what tests/gpu/copy_reference.cu or copy_reference.py printed.
--nccl-tests: the output of nccl-tests' all_reduce_perf, compared with the NCCL all-reduce
result gpudoctor's facts hold, if they hold one (any object with "busbw_gbps").

GPUs are matched by PCI bus id (by CUDA index when a side has none), peer pairs by the bus ids of
their ends. A row PASSes when ours / reference ≥ the target (0.95, the performance targets in docs/design.md),
else MISSes. Prints the table and writes DIR/compare.json and DIR/compare.md (a Markdown table
for BENCHMARKS.md). Standard library only.

--settings-of prints the copy settings of gpudoctor's bandwidth report as copy_reference options
("--bytes N --copies N --samples N"), so that the reference copies what gpudoctor copied; exit 1
when the file has no bandwidth report.

Exit status: 0 the table was made (misses or not: they are printed), 1 an input lacks the
numbers (no bandwidth facts, the bandwidth collector broke, unreadable JSON), 2 usage error.
"""

import argparse
import datetime
import json
import os
import re
import sys

TARGET = 0.95


class InputError(Exception):
    pass


def load_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise InputError(f"{what} {path}: {e.strerror}") from None
    except ValueError as e:
        raise InputError(f"{what} {path} is not JSON: {e}") from None


def bandwidth_report(doc, path):
    """The BandwidthReport object in gpudoctor's output (check --json: "measurements" or "facts";
    snapshot: "facts"), or `doc` when it is one. InputError when there is none or the collector
    broke or skipped."""
    report = None
    if isinstance(doc, dict):
        for key in ("measurements", "facts"):
            if isinstance(doc.get(key), dict) and "bandwidth" in doc[key]:
                report = doc[key]["bandwidth"]
                break
        else:
            if "gpus" in doc and "settings" in doc and "tool" not in doc:  # not copy_reference's output
                report = doc
    if not isinstance(report, dict):
        raise InputError(f"{path}: no bandwidth facts (expected \"measurements\" or \"facts\" → \"bandwidth\", "
                         "as 'gpudoctor check --deep --json' and 'gpudoctor snapshot --deep --only bandwidth' "
                         "print them)")
    if report.get("error") and not report.get("gpus"):
        raise InputError(f"{path}: the bandwidth collector failed: {report['error']}")
    if report.get("skipped") and not report.get("gpus"):
        raise InputError(f"{path}: the bandwidth collector skipped: {report['skipped']}")
    if not isinstance(report.get("gpus"), list):
        raise InputError(f"{path}: the bandwidth facts have no \"gpus\" list")
    return report


def find_allreduce(node):
    """The first object under `node` with a numeric "busbw_gbps": an AllReduceResult."""
    if isinstance(node, dict):
        if isinstance(node.get("busbw_gbps"), (int, float)) and not isinstance(node.get("busbw_gbps"), bool):
            return node
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = find_allreduce(child)
        if found is not None:
            return found
    return None


def parse_nccl_tests(text):
    """Out-of-place busbw (GB/s) of the largest size in all_reduce_perf's output, read through the
    column header; else its "Avg bus bandwidth" line; else None."""
    busbw_column = None
    best = None
    for line in text.splitlines():
        words = line.lstrip("#").split()
        if line.startswith("#") and "size" in words and "busbw" in words:
            busbw_column = words.index("busbw")
            continue
        if line.startswith("#") or busbw_column is None or len(words) <= busbw_column:
            continue
        try:
            size = int(words[0])
            busbw = float(words[busbw_column])
        except ValueError:
            continue
        if best is None or size >= best[0]:
            best = (size, busbw)
    if best is not None:
        return {"bytes": best[0], "busbw_gbps": best[1], "source": "out-of-place busbw column"}
    match = re.search(r"Avg bus bandwidth\s*:\s*([0-9.]+)", text)
    if match:
        return {"bytes": None, "busbw_gbps": float(match.group(1)), "source": "Avg bus bandwidth line"}
    return None


def normal_bus_id(text):
    """ "00000000:07:00.0" and "0000:07:00.0" alike, as "0000:07:00.0"; None when not a PCI address."""
    match = re.fullmatch(r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])", str(text or "").strip())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"


def key_function(ours_gpus, ref_gpus):
    """How GPUs are matched: by bus id when every GPU on both sides has one, else by index."""
    if ours_gpus and ref_gpus and all(normal_bus_id(g.get("bus_id")) for g in ours_gpus + ref_gpus):
        return lambda g: normal_bus_id(g.get("bus_id")), "PCI bus id"
    return lambda g: f"index {g.get('index')}", "CUDA index"


def median_of(rate):
    if isinstance(rate, dict) and isinstance(rate.get("median_gbps"), (int, float)):
        return float(rate["median_gbps"])
    return None


def number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def row(measurement, subject, ours, reference, target, note=""):
    """One compared number. result: PASS/MISS when both sides have it, else why not."""
    ratio = ours / reference if ours is not None and reference else None
    if ratio is not None:
        result = "PASS" if ratio >= target else "MISS"
    elif ours is None and reference is None:
        result = "NONE"
    elif ours is None:
        result = "NO OURS"
    else:
        result = "NO REF"
    return {"measurement": measurement, "subject": subject, "ours_gbps": ours, "reference_gbps": reference,
            "ratio": ratio, "result": result, "note": note}


def compare(ours_report, reference, target):
    ours_gpus = [g for g in ours_report.get("gpus", []) if isinstance(g, dict)]
    ref_gpus = [g for g in reference.get("gpus", []) if isinstance(g, dict)]
    key, matched_by = key_function(ours_gpus, ref_gpus)
    ours_by_key = {key(g): g for g in ours_gpus}
    ref_by_key = {key(g): g for g in ref_gpus}
    keys = list(ours_by_key) + [k for k in ref_by_key if k not in ours_by_key]

    def label(k):
        g = ours_by_key.get(k) or ref_by_key.get(k)
        bus = normal_bus_id(g.get("bus_id"))
        return f"GPU {g.get('index')}" + (f" ({bus})" if bus else "")

    rows = []
    for k in keys:
        ours_gpu, ref_gpu = ours_by_key.get(k), ref_by_key.get(k)
        for measurement, ours_field, ref_field in (("H2D", "h2d", "h2d_gbps"), ("D2H", "d2h", "d2h_gbps"),
                                                   ("D2D", "d2d", "d2d_gbps")):
            note = ""
            if ours_gpu is None:
                note = "gpudoctor did not measure this GPU"
            elif ref_gpu is None:
                note = "the reference did not measure this GPU"
            elif ours_gpu.get(ours_field) is None and ours_gpu.get("error"):
                note = f"gpudoctor: {ours_gpu['error']}"
            elif measurement != "D2D":
                # Host copies depend on where the pinned buffer sits: say when a side could not
                # put it next to the GPU.
                unplaced = [f"{side} {str(g.get('placement'))}" for side, g in (("gpudoctor", ours_gpu),
                                                                                ("reference", ref_gpu))
                            if str(g.get("placement") or "").startswith("not placed")]
                note = "; ".join(unplaced)
            rows.append(row(measurement, label(k), median_of((ours_gpu or {}).get(ours_field)),
                            number((ref_gpu or {}).get(ref_field)), target, note))

    # Peer pairs: each side's indices turned into GPU keys, so the two sides match by bus id too.
    def pair_key(gpus, src, dst):
        by_index = {g.get("index"): g for g in gpus}
        if src not in by_index or dst not in by_index:
            return None
        return key(by_index[src]), key(by_index[dst])

    ours_pairs = {}
    no_access = set()
    for p in ours_report.get("peers", []) or []:
        if not isinstance(p, dict):
            continue
        pk = pair_key(ours_gpus, p.get("src"), p.get("dst"))
        if p.get("access") or p.get("bandwidth") is not None or p.get("error"):
            ours_pairs[pk] = p
        else:
            no_access.add(pk)
    ref_pairs = {}
    for p in reference.get("peers", []) or []:
        if isinstance(p, dict):
            ref_pairs[pair_key(ref_gpus, p.get("src"), p.get("dst"))] = p
    for pk in list(ours_pairs) + [p for p in ref_pairs if p not in ours_pairs]:
        if pk is None:
            continue
        ours_pair, ref_pair = ours_pairs.get(pk), ref_pairs.get(pk)
        note = ""
        if ours_pair is None:
            note = "gpudoctor found no peer access" if pk in no_access else "gpudoctor did not measure this pair"
        elif ref_pair is None:
            note = "the reference did not measure this pair"
        elif ours_pair.get("bandwidth") is None and ours_pair.get("error"):
            note = f"gpudoctor: {ours_pair['error']}"
        src_label = label(pk[0]).split(" (")[0]
        dst_label = label(pk[1]).split(" (")[0]
        rows.append(row("P2P", f"{src_label} → {dst_label}", median_of((ours_pair or {}).get("bandwidth")),
                        number((ref_pair or {}).get("gbps")), target, note))
    return rows, matched_by


def settings_note(ours_report, reference):
    ours = ours_report.get("settings") or {}
    ref = reference.get("settings") or {}
    differing = [k for k in ("bytes", "copies", "samples") if k in ours and k in ref and ours[k] != ref[k]]
    if not differing:
        return ""
    return "settings differ: " + ", ".join(f"{k} ours {ours[k]} vs reference {ref[k]}" for k in differing)


def fmt(value, digits=1):
    return "—" if value is None else f"{value:.{digits}f}"


def cuda_text(version):
    """12080 → "12.8" (cuDriverGetVersion's encoding)."""
    return f"{version // 1000}.{(version % 1000) // 10}" if isinstance(version, int) and version > 0 else None


def describe_gpus(ours_report, reference):
    names = [g.get("name") for g in (ours_report.get("gpus") or reference.get("gpus") or []) if isinstance(g, dict)]
    names = [n for n in names if n]
    if not names:
        return "unknown"
    distinct = sorted(set(names))
    return ", ".join(f"{names.count(n)} × {n}" for n in distinct)


def markdown(result):
    meta = result["meta"]
    lines = [
        "### Deep-tier bandwidth beside an independent reference (tests/gpu/run.sh)",
        "",
        "| | |",
        "|---|---|",
        f"| GPUs | {meta['gpus']} |",
        f"| driver | {meta['driver'] or 'unknown'} |",
        f"| CUDA | {meta['cuda'] or 'unknown'} |",
        f"| reference | {meta['reference_tool']} |",
        f"| method | {meta['method']} |",
        f"| GPUs matched by | {meta['matched_by']} |",
        f"| date | {meta['date']} |",
        "",
        f"| measurement | subject | gpudoctor (GB/s) | reference (GB/s) | ours / reference | result (target ≥ "
        f"{result['target']:.2f}) |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in result["rows"]:
        outcome = (r["result"] + (f" ({r['note']})" if r["note"] else "")).replace("|", "\\|")
        lines.append(f"| {r['measurement']} | {r['subject']} | {fmt(r['ours_gbps'])} | {fmt(r['reference_gbps'])} "
                     f"| {fmt(r['ratio'], 3)} | {outcome} |")
    if result.get("settings_note"):
        lines += ["", f"Note: {result['settings_note']}."]
    lines += ["", f"Rows: {result['counts']['PASS']} pass, {result['counts']['MISS']} miss, "
              f"{result['counts']['other']} without both numbers."]
    return "\n".join(lines) + "\n"


def text_table(result):
    header = ("measurement", "subject", "ours GB/s", "ref GB/s", "ratio", "result")
    body = [(r["measurement"], r["subject"], fmt(r["ours_gbps"]), fmt(r["reference_gbps"]), fmt(r["ratio"], 3),
             r["result"] + (f"  {r['note']}" if r["note"] else "")) for r in result["rows"]]
    widths = [max(len(str(x[i])) for x in [header] + body) for i in range(len(header) - 1)]
    out = []
    for cells in [header] + body:
        out.append("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                             for i, (c, w) in enumerate(zip(cells[:-1], widths))) + "  " + cells[-1])
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--ours", help="gpudoctor check --deep --json output, or a snapshot")
    parser.add_argument("--reference", help="copy_reference's JSON output")
    parser.add_argument("--settings-of", metavar="FILE",
                        help="print the copy settings of FILE's bandwidth report as copy_reference options")
    parser.add_argument("--nccl-tests", help="all_reduce_perf's output (text)")
    parser.add_argument("--out-dir", default=".", help="where compare.json and compare.md go (default .)")
    parser.add_argument("--driver", default="", help="NVIDIA driver version, for the Markdown table")
    parser.add_argument("--cuda", default="", help="CUDA version, for the Markdown table (default: the driver's, "
                        "from the facts)")
    parser.add_argument("--date", default="", help="date for the Markdown table (default: today, UTC)")
    parser.add_argument("--target", type=float, default=TARGET, help=f"ratio a row must reach (default {TARGET})")
    args = parser.parse_args(argv)

    if args.settings_of:
        try:
            s = bandwidth_report(load_json(args.settings_of, "gpudoctor output"), args.settings_of).get("settings") or {}
        except InputError as e:
            print(f"compare.py: {e}", file=sys.stderr)
            return 1
        print(f"--bytes {int(s.get('bytes', 256 << 20))} --copies {int(s.get('copies', 8))} "
              f"--samples {int(s.get('samples', 5))}")
        return 0
    if not args.ours or not args.reference:
        parser.error("--ours and --reference are needed (or --settings-of)")

    try:
        ours_doc = load_json(args.ours, "gpudoctor output")
        ours = bandwidth_report(ours_doc, args.ours)
        reference = load_json(args.reference, "reference")
        if not isinstance(reference, dict) or not isinstance(reference.get("gpus"), list):
            raise InputError(f"{args.reference}: not copy_reference output (no \"gpus\" list)")
    except InputError as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 1

    rows, matched_by = compare(ours, reference, args.target)

    allreduce = None
    if isinstance(ours_doc, dict):
        for key in ("measurements", "facts"):
            if isinstance(ours_doc.get(key), dict) and isinstance(ours_doc[key].get("allreduce"), dict):
                allreduce = find_allreduce(ours_doc[key]["allreduce"])
                break
        else:  # elsewhere, but not in the findings: their facts are the judge's, not a measurement
            allreduce = find_allreduce({k: v for k, v in ours_doc.items() if k != "probes"})
    nccl_tests = None
    if args.nccl_tests:
        try:
            with open(args.nccl_tests, encoding="utf-8", errors="replace") as f:
                nccl_tests = parse_nccl_tests(f.read())
        except OSError as e:
            print(f"compare.py: {args.nccl_tests}: {e.strerror}", file=sys.stderr)
        if nccl_tests is None:
            print(f"compare.py: {args.nccl_tests}: no all_reduce_perf result in it", file=sys.stderr)
    if allreduce is not None or nccl_tests is not None:
        devices = allreduce.get("devices") if allreduce else None
        subject = f"{len(devices)} GPUs" if isinstance(devices, list) else "all-reduce"
        size = number((allreduce or {}).get("bytes")) or number(((allreduce or {}).get("settings") or {}).get("bytes")) \
            or number((nccl_tests or {}).get("bytes"))
        if size:
            subject += f", {size / 2**20:.0f} MiB"
        rows.append(row("NCCL all-reduce busbw", subject, number((allreduce or {}).get("busbw_gbps")),
                        number((nccl_tests or {}).get("busbw_gbps")), args.target,
                        "" if nccl_tests else "nccl-tests' all_reduce_perf did not run"))

    settings = ours.get("settings") or {}
    method = (f"{settings.get('copies', '?')} copies × {settings.get('bytes', 0) / 2**20:.0f} MiB per sample, "
              f"1 warm-up, median of {settings.get('samples', '?')}") if settings else "unknown"
    counts = {"PASS": sum(r["result"] == "PASS" for r in rows), "MISS": sum(r["result"] == "MISS" for r in rows)}
    counts["other"] = len(rows) - counts["PASS"] - counts["MISS"]
    result = {
        "target": args.target,
        "meta": {
            "gpus": describe_gpus(ours, reference),
            "driver": args.driver,
            "cuda": args.cuda or (f"{cuda_text(ours.get('cuda_driver_version'))} (driver API)"
                                  if cuda_text(ours.get("cuda_driver_version")) else ""),
            "reference_tool": reference.get("tool", "unknown"),
            "method": method,
            "matched_by": matched_by,
            "date": args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        },
        "settings_note": settings_note(ours, reference),
        "rows": rows,
        "counts": counts,
        "allreduce": {"ours": allreduce, "nccl_tests": nccl_tests},
    }

    print(text_table(result))
    if result["settings_note"]:
        print(f"note: {result['settings_note']}")
    misses = [r for r in rows if r["result"] == "MISS"]
    for r in misses:
        print(f"MISS: {r['measurement']} {r['subject']}: {r['ratio']:.3f} of the reference, below {args.target:.2f}")
    print(f"{counts['PASS']} pass, {counts['MISS']} miss, {counts['other']} without both numbers")

    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "compare.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out_dir, "compare.md"), "w", encoding="utf-8") as f:
        f.write(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
