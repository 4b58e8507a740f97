#include "base/nsys/summary.hpp"

#include "base/byte_size.hpp"
#include "base/text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <unordered_map>

namespace base::nsys {

namespace {

using Interval = std::pair<std::int64_t, std::int64_t>;

bool counted(std::int64_t start, std::int64_t end)
{
    return start > 0 && end >= start;
}

// [start, end) cut to the span; false when nothing of it is inside.
bool clip(std::int64_t start, std::int64_t end, std::int64_t span_start, std::int64_t span_end, Interval& out)
{
    out = {std::max(start, span_start), std::min(end, span_end)};
    return out.second >= out.first;
}

double median_of(std::vector<std::int64_t>& values)
{
    if (values.empty()) {
        return 0;
    }
    const std::size_t mid = values.size() / 2;
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
    const double upper_mid = static_cast<double>(values[mid]);
    if (values.size() % 2 == 1) {
        return upper_mid;
    }
    const auto lower_mid = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
    return (static_cast<double>(lower_mid) + upper_mid) / 2;
}

void add(CopyStats& s, std::uint64_t count, std::uint64_t bytes, std::int64_t ns)
{
    s.count += count;
    s.bytes += bytes;
    s.total_ns += ns;
}

// The events of one device, pointing into the trace.
struct DeviceEvents {
    std::vector<const Kernel*> kernels;
    std::vector<const Copy*> copies;
    std::vector<const Memset*> memsets;
};

std::string seconds(std::int64_t ns)
{
    return format_duration(static_cast<double>(ns));
}

std::string percent(double share)
{
    return fmt::format("{:.1f}%", share * 100);
}

std::string gpu_subject(const GpuSummary& g)
{
    return fmt::format("gpu {}{} in {}", g.device, g.name.empty() ? "" : " (" + g.name + ")", g.file);
}

Finding make_finding(const std::string& code, const GpuSummary* gpu, const std::string& file, std::string message)
{
    Finding f = finding_from(finding_codes(), code, gpu != nullptr ? gpu_subject(*gpu) : file, std::move(message));
    f.facts = {{"file", file}, {"device_id", gpu != nullptr ? nlohmann::json(gpu->device) : nlohmann::json(nullptr)}};
    return f;
}

GpuSummary summarize_gpu(const Trace& trace, std::uint32_t device, const DeviceEvents& events, std::int64_t span_start,
    std::int64_t span_end, const Options& options)
{
    GpuSummary g;
    g.file = trace.file;
    g.device = device;
    if (auto it = trace.gpu_names.find(device); it != trace.gpu_names.end()) {
        g.name = it->second;
    }
    g.span_ns = span_end - span_start;

    std::vector<Interval> kernel_busy;
    std::vector<Interval> copy_busy;
    std::vector<Interval> all_busy;
    Interval cut;
    std::unordered_map<std::uint32_t, std::vector<std::int64_t>> by_name;
    std::map<std::int64_t, StreamStats> streams;
    std::vector<std::int64_t> durations;
    durations.reserve(events.kernels.size());
    for (const Kernel* k : events.kernels) {
        const std::int64_t ns = k->end - k->start;
        ++g.kernels;
        g.kernel_total_ns += ns;
        g.tiny_kernels += ns < tiny_kernel_ns ? 1 : 0;
        durations.push_back(ns);
        by_name[k->name].push_back(ns);
        StreamStats& s = streams[k->stream];
        s.stream = k->stream;
        ++s.kernels;
        s.total_ns += ns;
        if (clip(k->start, k->end, span_start, span_end, cut)) {
            kernel_busy.push_back(cut);
            all_busy.push_back(cut);
        }
    }
    g.median_kernel_ns = median_of(durations);
    g.distinct_kernels = by_name.size();

    std::map<std::pair<std::int64_t, std::int64_t>, PeerStats> peers;
    for (const Copy* c : events.copies) {
        const std::int64_t ns = c->end - c->start;
        CopyStats& s = g.copies[static_cast<std::size_t>(c->kind)];
        add(s, c->count, c->bytes, ns);
        if (c->pageable && (c->kind == CopyKind::htod || c->kind == CopyKind::dtoh)) {
            s.pageable_count += c->count;
            s.pageable_bytes += c->bytes;
            s.pageable_ns += ns;
        }
        if (c->kind == CopyKind::ptop) {
            PeerStats& p = peers[{c->src_device, c->dst_device}];
            p.src_device = c->src_device;
            p.dst_device = c->dst_device;
            add(p.copies, c->count, c->bytes, ns);
        }
        if (clip(c->start, c->end, span_start, span_end, cut)) {
            copy_busy.push_back(cut);
            all_busy.push_back(cut);
        }
    }
    for (const Memset* m : events.memsets) {
        add(g.memsets, 1, m->bytes, m->end - m->start);
        if (clip(m->start, m->end, span_start, span_end, cut)) {
            all_busy.push_back(cut);
        }
    }

    g.busy_ns = union_length(kernel_busy);
    g.copy_busy_ns = union_length(copy_busy);
    g.busy_with_copies_ns = union_length(all_busy); // sorts all_busy by start
    if (!all_busy.empty()) {
        g.first_ns = all_busy.front().first - span_start;
        std::int64_t last = all_busy.front().second;
        const std::int64_t threshold = std::llround(options.gap_seconds * 1e9);
        std::vector<Gap> gaps;
        for (const auto& [start, end] : all_busy) {
            if (start > last && start - last >= threshold) {
                gaps.push_back({last - span_start, start - last});
            }
            last = std::max(last, end);
        }
        g.last_ns = last - span_start;
        g.gap_count = gaps.size();
        for (const Gap& gap : gaps) {
            g.gap_total_ns += gap.length_ns;
        }
        std::stable_sort(
            gaps.begin(), gaps.end(), [](const Gap& a, const Gap& b) { return a.length_ns > b.length_ns; });
        gaps.resize(std::min(gaps.size(), gaps_listed));
        std::sort(gaps.begin(), gaps.end(), [](const Gap& a, const Gap& b) { return a.start_ns < b.start_ns; });
        g.longest_gaps = std::move(gaps);
    }

    for (auto& [name, times] : by_name) {
        KernelStats k;
        k.name = name < trace.kernel_names.size() ? trace.kernel_names[name] : fmt::format("kernel #{}", name);
        k.count = times.size();
        for (std::int64_t t : times) {
            k.total_ns += t;
        }
        k.min_ns = *std::min_element(times.begin(), times.end());
        k.max_ns = *std::max_element(times.begin(), times.end());
        k.mean_ns = static_cast<double>(k.total_ns) / static_cast<double>(k.count);
        k.median_ns = median_of(times);
        k.share = g.kernel_total_ns > 0 ? static_cast<double>(k.total_ns) / static_cast<double>(g.kernel_total_ns) : 0;
        g.top_kernels.push_back(std::move(k));
    }
    std::sort(g.top_kernels.begin(), g.top_kernels.end(), [](const KernelStats& a, const KernelStats& b) {
        return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
    });
    g.top_kernels.resize(std::min<std::size_t>(g.top_kernels.size(), options.top));
    for (auto& [stream, stats] : streams) {
        g.streams.push_back(stats);
    }
    for (auto& [pair, stats] : peers) {
        g.peers.push_back(stats);
    }
    return g;
}

void judge(const GpuSummary& g, const Options& options, std::vector<Finding>& out)
{
    if (g.span_ns > 0 && g.busy_share() < options.min_busy) {
        const std::int64_t active = g.last_ns - g.first_ns;
        out.push_back(make_finding("profile.low_busy", &g, g.file,
            fmt::format("kernels ran {} of the {} trace ({}); {} between its first and last GPU operation "
                        "(at {} and {}); {} with copies and memsets",
                percent(g.busy_share()), seconds(g.span_ns), seconds(g.busy_ns),
                percent(active > 0 ? static_cast<double>(g.busy_ns) / static_cast<double>(active) : 0),
                format_time(g.first_ns), format_time(g.last_ns), percent(g.busy_share_with_copies()))));
    }
    if (g.copy_busy_ns > 0 && g.copy_busy_ns >= g.busy_ns &&
        static_cast<double>(g.copy_busy_ns) >= copies_dominate_min_share * static_cast<double>(g.span_ns)) {
        std::string kinds;
        for (std::size_t i = 0; i < copy_kind_count; ++i) {
            if (g.copies[i].count > 0) {
                kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", label(static_cast<CopyKind>(i)),
                    seconds(g.copies[i].total_ns));
            }
        }
        out.push_back(make_finding("profile.copies_dominate", &g, g.file,
            fmt::format("copies kept the GPU busy {} ({} of the trace), kernels {}: {}", seconds(g.copy_busy_ns),
                percent(static_cast<double>(g.copy_busy_ns) / static_cast<double>(g.span_ns)), seconds(g.busy_ns),
                kinds)));
    }
    const CopyStats& htod = g.copy(CopyKind::htod);
    const CopyStats& dtoh = g.copy(CopyKind::dtoh);
    const std::uint64_t pageable_bytes = htod.pageable_bytes + dtoh.pageable_bytes;
    if (pageable_bytes >= pageable_min_bytes) {
        std::string parts;
        for (const auto& [name, s] : {std::pair{"HtoD", &htod}, std::pair{"DtoH", &dtoh}}) {
            if (s->pageable_count > 0) {
                parts += fmt::format("{}{} {} of {} ({} of {}, {})", parts.empty() ? "" : "; ", name, s->pageable_count,
                    s->count, format_bytes(s->pageable_bytes), format_bytes(s->bytes), seconds(s->pageable_ns));
            }
        }
        out.push_back(make_finding("profile.pageable_copies", &g, g.file,
            fmt::format("copies between the GPU and pageable host memory: {}", parts)));
    }
    if (g.kernels >= tiny_kernels_min_count &&
        static_cast<double>(g.tiny_kernels) >= tiny_kernels_min_share * static_cast<double>(g.kernels)) {
        out.push_back(make_finding("profile.tiny_kernels", &g, g.file,
            fmt::format("{} of {} kernels ran under {} us (median {:.1f} us)", g.tiny_kernels, g.kernels,
                tiny_kernel_ns / 1000, g.median_kernel_ns / 1000)));
    }
    if (g.gap_count > 0) {
        const Gap& longest = *std::max_element(g.longest_gaps.begin(), g.longest_gaps.end(),
            [](const Gap& a, const Gap& b) { return a.length_ns < b.length_ns; });
        out.push_back(make_finding("profile.idle_gaps", &g, g.file,
            fmt::format("{} idle gap{} of {:.3f} s or more, {} in all; the longest {} at {}", g.gap_count,
                g.gap_count == 1 ? "" : "s", options.gap_seconds, seconds(g.gap_total_ns), seconds(longest.length_ns),
                format_time(longest.start_ns))));
    }
}

} // namespace

