#pragma once

// Everything the collectors saw on one node: what `gpudoctor snapshot` writes, `check --from` and
// fleet read, and every rule judges. Each collector's facts are read once, into its struct.

#include "doctor/facts/affinity.hpp"
#include "doctor/facts/env.hpp"
#include "doctor/facts/frameworks.hpp"
#include "doctor/facts/host.hpp"
#include "doctor/facts/libraries.hpp"
#include "doctor/facts/limits.hpp"
#include "doctor/facts/mpi.hpp"
#include "doctor/facts/network.hpp"
#include "doctor/facts/nvml.hpp"
#include "doctor/facts/pci.hpp"
#include "doctor/facts/schema.hpp"
#include "doctor/facts/topology.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace doctor::facts {

class NodeFacts {
public:
    NodeFacts() = default;

    /// Reads a facts document (each collector's name: its facts, or {"error": "..."} for one that
    /// broke). Throws base::Error naming `origin`, the collector and the field for facts that are not
    /// as the collectors write them (a snapshot: bad input, exit 2).
    static NodeFacts read(const nlohmann::json& document, const std::string& origin);

    /// Adds what one collector gave: its facts as it wrote them, or its error. Facts that cannot be
    /// read make the collector broken, with the reason.
    void add(const std::string& collector, const nlohmann::json& facts, const std::string& origin);
    void add_error(const std::string& collector, const std::string& error);

    /// The facts document, as `gpudoctor snapshot` writes it.
    nlohmann::json write() const;

    /// Whether the collector ran (its facts, or its error, are here).
    bool has(std::string_view collector) const;
    /// The error of a collector that broke (timed out, crashed), or "".
    std::string error(std::string_view collector) const;

    const Collected<HostFacts>& host() const { return m_host; }
    const Collected<NvmlFacts>& nvml() const { return m_nvml; }
    const Collected<TopologyFacts>& topology() const { return m_topology; }
    const Collected<PciFacts>& pci() const { return m_pci; }
    const Collected<AffinityFacts>& affinity() const { return m_affinity; }
    const Collected<NetworkFacts>& network() const { return m_network; }
    const Collected<EnvFacts>& env() const { return m_env; }
    const Collected<LimitsFacts>& limits() const { return m_limits; }
    const Collected<LibrariesFacts>& libraries() const { return m_libraries; }
    const Collected<FrameworksFacts>& frameworks() const { return m_frameworks; }
    const Collected<MpiFacts>& mpi() const { return m_mpi; }

    /// A collector's facts as JSON, for the collectors not read into a struct of their own yet;
    /// nullptr when it did not run.
    const nlohmann::json* raw(std::string_view collector) const;

private:
    /// The collectors read into a struct of their own, by name: the one list of them.
    static constexpr auto fields()
    {
        return std::tuple{field("host", &NodeFacts::m_host), field("nvml", &NodeFacts::m_nvml),
            field("topology", &NodeFacts::m_topology), field("pci", &NodeFacts::m_pci),
            field("affinity", &NodeFacts::m_affinity), field("network", &NodeFacts::m_network),
            field("env", &NodeFacts::m_env), field("limits", &NodeFacts::m_limits),
            field("libraries", &NodeFacts::m_libraries), field("frameworks", &NodeFacts::m_frameworks),
            field("mpi", &NodeFacts::m_mpi)};
    }
    template <typename S, typename Fn> friend void each_field(S& value, Fn&& fn);

    Collected<HostFacts> m_host;
    Collected<NvmlFacts> m_nvml;
    Collected<TopologyFacts> m_topology;
    Collected<PciFacts> m_pci;
    Collected<AffinityFacts> m_affinity;
    Collected<NetworkFacts> m_network;
    Collected<EnvFacts> m_env;
    Collected<LimitsFacts> m_limits;
    Collected<LibrariesFacts> m_libraries;
    Collected<FrameworksFacts> m_frameworks;
    Collected<MpiFacts> m_mpi;
    nlohmann::json m_raw = nlohmann::json::object();
};

} // namespace doctor::facts
