#include "doctor/profile/report.hpp"

#include "base/byte_size.hpp"
#include "base/error.hpp"
#include "base/nsys/reader.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <iostream>

namespace doctor::profile {

namespace {

using base::Error;
namespace nsys = base::nsys;

double to_seconds(std::int64_t ns)
{
    return static_cast<double>(ns) / 1e9;
}

std::string duration(double ns)
{
    return nsys::format_duration(ns);
}

// "12.50 GB/s", "4.00 MB/s": bytes per second in powers of 1000.
std::string bandwidth(const nsys::CopyStats& s)
{
    if (s.total_ns <= 0) {
        return "-";
    }
    const double gbps = s.bandwidth_gbps();
    return gbps >= 1 ? fmt::format("{:.2f} GB/s", gbps) : fmt::format("{:.2f} MB/s", gbps * 1000);
}

std::string percent(double share)
{
    return fmt::format("{:.1f}%", share * 100);
}

std::string counted(std::uint64_t n, const char* one, const char* many)
{
    return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string shortened(const std::string& name, std::size_t width)
{
    return name.size() <= width ? name : name.substr(0, width - 3) + "...";
}

std::string gpu_title(const nsys::GpuSummary& g)
{
    return fmt::format("GPU {}{} ({})", g.device, g.name.empty() ? "" : ": " + g.name, g.file);
}

nlohmann::json copy_json(const nsys::CopyStats& s, bool pageable)
{
    nlohmann::json out = {{"count", s.count}, {"bytes", s.bytes}, {"seconds", to_seconds(s.total_ns)},
        {"bandwidth_gbps", s.bandwidth_gbps()}};
    if (pageable) {
        out["pageable"] = {
            {"count", s.pageable_count}, {"bytes", s.pageable_bytes}, {"seconds", to_seconds(s.pageable_ns)}};
    }
    return out;
}

std::string copy_row(const char* kind, const nsys::CopyStats& s)
{
    std::string row = fmt::format("{:<6} {:>8}  {:>11}  {:>10}  {:>11}", kind, s.count, base::format_bytes(s.bytes),
        duration(static_cast<double>(s.total_ns)), bandwidth(s));
    if (s.pageable_count > 0) {
        row += fmt::format("  ({} pageable, {})", s.pageable_count, base::format_bytes(s.pageable_bytes));
    }
    return row;
}

} // namespace

nlohmann::json render_profile_json(const nsys::Summary& summary)
{
    nlohmann::json reports = nlohmann::json::array();
    for (const auto& r : summary.reports) {
        reports.push_back({{"file", r.file},
            {"product_version",
                r.product_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.product_version)},
            {"schema_version", r.schema_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.schema_version)},
            {"span_seconds", to_seconds(r.span_ns)}, {"kernels", r.kernels}, {"copies", r.copies},
            {"memsets", r.memsets}, {"skipped_events", r.skipped}, {"notes", r.notes}});
    }
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& g : summary.gpus) {
        nlohmann::json top = nlohmann::json::array();
        for (const auto& k : g.top_kernels) {
            top.push_back({{"name", k.name}, {"count", k.count}, {"total_seconds", to_seconds(k.total_ns)},
                {"mean_seconds", k.mean_ns / 1e9}, {"median_seconds", k.median_ns / 1e9},
                {"min_seconds", to_seconds(k.min_ns)}, {"max_seconds", to_seconds(k.max_ns)}, {"share", k.share}});
        }
        nlohmann::json copies = nlohmann::json::object();
        for (std::size_t i = 0; i < nsys::copy_kind_count; ++i) {
            const auto kind = static_cast<nsys::CopyKind>(i);
            copies[nsys::to_string(kind)] =
                copy_json(g.copies[i], kind == nsys::CopyKind::htod || kind == nsys::CopyKind::dtoh);
        }
        nlohmann::json peers = nlohmann::json::array();
        for (const auto& p : g.peers) {
            nlohmann::json entry = copy_json(p.copies, false);
            entry["src_device"] = p.src_device >= 0 ? nlohmann::json(p.src_device) : nlohmann::json(nullptr);
            entry["dst_device"] = p.dst_device >= 0 ? nlohmann::json(p.dst_device) : nlohmann::json(nullptr);
            peers.push_back(entry);
        }
        nlohmann::json streams = nlohmann::json::array();
        for (const auto& s : g.streams) {
            streams.push_back({{"stream", s.stream >= 0 ? nlohmann::json(s.stream) : nlohmann::json(nullptr)},
                {"kernels", s.kernels}, {"seconds", to_seconds(s.total_ns)}});
        }
        nlohmann::json gaps = nlohmann::json::array();
        for (const auto& gap : g.longest_gaps) {
            gaps.push_back({{"start_seconds", to_seconds(gap.start_ns)}, {"seconds", to_seconds(gap.length_ns)}});
        }
        const std::int64_t active = g.last_ns - g.first_ns;
        gpus.push_back({{"file", g.file}, {"device_id", g.device},
            {"name", g.name.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.name)},
            {"span_seconds", to_seconds(g.span_ns)}, {"busy_seconds", to_seconds(g.busy_ns)},
            {"busy_share", g.busy_share()}, {"busy_with_copies_seconds", to_seconds(g.busy_with_copies_ns)},
            {"busy_share_with_copies", g.busy_share_with_copies()},
            {"active",
                {{"first_seconds", to_seconds(g.first_ns)}, {"last_seconds", to_seconds(g.last_ns)},
                    {"busy_share", active > 0 ? static_cast<double>(g.busy_ns) / static_cast<double>(active) : 0.0}}},
            {"copy_busy_seconds", to_seconds(g.copy_busy_ns)},
            {"kernels",
                {{"count", g.kernels}, {"distinct", g.distinct_kernels}, {"seconds", to_seconds(g.kernel_total_ns)},
                    {"median_seconds", g.median_kernel_ns / 1e9}, {"tiny", g.tiny_kernels}}},
            {"top_kernels", top}, {"copies", copies}, {"memsets", copy_json(g.memsets, false)}, {"peer_copies", peers},
            {"streams", streams},
            {"idle_gaps",
                {{"threshold_seconds", summary.options.gap_seconds}, {"count", g.gap_count},
                    {"seconds", to_seconds(g.gap_total_ns)}, {"longest", gaps}}}});
    }
    nlohmann::json findings = nlohmann::json::array();
    for (const auto& f : summary.findings) {
        findings.push_back(base::to_json(f));
    }
    return {{"reports", reports}, {"gpus", gpus}, {"findings", findings},
        {"options",
            {{"gap_seconds", summary.options.gap_seconds}, {"top", summary.options.top},
                {"min_busy", summary.options.min_busy}}}};
}

