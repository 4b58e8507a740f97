#include "doctor/engine/finding.hpp"

#include "doctor/engine/probe.hpp"
#include "doctor/engine/runner.hpp"

namespace doctor::engine {

Findings::Findings(const Probe& probe) : m_probe(&probe)
{
}

void Findings::add(std::string_view code, std::string subject, std::string message, nlohmann::json facts)
{
    m_findings.push_back(
        base::code_in(m_probe->codes, code).make(std::move(subject), std::move(message), std::move(facts)));
}

void Findings::add(
    Severity severity, std::string_view code, std::string subject, std::string message, nlohmann::json facts)
{
    m_findings.push_back(
        base::code_in(m_probe->codes, code).make(severity, std::move(subject), std::move(message), std::move(facts)));
}

void Findings::add_first(std::string_view code, std::string subject, std::string message, nlohmann::json facts)
{
    m_findings.insert(m_findings.begin(),
        base::code_in(m_probe->codes, code).make(std::move(subject), std::move(message), std::move(facts)));
}

void Findings::skip(std::string message)
{
    m_findings.push_back(skip_code(*m_probe).make("host", std::move(message)));
}

void Findings::add(const FindingCode& row, std::string subject, std::string message, nlohmann::json facts)
{
    m_findings.push_back(row.make(std::move(subject), std::move(message), std::move(facts)));
}

} // namespace doctor::engine
