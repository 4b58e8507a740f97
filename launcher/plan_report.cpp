#include "launcher/plan_report.hpp"

#include "base/json_writer.hpp"
#include "launcher/global_batch.hpp"
#include "launcher/rank_environment.hpp"
#include "launcher/rank_profiler.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>

namespace launcher {

namespace {

std::string numa_list(const std::vector<unsigned>& nodes)
{
    return nodes.empty() ? "-" : fmt::format("{}", fmt::join(nodes, ","));
}

} // namespace

std::string shell_quote(const std::vector<std::string>& argv)
{
    std::string out;
    for (const auto& arg : argv) {
        if (!out.empty()) {
            out += ' ';
        }
        bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string_view("-_./:=,+@%").find(c) != std::string_view::npos;
        });
        if (plain) {
            out += arg;
            continue;
        }
        out += '\'';
        for (char c : arg) {
            if (c == '\'') {
                out += "'\\''";
            } else {
                out += c;
            }
        }
        out += '\'';
    }
    return out;
}

std::string render_text(const PlanReport& r)
{
    const auto& ranks = r.job.ranks;
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"RANK", "HOST", "LOCAL", "GPU", "BUS ID", "NAME", "NUMA", "CPUS", "NIC"});
    if (r.batch) {
        rows.back().insert(rows.back().end(), {"BATCH", "LOSS WEIGHT"});
    }
    for (const auto& jr : ranks) {
        const auto& b = jr.binding;
        if (b.on_host) {
            rows.push_back({std::to_string(jr.rank), jr.host, std::to_string(b.local_rank), "(on host)", "-", "-", "-",
                "(on host)", "-"});
            if (r.batch) {
                rows.back().insert(rows.back().end(),
                    {std::to_string(r.batch->per_gpu.at(jr.rank)),
                        format_loss_weight(r.batch->loss_weight.at(jr.rank))});
            }
            continue;
        }
        rows.push_back({std::to_string(jr.rank), jr.host, std::to_string(b.local_rank),
            b.gpu ? std::to_string(b.gpu->physical_index) : "-", b.gpu ? b.gpu->bus_id.to_string() : "-",
            b.gpu ? b.gpu->name : "-", numa_list(b.numa), b.cpus.to_list() + (b.shared ? " (shared)" : ""),
            b.hca.empty() ? "-" : b.hca});
        if (r.batch) {
            rows.back().insert(rows.back().end(),
                {std::to_string(r.batch->per_gpu.at(jr.rank)), format_loss_weight(r.batch->loss_weight.at(jr.rank))});
        }
    }
    std::vector<std::size_t> width(rows[0].size(), 0);
    for (const auto& row : rows) {
        for (std::size_t c = 0; c < row.size(); ++c) {
            width[c] = std::max(width[c], row[c].size());
        }
    }
    std::string out;
    const auto& p = r.options.plan;
    const bool all_on_host =
        std::all_of(ranks.begin(), ranks.end(), [](const JobRank& jr) { return jr.binding.on_host; });
    std::string what = p.cpu_only ? "CPU only"
        : all_on_host             ? std::string("GPUs chosen on each host")
                                  : fmt::format("GPUs from {}", r.gpu_source);
    out += fmt::format("gpurun: {} rank{} on {} host{} ({}; bind {}, memory {}, gpu visibility {})\n", ranks.size(),
        ranks.size() == 1 ? "" : "s", r.job.hosts.size(), r.job.hosts.size() == 1 ? "" : "s", what, to_string(p.bind),
        to_string(p.memory), to_string(p.visibility));
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t c = 0; c < row.size(); ++c) {
            line += row[c];
            if (c + 1 < row.size()) {
                line += std::string(width[c] - row[c].size() + 2, ' ');
            }
        }
        while (!line.empty() && line.back() == ' ') {
            line.pop_back();
        }
        out += line + '\n';
    }
    if (r.batch) {
        const auto& speeds = r.options.batch.speeds;
        out += fmt::format("batch: {} samples per step over {} rank{}, {} (GPURUN_LOCAL_BATCH); each rank multiplies "
                           "its mean loss by GPURUN_LOSS_WEIGHT\n",
            r.options.batch.global_batch, ranks.size(), ranks.size() == 1 ? "" : "s",
            speeds.empty() ? std::string("equal speeds") : fmt::format("by speed {}", format_speeds(speeds)));
    }
    if (const auto& prof = r.options.profile; prof.profiler != Profiler::none) {
        const unsigned first = prof.ranks.empty() ? 0 : prof.ranks.front();
        std::string who = prof.ranks.empty()
            ? std::string("every rank")
            : fmt::format("rank{} {}", prof.ranks.size() == 1 ? "" : "s", format_rank_list(prof.ranks));
        if (prof.ranks == std::vector<unsigned>{0}) {
            who += " (the default; --profile-ranks all profiles every rank)";
        }
        const auto program = r.options.program.empty() ? std::vector<std::string>{"PROGRAM"} : r.options.program;
        out += fmt::format("profile: {} on {}, reports in {}; rank {} runs: {}\n", to_string(prof.profiler), who,
            prof.dir, first, shell_quote(nsys_command(prof.dir, first, program, prof.mpi_impl)));
    }
    if (const auto& mon = r.options.monitor; mon.interval > 0) {
        out += fmt::format("monitor: every {}s on each node (started by local rank 0's helper), one rank per GPU "
                           "checked, --enforce {}{}\n",
            mon.interval, to_string(mon.enforce),
            mon.json_file.empty() ? std::string() : fmt::format("; samples and summary to {}", mon.json_file));
    }
    if (const auto& output = r.options.output; output.tag || !output.log_dir.empty()) {
        std::vector<std::string> parts;
        if (output.tag) {
            parts.emplace_back("every line tagged [rank]");
        }
        if (!output.log_dir.empty()) {
            parts.push_back(fmt::format("each rank's also in {}/rank<R>.out and .err on its host", output.log_dir));
        }
        out += fmt::format("output: {}\n", fmt::join(parts, "; "));
    }
    for (const auto& note : r.notes) {
        out += fmt::format("note: {}\n", note);
    }
    out += fmt::format("launcher: {}{} ({})\n", launchers::launcher_title(r.launcher),
        r.launcher.path.empty() ? "" : ", " + r.launcher.path, r.launcher.reason);
    out += fmt::format("command: {}\n", shell_quote(r.command));
    return out;
}

