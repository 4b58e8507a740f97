#pragma once

#include "base/finding.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace doctor::engine {

struct Probe;

// gpudoctor check's findings are gpukit's one finding model, each made by its code's row.
using base::Finding;
using base::FindingCode;
using base::Severity;
using base::to_string;

/// What a probe's rule concludes: each finding made by the row of its code in the probe's own
/// table (FindingCode::make), so that its severity and remedy are the row's. A code the table
/// lacks is a programming error (std::logic_error).
class Findings {
public:
    explicit Findings(const Probe& probe);

    /// A finding of `code` at the row's severity.
    void add(std::string_view code, std::string subject, std::string message, nlohmann::json facts = nullptr);
    /// A finding of `code` at `severity`, the row's or its `also`.
    void add(Severity severity, std::string_view code, std::string subject, std::string message,
        nlohmann::json facts = nullptr);
    /// A finding of `code` before the others (a probe's summary that only some outcomes have).
    void add_first(std::string_view code, std::string subject, std::string message, nlohmann::json facts = nullptr);
    /// The probe's own `<probe>.skip`: not checked, for the reason `message` gives.
    void skip(std::string message);
    /// A finding of another subcommand's code, made by its own row (check's all-reduce reports what
    /// NCCL's log of the run shows with nccl-log's codes).
    void add(const FindingCode& row, std::string subject, std::string message, nlohmann::json facts = nullptr);

    std::size_t size() const { return m_findings.size(); }
    bool empty() const { return m_findings.empty(); }
    const std::vector<Finding>& list() const { return m_findings; }
    std::vector<Finding> take() { return std::move(m_findings); }

private:
    const Probe* m_probe;
    std::vector<Finding> m_findings;
};

} // namespace doctor::engine