std::string render_profile_text(const nsys::Summary& summary, bool color)
{
    const char* bold = color ? "\033[1m" : "";
    const char* reset = color ? "\033[0m" : "";
    std::string out = fmt::format("{}Nsight Systems profile{}: {}, {}\n", bold, reset,
        counted(summary.reports.size(), "export", "exports"), counted(summary.gpus.size(), "GPU", "GPUs"));
    for (const auto& r : summary.reports) {
        std::string version;
        if (!r.product_version.empty()) {
            version = fmt::format(" (nsys {}{})", r.product_version,
                r.schema_version.empty() ? "" : fmt::format(", schema {}", r.schema_version));
        } else if (!r.schema_version.empty()) {
            version = fmt::format(" (schema {})", r.schema_version);
        }
        out += fmt::format("{}{}: {} traced; {}, {}, {}\n", r.file, version, duration(static_cast<double>(r.span_ns)),
            counted(r.kernels, "kernel", "kernels"), counted(r.copies, "copy", "copies"),
            counted(r.memsets, "memset", "memsets"));
        if (r.skipped > 0) {
            out += fmt::format("  note: {} without timestamps left out\n", counted(r.skipped, "event", "events"));
        }
        for (const auto& note : r.notes) {
            out += fmt::format("  note: {}\n", note);
        }
    }
    for (const auto& g : summary.gpus) {
        out += fmt::format("\n{}{}{}\n", bold, gpu_title(g), reset);
        out += fmt::format("  busy     {} kernels ({} of {}), {} with copies and memsets; operations from {} to {}\n",
            percent(g.busy_share()), duration(static_cast<double>(g.busy_ns)), duration(static_cast<double>(g.span_ns)),
            percent(g.busy_share_with_copies()), nsys::format_time(g.first_ns), nsys::format_time(g.last_ns));
        if (g.kernels == 0) {
            out += "  kernels  none\n";
        } else {
            out += fmt::format("  kernels  {} ({} distinct), {} summed, median {}, on {}\n", g.kernels,
                g.distinct_kernels, duration(static_cast<double>(g.kernel_total_ns)), duration(g.median_kernel_ns),
                counted(g.streams.size(), "stream", "streams"));
            out += fmt::format(
                "           {:>11}  {:>8}  {:>11}  {:>11}  {:>6}  name\n", "total", "count", "mean", "median", "share");
            for (const auto& k : g.top_kernels) {
                out += fmt::format("           {:>11}  {:>8}  {:>11}  {:>11}  {:>6}  {}\n",
                    duration(static_cast<double>(k.total_ns)), k.count, duration(k.mean_ns), duration(k.median_ns),
                    percent(k.share), shortened(k.name, 80));
            }
            if (g.distinct_kernels > g.top_kernels.size()) {
                out += fmt::format("           ... {} more (--top N, --json)\n",
                    counted(g.distinct_kernels - g.top_kernels.size(), "kernel", "kernels"));
            }
            std::string streams;
            for (const auto& s : g.streams) {
                streams += fmt::format("{}{}: {} ({})", streams.empty() ? "" : "; ",
                    s.stream >= 0 ? std::to_string(s.stream) : std::string("?"), s.kernels,
                    duration(static_cast<double>(s.total_ns)));
            }
            out += fmt::format("  streams  {}\n", streams);
        }
        bool any_copy = g.memsets.count > 0;
        for (const auto& c : g.copies) {
            any_copy = any_copy || c.count > 0;
        }
        if (!any_copy) {
            out += "  copies   none\n";
        } else {
            out += fmt::format(
                "  copies   {:<6} {:>8}  {:>11}  {:>10}  {:>11}\n", "kind", "count", "bytes", "time", "bandwidth");
            for (std::size_t i = 0; i < nsys::copy_kind_count; ++i) {
                if (g.copies[i].count > 0) {
                    out += "           " + copy_row(nsys::label(static_cast<nsys::CopyKind>(i)), g.copies[i]) + "\n";
                }
            }
            if (g.memsets.count > 0) {
                out += "           " + copy_row("memset", g.memsets) + "\n";
            }
        }
        if (!g.peers.empty()) {
            out += "  peer copies seen by CUPTI (copy engine; NCCL's transfers run as kernels):\n";
            for (const auto& p : g.peers) {
                auto dev = [](std::int64_t d) { return d >= 0 ? fmt::format("gpu {}", d) : std::string("gpu ?"); };
                out += fmt::format("           {} -> {}: {}, {}, {}, {}\n", dev(p.src_device), dev(p.dst_device),
                    counted(p.copies.count, "copy", "copies"), base::format_bytes(p.copies.bytes),
                    duration(static_cast<double>(p.copies.total_ns)), bandwidth(p.copies));
            }
        }
        if (g.gap_count == 0) {
            out += fmt::format("  idle     no gap of {:.3f} s or more\n", summary.options.gap_seconds);
        } else {
            std::string listed;
            for (const auto& gap : g.longest_gaps) {
                listed += fmt::format("{}{} at {}", listed.empty() ? "" : ", ",
                    duration(static_cast<double>(gap.length_ns)), nsys::format_time(gap.start_ns));
            }
            out +=
                fmt::format("  idle     {} of {:.3f} s or more, {} in all: {}{}\n", counted(g.gap_count, "gap", "gaps"),
                    summary.options.gap_seconds, duration(static_cast<double>(g.gap_total_ns)), listed,
                    g.gap_count > g.longest_gaps.size() ? " (the longest)" : "");
        }
    }
    out += fmt::format("\n{}Findings{}\n", bold, reset);
    if (summary.findings.empty()) {
        out += "  none\n";
    }
    for (const auto& f : summary.findings) {
        out += base::render_text(f, color);
    }
    return out;
}