const char* to_string(CopyKind kind)
{
    switch (kind) {
    case CopyKind::htod:
        return "htod";
    case CopyKind::dtoh:
        return "dtoh";
    case CopyKind::dtod:
        return "dtod";
    case CopyKind::ptop:
        return "ptop";
    case CopyKind::htoh:
        return "htoh";
    case CopyKind::other:
        return "other";
    }
    return "other";
}

const char* label(CopyKind kind)
{
    switch (kind) {
    case CopyKind::htod:
        return "HtoD";
    case CopyKind::dtoh:
        return "DtoH";
    case CopyKind::dtod:
        return "DtoD";
    case CopyKind::ptop:
        return "PtoP";
    case CopyKind::htoh:
        return "HtoH";
    case CopyKind::other:
        return "other";
    }
    return "other";
}

CopyKind copy_kind_from_number(std::int64_t number)
{
    switch (number) {
    case 1:
        return CopyKind::htod;
    case 2:
        return CopyKind::dtoh;
    case 8:
        return CopyKind::dtod;
    case 9:
        return CopyKind::htoh;
    case 10:
        return CopyKind::ptop;
    default:
        return CopyKind::other;
    }
}

CopyKind copy_kind_from_enum(std::string_view name, std::string_view label_text)
{
    const std::string n = upper_case(name);
    // CUDA_MEMCPY_KIND_UVM_HTOD is unified memory, not a plain HtoD copy.
    if (n.find("UVM") == std::string::npos && n.rfind("CUDA_MEMCPY_KIND_", 0) == 0) {
        const std::string kind = n.substr(17);
        for (CopyKind k : {CopyKind::htod, CopyKind::dtoh, CopyKind::dtod, CopyKind::ptop, CopyKind::htoh}) {
            if (kind == upper_case(label(k))) {
                return k;
            }
        }
        return CopyKind::other;
    }
    const std::string l = upper_case(label_text);
    for (auto [text, k] : {std::pair{"HOST-TO-DEVICE", CopyKind::htod}, std::pair{"DEVICE-TO-HOST", CopyKind::dtoh},
             std::pair{"DEVICE-TO-DEVICE", CopyKind::dtod}, std::pair{"PEER-TO-PEER", CopyKind::ptop},
             std::pair{"HOST-TO-HOST", CopyKind::htoh}}) {
        if (l == text || l == upper_case(label(k))) {
            return k;
        }
    }
    return CopyKind::other;
}

