#include "doctor/fleet/merge.hpp"

#include "base/error.hpp"
#include "base/gpu_bandwidth.hpp"
#include "doctor/engine/snapshot.hpp"
#include "doctor/fleet/codes.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string_view>

namespace doctor::fleet {

namespace {

using nlohmann::json;

constexpr std::array<const char*, 5> answer_words{"snapshot", "unreachable", "timed out", "crashed", "garbage"};

/// The JSON value at `path` in the facts, or nullptr.
const json* at(const json& facts, std::initializer_list<const char*> path)
{
    const json* node = &facts;
    for (const char* key : path) {
        if (!node->is_object()) {
            return nullptr;
        }
        const auto it = node->find(key);
        if (it == node->end() || it->is_null()) {
            return nullptr;
        }
        node = &*it;
    }
    return node;
}

std::string text_of(const json* value)
{
    if (value == nullptr) {
        return "";
    }
    return value->is_string() ? value->get<std::string>() : value->dump();
}

/// "8 × A" for eight equal values, "A, B" for different ones, in order of first appearance.
std::string counted(const std::vector<std::string>& values)
{
    std::vector<std::pair<std::string, unsigned>> seen;
    for (const auto& v : values) {
        auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == v; });
        if (it == seen.end()) {
            seen.emplace_back(v, 1);
        } else {
            ++it->second;
        }
    }
    std::vector<std::string> parts;
    for (const auto& [value, n] : seen) {
        parts.push_back(n == 1 ? value : fmt::format("{} × {}", n, value));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
}

/// What `describe` says of each GPU in NVML's facts.
std::vector<std::string> per_gpu(const engine::Facts& facts, std::string (*describe)(const facts::NvmlGpu& gpu))
{
    std::vector<std::string> out;
    if (const auto* nvml = facts.nvml().get(); nvml != nullptr && nvml->gpus) {
        for (const auto& g : *nvml->gpus) {
            out.push_back(describe(g));
        }
    }
    return out;
}

std::string gpu_count(const engine::Facts& facts)
{
    const auto* nvml = facts.nvml().get();
    return nvml != nullptr && nvml->gpus ? std::to_string(nvml->gpus->size()) : "";
}

std::string gpu_models(const engine::Facts& facts)
{
    return counted(per_gpu(facts, [](const facts::NvmlGpu& g) { return g.name.value_or(""); }));
}

/// An optional number as text, "" when missing.
template <typename T> std::string text_of(const std::optional<T>& value)
{
    return value ? fmt::format("{}", *value) : std::string();
}

std::string pcie_links(const engine::Facts& facts)
{
    return counted(per_gpu(facts, [](const facts::NvmlGpu& g) {
        const std::string gen = text_of(g.pcie_gen);
        const std::string width = text_of(g.pcie_width);
        return gen.empty() && width.empty() ? std::string() : fmt::format("gen{} x{}", gen, width);
    }));
}

/// A collector's facts as JSON, for the collectors without a struct of their own; null when absent.
const json& raw_of(const engine::Facts& facts, const char* collector)
{
    static const json missing;
    const json* raw = facts.raw(collector);
    return raw != nullptr ? *raw : missing;
}

std::string infiniband_ports(const engine::Facts& facts)
{
    std::vector<std::string> ports;
    if (const auto* network = facts.network().get()) {
        for (const auto& d : network->infiniband) {
            for (const auto& p : d.ports) {
                ports.push_back(fmt::format("{}/{} {} {}", d.name, p.port, p.state.value_or(""), p.rate.value_or("")));
            }
        }
    }
    return fmt::format("{}", fmt::join(ports, "; "));
}

/// A soft limit ("unlimited" or a number) as text, "" when missing.
std::string soft_limit(const engine::Facts& node, facts::RLimitFacts facts::LimitsFacts::*limit)
{
    const auto* limits = node.limits().get();
    if (limits == nullptr || !(limits->*limit).soft) {
        return "";
    }
    return text_of(&*(limits->*limit).soft);
}

std::string framework(const engine::Facts& facts, const char* name)
{
    const json* fw = at(raw_of(facts, "frameworks"), {"frameworks", name});
    if (fw == nullptr) {
        return "";
    }
    const json* installed = at(*fw, {"installed"});
    if (installed != nullptr && installed->is_boolean() && !installed->get<bool>()) {
        return "not installed";
    }
    return text_of(at(*fw, {"version"}));
}

/// A fact that should be equal across the nodes of a job and how it is read.
struct Comparable {
    const char* name;
    std::string (*read)(const engine::Facts& facts);
};

/// A fact of a collector without a struct of its own: where it is in its JSON (up to 3 keys).
template <std::size_t N>
std::string raw_text(const engine::Facts& facts, const char* collector, const char* (&&path)[N])
{
    const json* node = &raw_of(facts, collector);
    for (const char* key : path) {
        node = node == nullptr ? nullptr : at(*node, {key});
    }
    return text_of(node);
}

// In the order the reports list them.
const Comparable comparables[] = {
    {"driver",
        [](const engine::Facts& f) {
            return f.nvml().get() != nullptr ? f.nvml().get()->driver_version.value_or("") : std::string();
        }},
    {"cuda driver",
        [](const engine::Facts& f) {
            return f.nvml().get() != nullptr ? text_of(f.nvml().get()->cuda_driver_version) : std::string();
        }},
    {"gpus", gpu_count},
    {"gpu model", gpu_models},
    {"pcie link", pcie_links},
    {"cuda runtime",
        [](const engine::Facts& f) {
            return raw_text(f, "libraries", {"cudart", "version"});
        }},
    {"cudnn",
        [](const engine::Facts& f) {
            return raw_text(f, "libraries", {"cudnn", "version"});
        }},
    {"nccl",
        [](const engine::Facts& f) {
            return raw_text(f, "libraries", {"nccl", "version"});
        }},
    {"cublas",
        [](const engine::Facts& f) {
            return raw_text(f, "libraries", {"cublas", "version"});
        }},
    {"python", [](const engine::Facts& f) { return raw_text(f, "frameworks", {"python_version"}); }},
    {"torch", [](const engine::Facts& f) { return framework(f, "torch"); }},
    {"tensorflow", [](const engine::Facts& f) { return framework(f, "tensorflow"); }},
    {"jax", [](const engine::Facts& f) { return framework(f, "jax"); }},
    {"mpi",
        [](const engine::Facts& f) {
            return raw_text(f, "mpi", {"mpirun_version", "version"});
        }},
    {"kernel",
        [](const engine::Facts& f) {
            return f.host().get() != nullptr ? f.host().get()->kernel.value_or("") : std::string();
        }},
    {"infiniband", infiniband_ports},
    {"/dev/shm bytes",
        [](const engine::Facts& f) {
            return f.limits().get() != nullptr ? text_of(f.limits().get()->shm.bytes) : std::string();
        }},
    {"locked memory (soft)", [](const engine::Facts& f) { return soft_limit(f, &facts::LimitsFacts::memlock); }},
    {"open files (soft)", [](const engine::Facts& f) { return soft_limit(f, &facts::LimitsFacts::nofile); }},
};

/// The slowest GPU's median of one copy direction in check --deep's bandwidth facts.
std::optional<double> slowest_copy(const engine::Facts& facts, const char* direction)
{
    std::optional<double> slowest;
    const json* gpus = at(raw_of(facts, "bandwidth"), {"gpus"});
    for (std::size_t i = 0; gpus != nullptr && gpus->is_array() && i < gpus->size(); ++i) {
        const json* v = at((*gpus)[i], {direction, "median_gbps"});
        if (v != nullptr && v->is_number()) {
            slowest = std::min(slowest.value_or(v->get<double>()), v->get<double>());
        }
    }
    return slowest;
}

/// A measurement of check --deep compared across the nodes.
struct Measured {
    const char* name;
    std::optional<double> (*read)(const engine::Facts& facts);
};

constexpr Measured measured[] = {
    {"all-reduce busbw",
        [](const engine::Facts& f) {
            const json* v = at(raw_of(f, "allreduce"), {"busbw_gbps"});
            return v != nullptr && v->is_number() && v->get<double>() > 0 ? std::optional<double>(v->get<double>())
                                                                          : std::nullopt;
        }},
    {"host→device copy", [](const engine::Facts& f) { return slowest_copy(f, "h2d"); }},
    {"device→host copy", [](const engine::Facts& f) { return slowest_copy(f, "d2h"); }},
    {"device-local copy", [](const engine::Facts& f) { return slowest_copy(f, "d2d"); }},
};

constexpr const char* none = "(none)";

/// Findings worth a line in the fleet's report: warnings, failures, errors.
std::vector<engine::Finding> problems(const std::vector<engine::ProbeResult>& results)
{
    std::vector<engine::Finding> out;
    for (const auto& r : results) {
        for (const auto& f : r.findings) {
            if (base::badness(f.severity) > 0) {
                out.push_back(f);
            }
        }
    }
    return out;
}

NodeResult judge_node(
    const NodeOutput& output, const std::vector<const engine::Probe*>& probes, const engine::Policy& policy)
{
    NodeResult node;
    node.host = output.origin;
    node.answer = output.answer;
    if (output.answer != Answer::snapshot) {
        node.why = output.text;
        return node;
    }
    try {
        node.facts = engine::read_snapshot(output.text, output.origin);
        node.findings = problems(engine::judge(probes, node.facts, policy, output.origin));
    } catch (const base::Error& e) {
        // What the node said instead (an error message, a shell's complaint) is often the reason.
        const std::string_view text(output.text);
        node.answer = Answer::garbage;
        node.why = fmt::format("{}; it begins {}", e.what(), base::quote_input(text.substr(0, text.find('\n'))));
        node.facts = engine::Facts{};
    }
    return node;
}

/// The hostname in a node's facts, or "".
std::string hostname_of(const engine::Facts& facts)
{
    return facts.host().get() != nullptr ? facts.host().get()->hostname : std::string();
}

engine::Severity fail_on(const FleetReport& report)
{
    return report.strict ? engine::Severity::warn : engine::Severity::fail;
}

/// A node's findings as the fleet judges them: check's, fleet.no_answer, fleet.outlier.
std::vector<engine::Finding> node_findings(const FleetReport& report, const NodeResult& node)
{
    std::vector<engine::Finding> out = node.findings;
    if (node.answer != Answer::snapshot) {
        out.push_back(base::finding_from(
            fleet_codes(), "fleet.no_answer", node.host, fmt::format("{}: {}", to_string(node.answer), node.why)));
    }
    for (const auto& o : report.outliers) {
        if (o.host == node.host) {
            out.push_back(base::finding_from(fleet_codes(), "fleet.outlier", node.host,
                fmt::format("{} {:.1f} GB/s, below {:.0f} % of the nodes' median {:.1f} GB/s", o.metric, o.gbps,
                    report.outlier_fraction * 100, o.median_gbps)));
        }
    }
    if (report.pairs) {
        for (std::size_t n : report.pairs->bad_nodes) {
            if (report.pair_hosts[n] == node.host) {
                out.push_back(base::finding_from(fleet_codes(), "fleet.slow_node", node.host,
                    fmt::format("its all-reduce with a good node is below {:.1f} GB/s (bus bandwidth)",
                        report.pairs->threshold_gbps)));
            }
        }
    }
    return out;
}

/// "n01 ↔ n02".
std::string pair_name(const FleetReport& report, const NodePair& pair)
{
    return fmt::format("{} \u2194 {}", report.pair_hosts[pair.first], report.pair_hosts[pair.second]);
}

/// The pairs group of the verdict: slow links, nodes not told apart.
std::vector<engine::Finding> pair_findings(const FleetReport& report)
{
    std::vector<engine::Finding> out;
    for (const auto& link : report.pairs->bad_links) {
        out.push_back(base::finding_from(fleet_codes(), "fleet.slow_link", pair_name(report, link),
            fmt::format("their all-reduce is below {:.1f} GB/s (bus bandwidth), while each is fast beside another "
                        "node",
                report.pairs->threshold_gbps)));
    }
    for (std::size_t n : report.pairs->unresolved) {
        out.push_back(base::finding_from(fleet_codes(), "fleet.pairs_unresolved", report.pair_hosts[n],
            "in a slow pair, and not measured beside a node known to be good"));
    }
    return out;
}

/// Counts of the summary line and JSON.
struct Summary {
    unsigned nodes = 0;
    unsigned fit = 0;
    unsigned not_answering = 0;
    unsigned failed() const { return nodes - fit - not_answering; }
};

Summary summarize(const FleetReport& report)
{
    Summary s;
    for (const auto& node : report.nodes) {
        ++s.nodes;
        s.fit += is_fit(report, node) ? 1 : 0;
        s.not_answering += node.answer == Answer::snapshot ? 0 : 1;
    }
    return s;
}

std::vector<FindingGroup> group_findings(const std::vector<NodeResult>& nodes)
{
    std::vector<FindingGroup> groups;
    for (const auto& node : nodes) {
        for (const auto& f : node.findings) {
            auto it = std::find_if(groups.begin(), groups.end(),
                [&](const FindingGroup& g) { return g.code == f.code && g.severity == f.severity; });
            if (it == groups.end()) {
                groups.push_back({f.code, f.severity, f.message, {}});
                it = groups.end() - 1;
            }
            if (it->hosts.empty() || it->hosts.back() != node.host) {
                it->hosts.push_back(node.host);
            }
        }
    }
    std::stable_sort(groups.begin(), groups.end(), [](const FindingGroup& a, const FindingGroup& b) {
        return base::badness(a.severity) > base::badness(b.severity);
    });
    return groups;
}

} // namespace