namespace {

template <typename T> nlohmann::json or_null(bool present, const T& value)
{
    return present ? nlohmann::json(value) : nlohmann::json(nullptr);
}

// Names and values, written as an object in name order (as nlohmann::json keeps its keys).
void write_variables(base::JsonWriter& w, std::vector<std::pair<std::string, std::string>> variables)
{
    std::stable_sort(
        variables.begin(), variables.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    w.begin_object();
    for (std::size_t i = 0; i < variables.size(); ++i) {
        // A name given twice keeps its last value, as assigning it in an nlohmann object does.
        if (i + 1 < variables.size() && variables[i + 1].first == variables[i].first) {
            continue;
        }
        w.member(variables[i].first, variables[i].second);
    }
    w.end();
}

// Every rank of the plan, written as it goes: at 1024 hosts of 8 GPUs a document of them took
// longer than planning them.
void write_ranks(base::JsonWriter& w, const PlanReport& r)
{
    std::map<std::string, unsigned> local_sizes;
    for (const auto& jr : r.job.ranks) {
        ++local_sizes[jr.host];
    }
    const bool isolate = r.options.plan.visibility == GpuVisibility::isolate;
    w.begin_array();
    for (const auto& jr : r.job.ranks) {
        const auto& b = jr.binding;
        w.begin_object().member("bound_on_host", b.on_host).key("cores");
        w.value(or_null(!b.on_host, b.cores));
        w.key("cpus").value(b.on_host ? nlohmann::json(nullptr) : nlohmann::json(b.cpus.to_list()));
        if (r.helper != nullptr && !b.on_host) {
            // What the rank's helper will set, from the same function: "environment" always,
            // "environment_unless_set" only where the rank's own environment lacks it.
            RankContext context;
            context.rank = jr.rank;
            context.world_size = static_cast<unsigned>(r.job.ranks.size());
            context.local_rank = b.local_rank;
            context.local_size = local_sizes[jr.host];
            std::vector<std::pair<std::string, std::string>> always;
            std::vector<std::pair<std::string, std::string>> unless_set;
            for (const auto& v : rank_environment(*r.helper, context, b, r.batch)) {
                (v.unless_set ? unless_set : always).emplace_back(v.name, v.value);
            }
            w.key("environment");
            write_variables(w, std::move(always));
            w.key("environment_unless_set");
            write_variables(w, std::move(unless_set));
        } else if (r.helper != nullptr) {
            // Set by the helper on the host, from its own plan.
            w.member("environment", nullptr).member("environment_unless_set", nullptr);
        }
        w.key("gpu");
        if (b.gpu) {
            w.begin_object()
                .member("bus_id", b.gpu->bus_id.to_string())
                .member("cuda_device", isolate ? 0U : b.cuda_index)
                .member("index", b.gpu->physical_index)
                .member("name", b.gpu->name)
                .key("uuid")
                .value(or_null(!b.gpu->uuid.empty(), b.gpu->uuid))
                .key("visible_devices")
                .value(or_null(isolate, b.gpu->selector))
                .end();
        } else {
            w.value(nullptr);
        }
        w.member("host", jr.host)
            .key("local_batch")
            .value(or_null(r.batch.has_value(), r.batch ? r.batch->per_gpu.at(jr.rank) : 0));
        w.member("local_rank", b.local_rank)
            .key("loss_weight")
            .value(or_null(r.batch.has_value(), r.batch ? r.batch->loss_weight.at(jr.rank) : 0.0));
        w.key("nic").value(or_null(!b.hca.empty(), b.hca)).key("nic_variables");
        write_variables(w, nic_variables(r.options.nic_binding, b.hca));
        w.key("numa").value(or_null(!b.on_host, b.numa)).member("rank", jr.rank).member("shared_cpus", b.shared).end();
    }
    w.end();
}

} // namespace

void write_json(const PlanReport& r, std::string& out)
{
    nlohmann::json hosts = nlohmann::json::array();
    for (const auto& h : r.job.hosts) {
        hosts.push_back({{"host", h.name}, {"ranks", h.slots.value_or(0)}});
    }
    const auto& p = r.options.plan;
    nlohmann::json profile = nullptr;
    if (const auto& prof = r.options.profile; prof.profiler != Profiler::none) {
        nlohmann::json chosen = nlohmann::json::array();
        for (const auto& jr : r.job.ranks) {
            if (profiles_rank(prof, jr.rank)) {
                chosen.push_back(jr.rank);
            }
        }
        profile = {{"profiler", to_string(prof.profiler)}, {"ranks", chosen}, {"dir", prof.dir}};
    }
    nlohmann::json left_out = nlohmann::json::array();
    for (const auto& h : r.left_out) {
        left_out.push_back({{"host", h.name}, {"reason", h.reason}});
    }
    // Everything but the ranks as a document (small), "ranks" written in its place by name.
    const nlohmann::json rest = {{"ranks", nullptr}, {"hosts", hosts}, {"hosts_left_out", left_out},
        {"command", r.command},
        {"launcher",
            {{"kind", launchers::row(r.launcher.kind).word}, {"path", r.launcher.path},
                {"flavour", or_null(!r.launcher.flavour.empty(), r.launcher.flavour)}, {"reason", r.launcher.reason}}},
        {"nic_binding", to_string(r.options.nic_binding)}, {"notes", r.notes},
        {"gpu_source", or_null(!p.cpu_only, r.gpu_source)}, {"bind", to_string(p.bind)},
        {"memory", to_string(p.memory)}, {"gpu_visibility", to_string(p.visibility)},
        {"ranks_per_gpu", p.ranks_per_gpu}, {"cpu_only", p.cpu_only},
        {"global_batch", or_null(r.batch.has_value(), r.options.batch.global_batch)},
        {"speeds", or_null(r.batch && !r.options.batch.speeds.empty(), r.options.batch.speeds)}, {"profile", profile},
        {"tag_output", r.options.output.tag}, {"passed_variables", r.passed},
        {"log_dir", or_null(!r.options.output.log_dir.empty(), r.options.output.log_dir)},
        {"monitor",
            r.options.monitor.interval > 0
                ? nlohmann::json{{"interval", r.options.monitor.interval},
                      {"enforce", to_string(r.options.monitor.enforce)},
                      {"json_file", or_null(!r.options.monitor.json_file.empty(), r.options.monitor.json_file)}}
                : nlohmann::json(nullptr)}};
    base::JsonWriter w(out, 2);
    w.begin_object();
    for (const auto& [key, value] : rest.items()) {
        w.key(key);
        if (key == "ranks") {
            write_ranks(w, r);
        } else {
            w.value(value);
        }
    }
    w.end();
}

nlohmann::json render_json(const PlanReport& report)
{
    std::string text;
    write_json(report, text);
    return nlohmann::json::parse(text);
}

} // namespace launcher