std::string format_duration(double ns)
{
    if (ns >= 1e9) {
        return fmt::format("{:.3f} s", ns / 1e9);
    }
    if (ns >= 1e6) {
        return fmt::format("{:.1f} ms", ns / 1e6);
    }
    if (ns >= 1e3) {
        return fmt::format("{:.1f} us", ns / 1e3);
    }
    return fmt::format("{:.0f} ns", ns);
}

std::string format_time(std::int64_t ns)
{
    return fmt::format("{:.3f} s", static_cast<double>(ns) / 1e9);
}

double CopyStats::bandwidth_gbps() const
{
    return total_ns > 0 ? static_cast<double>(bytes) / static_cast<double>(total_ns) : 0;
}

double GpuSummary::busy_share() const
{
    return span_ns > 0 ? static_cast<double>(busy_ns) / static_cast<double>(span_ns) : 0;
}

double GpuSummary::busy_share_with_copies() const
{
    return span_ns > 0 ? static_cast<double>(busy_with_copies_ns) / static_cast<double>(span_ns) : 0;
}

std::int64_t union_length(std::vector<std::pair<std::int64_t, std::int64_t>>& intervals)
{
    std::sort(intervals.begin(), intervals.end());
    std::int64_t total = 0;
    bool open = false;
    std::int64_t start = 0;
    std::int64_t end = 0;
    for (const auto& [s, e] : intervals) {
        if (open && s <= end) {
            end = std::max(end, e);
            continue;
        }
        if (open) {
            total += end - start;
        }
        open = true;
        start = s;
        end = e;
    }
    if (open) {
        total += end - start;
    }
    return total;
}