const char* to_string(Answer answer)
{
    return answer_words.at(static_cast<std::size_t>(answer));
}

std::vector<std::pair<std::string, std::string>> comparable_facts(const engine::Facts& facts)
{
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& c : comparables) {
        out.emplace_back(c.name, c.read(facts));
    }
    if (const auto* env = facts.env().get()) {
        for (const auto& [name, value] : env->variables) {
            if (name.rfind("NCCL_", 0) == 0) {
                out.emplace_back(name, value);
            }
        }
    }
    return out;
}

std::vector<Drift> find_drift(const std::vector<std::pair<std::string, const engine::Facts*>>& nodes)
{
    // Each fact's value per node, facts in the order first seen.
    std::vector<std::string> order;
    std::map<std::string, std::vector<std::string>> values;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        for (auto& [name, value] : comparable_facts(*nodes[i].second)) {
            auto [it, fresh] = values.try_emplace(name, nodes.size(), none);
            if (fresh) {
                order.push_back(name);
            }
            it->second[i] = value.empty() ? none : std::move(value);
        }
    }
    std::vector<Drift> out;
    for (const auto& name : order) {
        const auto& per_node = values[name];
        std::map<std::string, std::size_t> count;
        for (const auto& v : per_node) {
            ++count[v];
        }
        if (count.size() < 2) {
            continue;
        }
        // The most common value; among equals, the one the earliest node has.
        std::string majority = per_node.front();
        for (const auto& v : per_node) {
            if (count[v] > count[majority]) {
                majority = v;
            }
        }
        Drift d{name, majority, {}};
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            if (per_node[i] != majority) {
                d.odd.push_back({nodes[i].first, per_node[i]});
            }
        }
        out.push_back(std::move(d));
    }
    return out;
}

