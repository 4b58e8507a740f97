#pragma once

// Everything the collectors saw on one node: what `gpudoctor snapshot` writes, `check --from` and
// fleet read, and every rule judges. Each collector's facts are read once, into its struct.

#include "doctor/facts/host.hpp"
#include "doctor/facts/nvml.hpp"
#include "doctor/facts/schema.hpp"

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

    /// A collector's facts as JSON, for the collectors not read into a struct of their own yet;
    /// nullptr when it did not run.
    const nlohmann::json* raw(std::string_view collector) const;

private:
    Collected<HostFacts> m_host;
    Collected<NvmlFacts> m_nvml;
    nlohmann::json m_raw = nlohmann::json::object();
};

} // namespace doctor::facts