Summary summarize(const std::vector<Trace>& traces, const Options& options)
{
    Summary out;
    out.options = options;
    std::vector<Finding> findings;
    for (const Trace& trace : traces) {
        ReportSummary r;
        r.file = trace.file;
        r.product_version = trace.product_version;
        r.schema_version = trace.schema_version;
        r.notes = trace.notes;

        std::map<std::uint32_t, DeviceEvents> devices;
        std::int64_t first = 0;
        std::int64_t last = 0;
        bool any = false;
        auto seen = [&](std::int64_t start, std::int64_t end) {
            first = any ? std::min(first, start) : start;
            last = any ? std::max(last, end) : end;
            any = true;
        };
        for (const Kernel& k : trace.kernels) {
            if (!counted(k.start, k.end)) {
                ++r.skipped;
                continue;
            }
            ++r.kernels;
            devices[k.device].kernels.push_back(&k);
            seen(k.start, k.end);
        }
        for (const Copy& c : trace.copies) {
            if (!counted(c.start, c.end)) {
                ++r.skipped;
                continue;
            }
            r.copies += c.count;
            devices[c.device].copies.push_back(&c);
            seen(c.start, c.end);
        }
        for (const Memset& m : trace.memsets) {
            if (!counted(m.start, m.end)) {
                ++r.skipped;
                continue;
            }
            ++r.memsets;
            devices[m.device].memsets.push_back(&m);
            seen(m.start, m.end);
        }
        std::int64_t span_start = trace.span_start;
        std::int64_t span_end = trace.span_end;
        if (span_end <= span_start) {
            span_start = first;
            span_end = last;
            if (any) {
                r.notes.emplace_back("no trace span in the export (ANALYSIS_DETAILS): shares are of the time from the "
                                     "first to the last GPU operation");
            }
        }
        r.span_ns = span_end - span_start;

        std::vector<Finding> mine;
        if (r.kernels == 0) {
            mine.push_back(make_finding("profile.no_kernels", nullptr, trace.file,
                any ? fmt::format("no CUDA kernels in {} ({} copies, {} memsets)", trace.file, r.copies, r.memsets)
                    : fmt::format("no CUDA kernels, copies or memsets in {}", trace.file)));
        }
        for (const auto& [device, events] : devices) {
            out.gpus.push_back(summarize_gpu(trace, device, events, span_start, span_end, options));
            judge(out.gpus.back(), options, mine);
        }
        findings.insert(findings.end(), mine.begin(), mine.end());
        out.reports.push_back(std::move(r));
    }
    for (Severity s : {Severity::fail, Severity::warn, Severity::info}) {
        for (const auto& f : findings) {
            if (f.severity == s) {
                out.findings.push_back(f);
            }
        }
    }
    return out;
}