std::vector<Outlier> find_outliers(
    const std::vector<std::pair<std::string, const engine::Facts*>>& nodes, double fraction)
{
    std::vector<Outlier> out;
    for (const auto& m : measured) {
        std::vector<std::pair<const std::string*, double>> values;
        std::vector<double> all;
        for (const auto& [host, facts] : nodes) {
            if (const auto v = m.read(*facts)) {
                values.emplace_back(&host, *v);
                all.push_back(*v);
            }
        }
        if (all.size() < 2) {
            continue;
        }
        const double median = base::median(all);
        for (const auto& [host, v] : values) {
            if (v < fraction * median) {
                out.push_back({m.name, *host, v, median});
            }
        }
    }
    return out;
}

FleetReport merge(const std::vector<NodeOutput>& outputs, const std::vector<const engine::Probe*>& probes,
    const engine::Policy& policy, bool strict)
{
    FleetReport report;
    report.strict = strict;
    report.outlier_fraction = policy.outlier_fraction;
    std::set<std::string> origins;
    std::set<std::string> hosts;
    for (const auto& output : outputs) {
        if (!origins.insert(output.origin).second) {
            throw base::Error(fmt::format("{}: given twice; name each node once", output.origin));
        }
        NodeResult node = judge_node(output, probes, policy);
        const std::string hostname = hostname_of(node.facts);
        if (!output.origin_is_host && !hostname.empty() && hosts.count(hostname) == 0) {
            node.host = hostname;
        }
        hosts.insert(node.host);
        report.nodes.push_back(std::move(node));
    }
    report.groups = group_findings(report.nodes);
    std::vector<std::pair<std::string, const engine::Facts*>> answered;
    for (const auto& node : report.nodes) {
        if (node.answer == Answer::snapshot) {
            answered.emplace_back(node.host, &node.facts);
        }
    }
    report.drift = find_drift(answered);
    report.outliers = find_outliers(answered, policy.outlier_fraction);
    return report;
}

