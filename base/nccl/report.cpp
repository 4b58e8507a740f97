#include "base/json_writer.hpp"
#include "base/nccl/log.hpp"
#include "base/nccl/model.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <fmt/format.h>
#include <numeric>
#include <optional>

namespace base::nccl {

const char* to_string(Transport transport)
{
    switch (transport) {
    case Transport::p2p:
        return "p2p";
    case Transport::shm:
        return "shm";
    case Transport::nvls:
        return "nvls";
    case Transport::collnet:
        return "collnet";
    case Transport::net_ib:
        return "net_ib";
    case Transport::net_ib_gdr:
        return "net_ib_gdr";
    case Transport::net_socket:
        return "net_socket";
    case Transport::net_other:
        return "net_other";
    }
    return "?";
}

namespace {

std::string transport_text(const std::uint64_t (&counts)[transport_count])
{
    std::string out;
    for (std::size_t i = 0; i < transport_count; ++i) {
        if (counts[i] != 0) {
            out += fmt::format("{}{} {}", out.empty() ? "" : ", ", to_string(static_cast<Transport>(i)), counts[i]);
        }
    }
    return out.empty() ? "none" : out;
}

std::string counted(std::uint64_t n, const char* one, const char* many)
{
    return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string joined(const std::vector<std::string>& items)
{
    return fmt::format("{}", fmt::join(items, ", "));
}

// The transport classes in the order of their names, as a JSON object keeps its keys.
const std::array<Transport, transport_count>& transports_by_name()
{
    static const std::array<Transport, transport_count> order = [] {
        std::array<Transport, transport_count> o{};
        for (std::size_t i = 0; i < transport_count; ++i) {
            o[i] = static_cast<Transport>(i);
        }
        std::sort(
            o.begin(), o.end(), [](Transport x, Transport y) { return std::strcmp(to_string(x), to_string(y)) < 0; });
        return o;
    }();
    return order;
}

void write_transports(base::JsonWriter& w, const std::uint64_t (&counts)[transport_count], bool nonzero_only)
{
    w.begin_object();
    for (const Transport t : transports_by_name()) {
        const std::uint64_t n = counts[static_cast<std::size_t>(t)];
        if (!nonzero_only || n != 0) {
            w.member(to_string(t), n);
        }
    }
    w.end();
}

// The numbers of a summary, of all jobs or of one (which has no line count of its own).
struct SummaryNumbers {
    std::uint64_t communicators;
    std::uint64_t connections;
    std::uint64_t hosts;
    std::optional<std::uint64_t> lines;
    std::uint64_t processes;
    std::uint64_t processes_init_complete;
    std::uint64_t ranks;
    std::uint64_t records;
    std::uint64_t warnings;
};

void write_summary(base::JsonWriter& w, const SummaryNumbers& n, const std::uint64_t (&counts)[transport_count])
{
    w.begin_object().member("communicators", n.communicators).member("connections", n.connections);
    w.member("hosts", n.hosts);
    if (n.lines) {
        w.member("lines", *n.lines);
    }
    w.member("processes", n.processes).member("processes_init_complete", n.processes_init_complete);
    w.member("ranks", n.ranks).member("records", n.records).key("transports");
    write_transports(w, counts, false);
    w.member("warnings", n.warnings).end();
}

void write_findings(base::JsonWriter& w, const std::vector<Finding>& findings)
{
    w.begin_array();
    for (const auto& f : findings) {
        w.value(base::to_json(f));
    }
    w.end();
}

} // namespace

// Keys in the order nlohmann::json keeps them (by name), so that render_json gives the same text.
void write_json(const Analysis& a, std::string& out)
{
    base::JsonWriter w(out, 2);
    w.begin_object();
    w.key("communicators").begin_array();
    for (const auto& c : a.communicators) {
        w.begin_object()
            .member("collnet_channels", c.collnet_channels)
            .member("connections", c.connections)
            .key("hosts")
            .strings(c.hosts)
            .member("id", c.id)
            .member("job", c.job + 1)
            .key("links")
            .begin_array();
        for (const auto& l : c.links) {
            w.begin_object().member("from", l.from).key("paths").begin_object();
            for (const auto& [path, n] : l.paths) {
                w.member(path, n);
            }
            w.end().member("to", l.to).key("transports");
            write_transports(w, l.counts, true);
            w.end();
        }
        w.end().member("nranks", c.nranks).member("nvls_channels", c.nvls_channels).key("ranks").begin_array();
        for (const auto& r : c.ranks) {
            w.begin_object()
                .member("bus_id", r.bus_id)
                .member("cuda_dev", r.cuda_dev)
                .member("host", r.host)
                .member("init_complete", r.init_complete)
                .member("nvml_dev", r.nvml_dev)
                .member("pid", r.pid)
                .member("rank", r.rank)
                .member("where", r.where.str())
                .end();
        }
        w.end().key("versions").strings(c.versions).member("where", c.first.str()).end();
    }
    w.end();
    w.key("findings");
    write_findings(w, a.findings);
    w.key("inputs").strings(a.inputs);
    w.key("jobs").begin_array();
    for (std::size_t j = 0; j < a.jobs.size(); ++j) {
        const Job& job = a.jobs[j];
        std::uint64_t job_warnings = 0;
        for (const auto& warn : job.warnings) {
            job_warnings += warn.count;
        }
        w.begin_object().key("communicators").begin_array();
        for (const std::size_t c : job.communicators) {
            w.value(a.communicators[c].id);
        }
        w.end().key("findings");
        write_findings(w, job.findings);
        w.key("hosts")
            .strings(job.hosts)
            .key("inputs")
            .strings(job.inputs)
            .member("job", j + 1)
            .key("nccl_versions")
            .strings(job.nccl_versions)
            .key("summary");
        write_summary(w,
            {job.communicators.size(), job.connections, job.hosts.size(), std::nullopt, job.processes,
                job.processes_init_complete, job.ranks, job.records, job_warnings},
            job.counts);
        w.end();
    }
    w.end();
    std::uint64_t warnings = 0;
    for (const auto& warn : a.warnings) {
        warnings += warn.count;
    }
    w.key("nccl_versions").strings(a.nccl_versions).key("skipped").strings(a.skipped).key("summary");
    write_summary(w,
        {a.communicators.size(), a.connections, a.hosts, a.lines, a.processes, a.processes_init_complete, a.ranks,
            a.records, warnings},
        a.counts);
    w.key("warnings").begin_array();
    for (const auto& warn : a.warnings) {
        w.begin_object()
            .member("count", warn.count)
            .member("example", warn.example)
            .member("job", warn.job + 1)
            .member("kind", warn.kind)
            .member("where", warn.where.str())
            .end();
    }
    w.end().end();
}

nlohmann::json render_json(const Analysis& a)
{
    std::string text;
    write_json(a, text);
    return nlohmann::json::parse(text);
}

namespace {

// The communicators, WARN groups and findings of one job (or of all, when there is one).
std::string render_body(const Analysis& a, const std::vector<std::size_t>& communicators,
    const std::vector<WarnGroup>& warnings, const std::vector<Finding>& findings, bool color, const char* indent)
{
    const char* bold = color ? "\033[1m" : "";
    const char* reset = color ? "\033[0m" : "";
    std::string out;
    constexpr std::size_t shown_ranks = 16;
    for (const std::size_t index : communicators) {
        const Communicator& c = a.communicators[index];
        out += fmt::format("\n{}{}Communicator {}{}: {} of {} ranks seen, {}{}{}\n", indent, bold, c.id, reset,
            c.ranks.size(), c.nranks, counted(c.hosts.size(), "host", "hosts"),
            c.hosts.empty() ? "" : " (" + joined(c.hosts) + ")",
            c.versions.empty() ? "" : ", NCCL " + joined(c.versions));
        if (!c.ranks.empty()) {
            out += fmt::format("{}  rank  host                  pid      cudaDev  nvmlDev  busId     init\n", indent);
        }
        for (std::size_t i = 0; i < c.ranks.size() && i < shown_ranks; ++i) {
            const Rank& r = c.ranks[i];
            out += fmt::format("{}  {:<5} {:<21} {:<8} {:<8} {:<8} {:<9} {}\n", indent, r.rank, r.host, r.pid,
                r.cuda_dev >= 0 ? std::to_string(r.cuda_dev) : "-", r.nvml_dev >= 0 ? std::to_string(r.nvml_dev) : "-",
                r.bus_id.empty() ? "-" : r.bus_id, r.init_complete ? "complete" : "started");
        }
        if (c.ranks.size() > shown_ranks) {
            out += fmt::format("{}  ... {} more ranks (--json lists them all)\n", indent, c.ranks.size() - shown_ranks);
        }
        if (c.nvls_channels > 0 || c.collnet_channels > 0) {
            out += fmt::format("{}  channels: {} NVLS, {} CollNet\n", indent, c.nvls_channels, c.collnet_channels);
        }
        if (c.links.empty()) {
            out += fmt::format("{}  no connection lines\n", indent);
            continue;
        }
        out += fmt::format("{}  connection lines by host pair:\n", indent);
        for (const auto& l : c.links) {
            std::string paths;
            for (const auto& [path, n] : l.paths) {
                paths += fmt::format("{}{} {}", paths.empty() ? "" : ", ", path, n);
            }
            out += fmt::format("{}    {:<32} {}  [{}]\n", indent, l.from == l.to ? l.from : l.from + " -> " + l.to,
                transport_text(l.counts), paths);
        }
    }
    if (!warnings.empty()) {
        out += fmt::format("\n{}{}WARN records{}\n", indent, bold, reset);
        for (const auto& w : warnings) {
            out += fmt::format("{}  {:>6}x  {}  (first at {})\n", indent, w.count, w.kind, w.where.str());
        }
    }
    out += fmt::format("\n{}{}Findings{}\n", indent, bold, reset);
    if (findings.empty()) {
        out += fmt::format("{}  none: every connection uses the transport the log shows the hardware allows\n", indent);
    }
    for (const auto& f : findings) {
        const std::string text = base::render_text(f, color);
        for (std::size_t at = 0; at < text.size();) {
            const std::size_t end = std::min(text.find('\n', at), text.size());
            out += indent + text.substr(at, end - at) + "\n";
            at = end + 1;
        }
    }
    return out;
}

} // namespace

std::string render_text(const Analysis& a, bool color)
{
    const char* bold = color ? "\033[1m" : "";
    const char* reset = color ? "\033[0m" : "";
    std::string out = fmt::format(
        "{}NCCL log{}: {} ({} lines, {} NCCL records)\n", bold, reset, joined(a.inputs), a.lines, a.records);
    if (!a.skipped.empty()) {
        out += fmt::format("Not read, not logs by name or content: {}\n", joined(a.skipped));
    }
    out += fmt::format("NCCL {}; {}, {} in {}, {}\n",
        a.nccl_versions.empty() ? std::string("version not shown") : joined(a.nccl_versions),
        counted(a.hosts, "host", "hosts"), counted(a.ranks, "rank", "ranks"),
        counted(a.processes, "process", "processes"), counted(a.communicators.size(), "communicator", "communicators"));
    if (a.jobs.size() <= 1) {
        std::vector<std::size_t> all(a.communicators.size());
        std::iota(all.begin(), all.end(), std::size_t{0});
        out += render_body(a, all, a.warnings, a.findings, color, "");
    } else {
        out += fmt::format("{} jobs, told apart by communicator ids, processes, ranks and NCCL versions; each has its "
                           "own findings\n",
            a.jobs.size());
        for (const auto& f : a.findings) {
            if (!f.facts.contains("job")) { // about the whole reading (nccl.truncated)
                out += "\n" + base::render_text(f, color);
            }
        }
        for (std::size_t j = 0; j < a.jobs.size(); ++j) {
            const Job& job = a.jobs[j];
            out +=
                fmt::format("\n{}Job {}{}: {}\n  NCCL {}; {}{}, {} in {}, {}\n", bold, j + 1, reset, joined(job.inputs),
                    job.nccl_versions.empty() ? std::string("version not shown") : joined(job.nccl_versions),
                    counted(job.hosts.size(), "host", "hosts"), job.hosts.empty() ? "" : " (" + joined(job.hosts) + ")",
                    counted(job.ranks, "rank", "ranks"), counted(job.processes, "process", "processes"),
                    counted(job.communicators.size(), "communicator", "communicators"));
            out += render_body(a, job.communicators, job.warnings, job.findings, color, "  ");
        }
    }
    out += fmt::format("\nSummary: {} ({})\n", counted(a.connections, "connection line", "connection lines"),
        transport_text(a.counts));
    return out;
}

std::string render_verdict(const Analysis& a)
{
    std::string out = fmt::format("NCCL: {} of {} finished init, {}, NCCL {}; connection lines: {}\n",
        a.processes_init_complete, counted(a.processes, "process", "processes"),
        counted(a.communicators.size(), "communicator", "communicators"),
        a.nccl_versions.empty() ? std::string("version not shown") : joined(a.nccl_versions), transport_text(a.counts));
    if (a.findings.empty()) {
        out += "  no problems found\n";
    }
    for (const auto& f : a.findings) {
        out += fmt::format("  {}{}: {}  [{}]{}\n", base::severity_label(f.severity, false), f.subject, f.message,
            f.code, f.where.known() ? fmt::format(" ({})", f.where.str()) : std::string());
    }
    return out;
}

} // namespace base::nccl
