#include "doctor/checks/checks.hpp"
#include "doctor/probe.hpp"
#include "doctor/runner.hpp"
#include "probes/error.hpp"
#include "probes/gpu_monitor.hpp"
#include "probes/nccl/log.hpp"
#include "probes/nsys/summary.hpp"
#include "probes/spelling.hpp"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>

namespace doctor {

const std::vector<Collector>& collector_table()
{
    static const std::vector<Collector> table = {
        checks::host_collector(),
        checks::nvml_collector(),
        checks::topology_collector(),
        checks::libraries_collector(),
        checks::frameworks_collector(),
        checks::pci_collector(),
        checks::network_collector(),
        checks::limits_collector(),
        checks::env_collector(),
        checks::mpi_collector(),
        checks::affinity_collector(),
        checks::bandwidth_collector(),
        checks::allreduce_collector(),
    };
    return table;
}

const std::vector<Probe>& probe_table()
{
    static const std::vector<Probe> table = {
        checks::driver_probe(),
        checks::gpus_probe(),
        checks::libraries_probe(),
        checks::frameworks_probe(),
        checks::topology_probe(),
        checks::p2p_probe(),
        checks::network_probe(),
        checks::nccl_env_probe(),
        checks::limits_probe(),
        checks::mpi_probe(),
        checks::binding_probe(),
        checks::bandwidth_probe(),
        checks::allreduce_probe(),
    };
    return table;
}

void progress_line(const CollectContext& ctx, const std::string& text)
{
    if (ctx.progress) {
        fmt::print(stderr, "\r\033[Kgpudoctor: {}", text);
        std::fflush(stderr);
    }
}

const char* CollectContext::getenv(const std::string& name) const
{
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
}

std::vector<CodeInfo> all_codes()
{
    std::vector<CodeInfo> out;
    for (const auto& p : probe_table()) {
        out.insert(out.end(), p.codes.begin(), p.codes.end());
        out.push_back({p.name + ".error", fmt::format("the {} probe could not run", p.name),
            "Its collector timed out, crashed, or its rule broke. A GPU library call that hangs (a "
            "wedged driver, a GPU that fell off the bus) shows up here; the other probes still ran.",
            fmt::format("Look at dmesg (Xid errors), nvidia-smi, and run again with a longer {}.",
                p.deep ? "--deep-timeout" : "--timeout")});
        out.push_back({p.name + ".skip", fmt::format("the {} probe was not checked", p.name),
            "The facts it needs were not collected (a snapshot taken with --only/--skip, or an older "
            "snapshot). A skipped probe is never a pass.",
            ""});
    }
    for (const auto& c : probes::nccl::finding_codes()) {
        out.push_back({c.code, c.title,
            fmt::format(
                "{} Reported by 'gpudoctor nccl-log' ({}).", c.explanation, probes::nccl::to_string(c.severity)),
            c.remedy});
    }
    for (const auto& c : probes::monitor_codes()) {
        out.push_back({c.code, c.title,
            fmt::format("{} Reported by 'gpudoctor monitor' and 'gpurun --monitor' ({}).", c.explanation,
                probes::to_string(c.severity)),
            c.remedy});
    }
    for (const auto& c : probes::nsys::finding_codes()) {
        out.push_back({c.code, c.title,
            fmt::format("{} Reported by 'gpudoctor profile' ({}).", c.explanation, probes::to_string(c.severity)),
            c.remedy});
    }
    return out;
}

std::vector<const Probe*> select_probes(const std::string& only, const std::string& skip, bool deep)
{
    const auto& table = probe_table();
    std::vector<std::string> names;
    for (const auto& p : table) {
        names.push_back(p.name);
    }
    auto words = [](const std::string& list) {
        std::vector<std::string> out;
        std::size_t pos = 0;
        while (pos <= list.size() && !list.empty()) {
            std::size_t comma = list.find(',', pos);
            std::string w = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
            if (!w.empty()) {
                out.push_back(w);
            }
            if (comma == std::string::npos) {
                break;
            }
            pos = comma + 1;
        }
        return out;
    };
    auto matches = [&](const std::string& word, const std::string& option) {
        std::vector<const Probe*> out;
        for (const auto& p : table) {
            if (p.name.rfind(word, 0) == 0) {
                out.push_back(&p);
            }
        }
        if (out.empty()) {
            std::string hint = probes::closest_match(word, names);
            throw probes::Error(fmt::format("{} {}: no probe is called that{}; 'gpudoctor list' shows them", option,
                word, hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
        }
        return out;
    };
    std::vector<const Probe*> selected;
    auto only_words = words(only);
    if (only_words.empty()) {
        for (const auto& p : table) {
            if (deep || !p.deep) {
                selected.push_back(&p);
            }
        }
    } else {
        for (const auto& w : only_words) {
            for (const Probe* p : matches(w, "--only")) {
                if (std::find(selected.begin(), selected.end(), p) == selected.end()) {
                    selected.push_back(p);
                }
            }
        }
        std::sort(selected.begin(), selected.end());
    }
    for (const auto& w : words(skip)) {
        for (const Probe* p : matches(w, "--skip")) {
            selected.erase(std::remove(selected.begin(), selected.end(), p), selected.end());
        }
    }
    if (selected.empty()) {
        // A check of nothing would pass: "fit to train" with no probe run.
        throw probes::Error(fmt::format("--skip {} leaves no probe to run{}; 'gpudoctor list' shows them", skip,
            only_words.empty() ? "" : fmt::format(" of --only {}", only)));
    }
    return selected;
}

} // namespace doctor