bool is_fit(const FleetReport& report, const NodeResult& node)
{
    const auto findings = node_findings(report, node);
    return node.answer == Answer::snapshot && std::none_of(findings.begin(), findings.end(), [&](const auto& f) {
        return base::fails(f.severity, fail_on(report));
    });
}

engine::Verdict verdict(const FleetReport& report)
{
    engine::Verdict v{"fleet", "", {}, fail_on(report)};
    for (const auto& node : report.nodes) {
        engine::Verdict::Group group{node.host, node_findings(report, node)};
        if (is_fit(report, node)) {
            group.findings.insert(
                group.findings.begin(), base::finding_from(fleet_codes(), "fleet.node_fit", node.host, "fit"));
        }
        v.groups.push_back(std::move(group));
    }
    engine::Verdict::Group drift{"drift", {}};
    for (const auto& d : report.drift) {
        for (const auto& o : d.odd) {
            drift.findings.push_back(base::finding_from(fleet_codes(), "fleet.drift", o.host,
                fmt::format("{} is {} (most nodes: {})", d.fact, o.value, d.majority)));
        }
    }
    v.groups.push_back(std::move(drift));
    if (report.pairs) {
        v.groups.push_back({"pairs", pair_findings(report)});
    }
    return v;
}

int exit_status(const FleetReport& report)
{
    return verdict(report).exit_code();
}

