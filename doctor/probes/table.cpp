#include "doctor/probes/table.hpp"
#include "base/error.hpp"
#include "base/spelling.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace doctor::probes {

const std::vector<Collector>& collector_table()
{
    static const std::vector<Collector> table = {
        probes::host_collector(),
        probes::nvml_collector(),
        probes::topology_collector(),
        probes::libraries_collector(),
        probes::frameworks_collector(),
        probes::pci_collector(),
        probes::network_collector(),
        probes::limits_collector(),
        probes::env_collector(),
        probes::mpi_collector(),
        probes::affinity_collector(),
        probes::bandwidth_collector(),
        probes::allreduce_collector(),
    };
    return table;
}

const std::vector<Probe>& probe_table()
{
    static const std::vector<Probe> table = {
        probes::driver_probe(),
        probes::gpus_probe(),
        probes::libraries_probe(),
        probes::frameworks_probe(),
        probes::topology_probe(),
        probes::p2p_probe(),
        probes::network_probe(),
        probes::nccl_env_probe(),
        probes::limits_probe(),
        probes::mpi_probe(),
        probes::binding_probe(),
        probes::bandwidth_probe(),
        probes::allreduce_probe(),
    };
    return table;
}

std::vector<const Collector*> collectors_for(const std::vector<const Probe*>& probes)
{
    std::vector<const Collector*> out;
    for (const auto& c : collector_table()) {
        // "host" names the node in every report and snapshot.
        bool needed = c.name == "host" || std::any_of(probes.begin(), probes.end(), [&](const Probe* p) {
            return std::find(p->collectors.begin(), p->collectors.end(), c.name) != p->collectors.end();
        });
        if (needed) {
            out.push_back(&c);
        }
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
            std::string hint = base::closest_match(word, names);
            throw base::Error(fmt::format("{} {}: no probe is called that{}; 'gpudoctor list' shows them", option, word,
                hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
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
        throw base::Error(fmt::format("--skip {} leaves no probe to run{}; 'gpudoctor list' shows them", skip,
            only_words.empty() ? "" : fmt::format(" of --only {}", only)));
    }
    return selected;
}

} // namespace doctor::probes