const std::vector<FindingCode>& finding_codes()
{
    static const std::vector<FindingCode> codes = {
        {"profile.low_busy", Severity::warn, "a GPU ran kernels for only part of the trace",
            "The union of the GPU's kernel intervals (time during which at least one kernel ran; overlapping "
            "kernels count once) is below --min-busy of the trace's span. The GPU waited for the rest: for the "
            "input pipeline, the CPU, copies, communication, or start-up. The message also gives the share between "
            "the first and the last GPU operation, which leaves out start-up and shutdown.",
            "look at what the CPU threads do while the GPU idles (nsys's timeline, OS runtime rows): speed up data "
            "loading (more DataLoader workers, pin_memory=True, prefetching), overlap copies with compute, remove "
            "synchronisations (.item(), .cpu(), cudaDeviceSynchronize) from the step; when start-up dominates, "
            "profile a steady window (nsys profile --delay, or --capture-range=cudaProfilerApi)"},
        {"profile.copies_dominate", Severity::warn, "a GPU spent more time copying than computing",
            "The union of the GPU's memcpy intervals is at least as long as that of its kernels and at least a "
            "tenth of the trace: the job moves data more than it computes with it.",
            "keep data on the GPU between steps; batch small copies into large ones; overlap copies with compute "
            "on separate streams (non_blocking=True from pinned memory); for peer copies, check that the GPUs "
            "have P2P (gpudoctor check, p2p probe)"},
        {"profile.pageable_copies", Severity::warn, "copies between GPU and host go through pageable memory",
            "Host-to-device or device-to-host copies of at least 1 MiB in all read or wrote pageable (not "
            "page-locked) host memory. The driver stages such copies through a pinned bounce buffer: they are "
            "slower and cannot overlap with compute.",
            "allocate host buffers pinned: cudaMallocHost/cudaHostAlloc, or cudaHostRegister an existing buffer; "
            "in PyTorch DataLoader(pin_memory=True) and tensor.pin_memory(), then .to(device, non_blocking=True)"},
        {"profile.tiny_kernels", Severity::warn, "a GPU ran many tiny kernels",
            "At least 1000 kernels ran on the GPU and at least half of them took less than 10 us. Each launch "
            "costs a few microseconds of CPU time, so the GPU waits for the launches rather than computing.",
            "fuse small operations (torch.compile, XLA, fused optimizers such as fused=True Adam), capture the step "
            "in a CUDA graph, or give each kernel more work (a larger batch)"},
        {"profile.idle_gaps", Severity::warn, "a GPU stood idle for long stretches",
            "Between the GPU's first and last operation (kernels, copies, memsets), stretches of at least --gap "
            "seconds (default 0.5) passed without any. Start-up before the first operation and the end after the "
            "last are not counted.",
            "find what the CPU did during the gaps on nsys's timeline (data loading, checkpointing, evaluation, "
            "a barrier waiting for a slower rank) and overlap it with GPU work or move it off the step"},
        {"profile.no_kernels", Severity::info, "an export holds no CUDA kernels",
            "The export has CUDA activity tables but no kernel in them: the program did not use a GPU while it "
            "was profiled, or the capture range held none of its work.",
            "check that the program runs on the GPU (device placement, CUDA_VISIBLE_DEVICES) and that nsys traced "
            "CUDA (--trace cuda) over the part of the run that computes"},
    };
    return codes;
}

} // namespace base::nsys