std::string healthy_hostfile(const FleetReport& report)
{
    std::string out;
    for (const auto& node : report.nodes) {
        if (!is_fit(report, node)) {
            continue;
        }
        const std::string gpus = gpu_count(node.facts);
        out += gpus.empty() || gpus == "0" ? node.host + "\n" : fmt::format("{} slots={}\n", node.host, gpus);
    }
    return out;
}

nlohmann::json render_json(const FleetReport& report)
{
    json nodes = json::array();
    for (const auto& node : report.nodes) {
        json findings = json::array();
        for (const auto& f : node.findings) {
            findings.push_back(base::to_json(f));
        }
        nodes.push_back({{"host", node.host}, {"answer", to_string(node.answer)},
            {"why", node.why.empty() ? json() : json(node.why)}, {"exit_code", is_fit(report, node) ? 0 : 1},
            {"findings", findings}, {"facts", node.answer == Answer::snapshot ? node.facts.write() : json(nullptr)}});
    }
    json groups = json::array();
    for (const auto& g : report.groups) {
        groups.push_back({{"code", g.code}, {"severity", engine::to_string(g.severity)}, {"message", g.message},
            {"hosts", g.hosts}});
    }
    json drift = json::array();
    for (const auto& d : report.drift) {
        json odd = json::array();
        for (const auto& o : d.odd) {
            odd.push_back({{"host", o.host}, {"value", o.value}});
        }
        drift.push_back({{"fact", d.fact}, {"majority", d.majority}, {"odd", odd}});
    }
    json outliers = json::array();
    for (const auto& o : report.outliers) {
        outliers.push_back({{"metric", o.metric}, {"host", o.host}, {"gbps", o.gbps}, {"median_gbps", o.median_gbps}});
    }
    json pairs;
    if (report.pairs) {
        auto hosts_of = [&](const NodePair& p) {
            return json::array({report.pair_hosts[p.first], report.pair_hosts[p.second]});
        };
        json rounds = json::array();
        for (const auto& r : report.pairs->rounds) {
            json named = json::array();
            for (const auto& p : r.pairs) {
                named.push_back(hosts_of(p));
            }
            rounds.push_back({{"pairs", named}, {"gbps", r.gbps}});
        }
        json slow_nodes = json::array();
        for (std::size_t n : report.pairs->bad_nodes) {
            slow_nodes.push_back(report.pair_hosts[n]);
        }
        json slow_links = json::array();
        for (const auto& l : report.pairs->bad_links) {
            slow_links.push_back(hosts_of(l));
        }
        json unresolved = json::array();
        for (std::size_t n : report.pairs->unresolved) {
            unresolved.push_back(report.pair_hosts[n]);
        }
        json failed = json::array();
        for (const auto& [host, why] : report.pair_failures) {
            failed.push_back({{"host", host}, {"why", why}});
        }
        pairs = {{"threshold_gbps", report.pairs->threshold_gbps}, {"rounds", rounds}, {"slow_nodes", slow_nodes},
            {"slow_links", slow_links}, {"unresolved", unresolved}, {"failed", failed}};
    }
    const Summary sum = summarize(report);
    return {{"nodes", nodes}, {"groups", groups}, {"drift", drift}, {"outliers", outliers}, {"pairs", pairs},
        {"summary",
            {{"nodes", sum.nodes}, {"fit", sum.fit}, {"failed", sum.failed()}, {"not_answering", sum.not_answering},
                {"strict", report.strict}}}};
}

