#include "doctor/engine/prometheus_report.hpp"

#include "doctor/engine/probe.hpp"
#include "doctor/engine/report.hpp"

#include <cmath>
#include <fmt/format.h>
#include <map>
#include <set>
#include <tuple>

namespace doctor::engine {

namespace {

/// One metric family: its HELP and TYPE lines, then its samples, kept together as the format
/// requires. A label set seen twice is written once (node_exporter rejects duplicate series).
class Family {
public:
    Family(std::string name, std::string help) : m_name(std::move(name)), m_help(std::move(help)) { }

    void add(const std::vector<std::pair<std::string, std::string>>& labels, double value)
    {
        std::string set;
        for (const auto& [key, text] : labels) {
            set += fmt::format("{}{}=\"{}\"", set.empty() ? "" : ",", key, prometheus_label_value(text));
        }
        if (!m_seen.insert(set).second) {
            return;
        }
        m_samples += fmt::format("{}{} {}\n", m_name, set.empty() ? "" : "{" + set + "}", number(value));
    }

    void write(std::string& out) const
    {
        if (!m_samples.empty()) {
            out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}", m_name, m_help, m_name, m_samples);
        }
    }

private:
    static std::string number(double v)
    {
        if (std::isnan(v)) {
            return "NaN";
        }
        if (std::isinf(v)) {
            return v > 0 ? "+Inf" : "-Inf";
        }
        return fmt::format("{}", v);
    }

    std::string m_name;
    std::string m_help;
    std::string m_samples;
    std::set<std::string> m_seen;
};

const nlohmann::json* number_at(const nlohmann::json& object, std::initializer_list<const char*> path)
{
    const nlohmann::json* at = &object;
    for (const char* key : path) {
        if (!at->is_object() || !at->contains(key)) {
            return nullptr;
        }
        at = &(*at)[key];
    }
    return at->is_number() ? at : nullptr;
}

std::string text_at(const nlohmann::json& object, const char* key)
{
    if (!object.is_object() || !object.contains(key)) {
        return "";
    }
    const auto& v = object[key];
    return v.is_string() ? v.get<std::string>() : v.is_number() ? v.dump() : "";
}

void gpu_facts(const Facts& facts, std::vector<Family>& out)
{
    const auto* nvml = facts.nvml().get();
    if (nvml == nullptr || !nvml->gpus) {
        return;
    }
    Family count("gpudoctor_gpus", "GPUs NVML lists on this node.");
    count.add({}, static_cast<double>(nvml->gpus->size()));
    Family ecc("gpudoctor_gpu_ecc_errors", "Aggregate ECC error counts of each GPU, as NVML reports them.");
    Family since_reset("gpudoctor_gpu_ecc_errors_since_reset",
        "Volatile ECC error counts of each GPU: since the last driver load or GPU reset.");
    using Counter = std::optional<std::uint64_t> facts::NvmlGpu::*;
    for (const auto& gpu : *nvml->gpus) {
        for (auto [family, counter, type] :
            {std::tuple<Family*, Counter, const char*>{&ecc, &facts::NvmlGpu::ecc_corrected, "corrected"},
                {&ecc, &facts::NvmlGpu::ecc_uncorrected, "uncorrected"},
                {&since_reset, &facts::NvmlGpu::ecc_corrected_volatile, "corrected"},
                {&since_reset, &facts::NvmlGpu::ecc_uncorrected_volatile, "uncorrected"}}) {
            if (const auto& n = gpu.*counter) {
                family->add({{"gpu", std::to_string(gpu.index)}, {"bus_id", gpu.bus_id}, {"type", type}},
                    static_cast<double>(*n));
            }
        }
    }
    out.push_back(std::move(count));
    out.push_back(std::move(ecc));
    out.push_back(std::move(since_reset));
}

void measurements(const Facts& facts, std::vector<Family>& out)
{
    constexpr double giga = 1e9;
    Family copies("gpudoctor_copy_bandwidth_bytes_per_second",
        "Median copy bandwidth of each GPU measured by check --deep: h2d and d2h through pinned host memory, d2d "
        "within the GPU.");
    Family p2p("gpudoctor_p2p_bandwidth_bytes_per_second",
        "Median GPU-to-GPU copy bandwidth measured by check --deep, from GPU src to GPU dst.");
    Family latency("gpudoctor_p2p_latency_seconds", "GPU-to-GPU copy latency measured by check --deep.");
    if (const auto* bw = collector_facts(facts, "bandwidth"); bw != nullptr && bw->is_object()) {
        if (bw->contains("gpus") && (*bw)["gpus"].is_array()) {
            for (const auto& gpu : (*bw)["gpus"]) {
                for (const char* direction : {"h2d", "d2h", "d2d"}) {
                    if (const auto* v = number_at(gpu, {direction, "median_gbps"})) {
                        copies.add({{"gpu", text_at(gpu, "index")}, {"bus_id", text_at(gpu, "bus_id")},
                                       {"direction", direction}},
                            v->get<double>() * giga);
                    }
                }
            }
        }
        if (bw->contains("peers") && (*bw)["peers"].is_array()) {
            for (const auto& peer : (*bw)["peers"]) {
                const std::vector<std::pair<std::string, std::string>> labels = {
                    {"src", text_at(peer, "src")}, {"dst", text_at(peer, "dst")}};
                if (const auto* v = number_at(peer, {"bandwidth", "median_gbps"})) {
                    p2p.add(labels, v->get<double>() * giga);
                }
                if (const auto* v = number_at(peer, {"latency_us"})) {
                    latency.add(labels, v->get<double>() / 1e6);
                }
            }
        }
    }
    Family busbw("gpudoctor_allreduce_bus_bandwidth_bytes_per_second",
        "NCCL all-reduce bus bandwidth over the node's GPUs measured by check --deep (busbw as nccl-tests counts "
        "it).");
    Family algbw("gpudoctor_allreduce_algorithm_bandwidth_bytes_per_second",
        "NCCL all-reduce algorithm bandwidth (bytes per GPU over time) measured by check --deep.");
    if (const auto* ar = collector_facts(facts, "allreduce"); ar != nullptr && ar->is_object()) {
        const std::vector<std::pair<std::string, std::string>> labels = {{"gpus", text_at(*ar, "ranks")}};
        if (const auto* v = number_at(*ar, {"busbw_gbps"})) {
            busbw.add(labels, v->get<double>() * giga);
        }
        if (const auto* v = number_at(*ar, {"algbw_gbps"})) {
            algbw.add(labels, v->get<double>() * giga);
        }
    }
    for (auto* f : {&copies, &p2p, &latency, &busbw, &algbw}) {
        out.push_back(std::move(*f));
    }
}

} // namespace