int run_profile(const ProfileCommand& command)
{
    const auto threshold = base::parse_fail_on(command.judging.fail_on);
    if (!(command.gap_seconds > 0 && command.gap_seconds <= 86400)) {
        throw Error(fmt::format("--gap {}: expected seconds, more than 0 and at most 86400", command.gap_seconds));
    }
    if (command.top == 0 || command.top > 10000) {
        throw Error(fmt::format("--top {}: expected a number of kernels from 1 to 10000", command.top));
    }
    if (!(command.min_busy_percent >= 0 && command.min_busy_percent <= 100)) {
        throw Error(fmt::format("--min-busy {}: expected a percentage from 0 to 100", command.min_busy_percent));
    }
    if (command.files.empty()) {
        throw Error("profile: name the SQLite exports to read (FILE.sqlite, or a directory of them); see gpudoctor "
                    "profile --help");
    }
    std::vector<nsys::Trace> traces;
    for (const auto& file : nsys::export_files(command.files)) {
        traces.push_back(nsys::read_export(file));
    }
    nsys::Options options;
    options.gap_seconds = command.gap_seconds;
    options.top = command.top;
    options.min_busy = command.min_busy_percent / 100;
    const nsys::Summary summary = nsys::summarize(traces, options);
    const engine::Verdict verdict = engine::findings_verdict("profile", summary.findings, threshold);
    engine::write_verdict_files(command.judging.files, verdict, nullptr);
    if (command.json) {
        std::cout << render_profile_json(summary).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    } else if (command.judging.quiet) {
        std::cout << engine::render_problems(verdict, command.color);
    } else {
        std::cout << render_profile_text(summary, command.color);
    }
    return verdict.exit_code();
}

} // namespace doctor::profile