std::string render_text(const FleetReport& report, bool color)
{
    const Summary sum = summarize(report);
    std::string out = fmt::format("fleet: {} node{}: {} fit, {} failed, {} did not answer\n", sum.nodes,
        sum.nodes == 1 ? "" : "s", sum.fit, sum.failed(), sum.not_answering);
    if (!report.groups.empty()) {
        out += "\nFindings:\n";
        for (const auto& g : report.groups) {
            out += fmt::format("  {} {} on {}: {}\n", base::severity_label(g.severity, color), g.code,
                fmt::join(g.hosts, ", "), g.message);
        }
    }
    if (!report.drift.empty()) {
        out += "\nDrift (facts that differ between nodes):\n";
        for (const auto& d : report.drift) {
            std::vector<std::string> odd;
            for (const auto& o : d.odd) {
                odd.push_back(fmt::format("{} on {}", o.value, o.host));
            }
            out += fmt::format("  {}: {} (most nodes); {}\n", d.fact, d.majority, fmt::join(odd, "; "));
        }
    }
    if (!report.outliers.empty()) {
        out += fmt::format("\nOutliers (below {:.0f} % of the nodes' median, policy deep.outlier_fraction):\n",
            report.outlier_fraction * 100);
        for (const auto& o : report.outliers) {
            out += fmt::format("  {} {} on {}: {:.1f} GB/s, median {:.1f} GB/s\n",
                base::severity_label(engine::Severity::warn, color), o.metric, o.host, o.gbps, o.median_gbps);
        }
    }
    if (report.pairs) {
        const PairSearch& p = *report.pairs;
        std::size_t pairs_measured = 0;
        for (const auto& r : p.rounds) {
            pairs_measured += r.pairs.size();
        }
        out += fmt::format("\nNode pairs (all-reduce across two nodes; slow below {:.1f} GB/s): {} round{}, {} "
                           "pair{} measured\n",
            p.threshold_gbps, p.rounds.size(), p.rounds.size() == 1 ? "" : "s", pairs_measured,
            pairs_measured == 1 ? "" : "s");
        for (const auto& f : pair_findings(report)) {
            out +=
                fmt::format("  {} {} {}: {}\n", base::severity_label(f.severity, color), f.code, f.subject, f.message);
        }
        for (std::size_t n : p.bad_nodes) {
            out += fmt::format("  {} fleet.slow_node {}: slow beside good nodes\n",
                base::severity_label(engine::Severity::warn, color), report.pair_hosts[n]);
        }
        if (p.bad_nodes.empty() && p.bad_links.empty() && p.unresolved.empty()) {
            out += "  no slow node or link\n";
        }
        for (const auto& [host, why] : report.pair_failures) {
            out += fmt::format("  its measurement failed on {}: {}\n", host, why);
        }
    }
    bool header = false;
    for (const auto& node : report.nodes) {
        if (node.answer != Answer::snapshot) {
            out += header ? "" : "\nDid not answer:\n";
            header = true;
            out += fmt::format("  {}: {}: {}\n", node.host, to_string(node.answer), node.why);
        }
    }
    return out;
}

} // namespace doctor::fleet