int severity_level(Severity severity)
{
    switch (severity) {
    case Severity::pass:
    case Severity::info:
        return 0;
    case Severity::skip:
        return 1;
    case Severity::warn:
        return 2;
    case Severity::fail:
        return 3;
    case Severity::error:
        return 4;
    }
    return 4;
}

std::string prometheus_label_value(std::string_view value)
{
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

std::string render_prometheus(const Verdict& verdict, const Facts* facts, double now, const std::string& version)
{
    const std::pair<std::string, std::string> sub{"subcommand", verdict.subcommand};
    constexpr const char* scale = "0 pass, 1 skip, 2 warn, 3 fail, 4 error";
    std::vector<Family> families;
    Family status("gpudoctor_probe_status", fmt::format("Worst finding of each probe that ran: {}.", scale));
    Family finding("gpudoctor_finding", fmt::format("One series per finding, valued by its severity: {}.", scale));
    std::map<Severity, unsigned> counts = {
        {Severity::pass, 0}, {Severity::warn, 0}, {Severity::fail, 0}, {Severity::skip, 0}, {Severity::error, 0}};
    for (const auto& g : verdict.groups) {
        int worst = g.findings.empty() ? severity_level(Severity::skip) : 0;
        for (const auto& f : g.findings) {
            worst = std::max(worst, severity_level(f.severity));
            ++counts[f.severity];
            finding.add(
                {sub, {"probe", g.name}, {"code", f.code}, {"severity", to_string(f.severity)}, {"subject", f.subject}},
                severity_level(f.severity));
        }
        status.add({sub, {"probe", g.name}}, worst);
    }
    Family findings("gpudoctor_findings", "Findings of each severity in the last run of the subcommand.");
    for (const auto& [severity, n] : counts) {
        findings.add({sub, {"severity", to_string(severity)}}, n);
    }
    Family exit("gpudoctor_exit_code",
        "Exit status of the subcommand's last run: 0 fit (warnings allowed), 1 a finding failed or a probe broke.");
    exit.add({sub}, verdict.exit_code());
    Family when("gpudoctor_last_run_timestamp_seconds", "When the subcommand last ran, in Unix time.");
    when.add({sub}, now);
    Family info(
        "gpudoctor_info", "gpudoctor's version and whether warnings failed (--strict, --fail-on warn); always 1.");
    info.add({sub, {"version", version}, {"strict", verdict.fail_on == Severity::warn ? "true" : "false"}}, 1);
    for (auto* f : {&status, &finding, &findings, &exit, &when, &info}) {
        families.push_back(std::move(*f));
    }
    if (facts != nullptr) {
        gpu_facts(*facts, families);
        measurements(*facts, families);
    }
    std::string out;
    for (const auto& f : families) {
        f.write(out);
    }
    return out;
}

} // namespace doctor::engine
