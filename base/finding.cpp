#include "base/finding.hpp"

#include "base/error.hpp"
#include "base/spelling.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <stdexcept>
#include <string_view>
#include <tuple>

namespace base {

namespace {

/// Every severity's word and colour, in one table (the enum's order).
struct SeverityStyle {
    Severity severity;
    const char* word;
    const char* label;
    const char* color;
    int badness;
};

constexpr SeverityStyle styles[] = {
    {Severity::pass, "pass", "PASS ", "\033[32m", 0},
    {Severity::info, "info", "INFO ", "\033[36m", 0},
    {Severity::warn, "warn", "WARN ", "\033[33m", 1},
    {Severity::fail, "fail", "FAIL ", "\033[31m", 2},
    {Severity::skip, "skip", "SKIP ", "\033[2m", 0},
    {Severity::error, "error", "ERROR", "\033[35m", 2},
};

const SeverityStyle& style(Severity severity)
{
    return styles[static_cast<std::size_t>(severity)];
}

} // namespace

const char* to_string(Severity severity)
{
    return style(severity).word;
}

std::string severity_label(Severity severity, bool color)
{
    return color ? fmt::format("{}{}\033[0m", style(severity).color, style(severity).label) : style(severity).label;
}

const char* severity_color(Severity severity, bool color)
{
    return color ? style(severity).color : "";
}

const char* color_reset(bool color)
{
    return color ? "\033[0m" : "";
}

int badness(Severity severity)
{
    return style(severity).badness;
}

Severity parse_fail_on(const std::string& level)
{
    if (level == "warn") {
        return Severity::warn;
    }
    if (level == "fail") {
        return Severity::fail;
    }
    const std::string hint = closest_match(level, {"warn", "fail"});
    throw Error(fmt::format(
        "--fail-on {}: expected warn or fail{}", level, hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
}

std::string Where::str() const
{
    return line == 0 ? std::string() : fmt::format("{}:{}", file, line);
}

nlohmann::json to_json(const Finding& finding)
{
    nlohmann::json out{{"code", finding.code}, {"severity", to_string(finding.severity)}, {"subject", finding.subject},
        {"message", finding.message}, {"remedy", finding.remedy}};
    if (finding.where.known()) {
        out["where"] = finding.where.str();
    }
    if (finding.count > 0) {
        out["count"] = finding.count;
    }
    if (!finding.facts.is_null()) {
        out["facts"] = finding.facts;
    }
    return out;
}

namespace {

/// N of a subject "gpu N" or "gpu N (bus id)".
std::optional<unsigned> gpu_number(const std::string& subject)
{
    static constexpr std::string_view prefix = "gpu ";
    if (subject.compare(0, prefix.size(), prefix) != 0) {
        return std::nullopt;
    }
    std::size_t end = prefix.size();
    unsigned n = 0;
    while (end < subject.size() && end < prefix.size() + 6 && std::isdigit(static_cast<unsigned char>(subject[end]))) {
        n = n * 10 + static_cast<unsigned>(subject[end] - '0');
        ++end;
    }
    if (end == prefix.size() || (end != subject.size() && subject.compare(end, 2, " (") != 0) ||
        (end != subject.size() && subject.back() != ')')) {
        return std::nullopt;
    }
    return n;
}

} // namespace

std::string FindingGroup::subject() const
{
    if (subjects.size() == 1) {
        return subjects.front();
    }
    std::vector<unsigned> gpus;
    for (const auto& s : subjects) {
        const auto n = gpu_number(s);
        if (!n) {
            return fmt::format("{}", fmt::join(subjects, ", "));
        }
        gpus.push_back(*n);
    }
    std::sort(gpus.begin(), gpus.end());
    std::vector<std::string> runs;
    for (std::size_t i = 0; i < gpus.size();) {
        std::size_t j = i;
        while (j + 1 < gpus.size() && gpus[j + 1] == gpus[j] + 1) {
            ++j;
        }
        runs.push_back(j > i ? fmt::format("{}-{}", gpus[i], gpus[j]) : fmt::format("{}", gpus[i]));
        i = j + 1;
    }
    return fmt::format("gpus {}", fmt::join(runs, ", "));
}

std::vector<FindingGroup> group_findings(const std::vector<Finding>& findings)
{
    std::vector<FindingGroup> groups;
    // Keyed by what must be equal; a linear scan would make 1,000 GPUs' findings quadratic.
    std::map<std::tuple<std::string_view, Severity, std::string_view, std::string_view>, std::size_t> index;
    for (const auto& f : findings) {
        const auto key = std::make_tuple(
            std::string_view(f.code), f.severity, std::string_view(f.message), std::string_view(f.remedy));
        const auto [it, added] = index.emplace(key, groups.size());
        if (added) {
            groups.push_back(FindingGroup{&f, {}});
        }
        groups[it->second].subjects.push_back(f.subject);
    }
    return groups;
}

std::string render_text(const Finding& finding, bool color, const std::string& indent)
{
    std::string out = fmt::format("{}{} {}: {}  [{}]\n", indent, severity_label(finding.severity, color),
        finding.subject, finding.message, finding.code);
    if (finding.where.known()) {
        out += fmt::format("{}      first at {}\n", indent, finding.where.str());
    }
    if (finding.severity != Severity::pass && !finding.remedy.empty()) {
        out += fmt::format("{}      fix: {}\n", indent, finding.remedy);
    }
    return out;
}

Finding FindingCode::make(std::string subject, std::string message, nlohmann::json facts) const
{
    return make(severity, std::move(subject), std::move(message), std::move(facts));
}

namespace {

/// `text` with each "{name}" replaced by the value of `name` in `facts` (a string as it is, a
/// number as JSON writes it); a name the facts lack becomes "<name>", as explain shows it.
std::string filled(const std::string& text, const nlohmann::json& facts)
{
    std::string out;
    std::size_t from = 0;
    for (std::size_t open = text.find('{'); open != std::string::npos; open = text.find('{', from)) {
        const std::size_t close = text.find('}', open);
        if (close == std::string::npos) {
            break;
        }
        const std::string name = text.substr(open + 1, close - open - 1);
        out.append(text, from, open - from);
        const auto it = facts.is_object() ? facts.find(name) : facts.end();
        if (it == facts.end() || it->is_structured() || it->is_null()) {
            out += "<" + name + ">";
        } else {
            out += it->is_string() ? it->get<std::string>() : it->dump();
        }
        from = close + 1;
    }
    return out + text.substr(from);
}

} // namespace

std::string FindingCode::remedy_shown() const
{
    return filled(remedy, nullptr);
}

Finding FindingCode::make(Severity at, std::string subject, std::string message, nlohmann::json facts) const
{
    if (at != severity && (!also || at != *also)) {
        throw std::logic_error(fmt::format("finding code {} is never {}", code, to_string(at)));
    }
    Finding f;
    f.code = code;
    f.severity = at;
    f.subject = std::move(subject);
    f.message = std::move(message);
    f.remedy = at == Severity::pass ? "" : filled(remedy, facts);
    f.facts = std::move(facts);
    return f;
}

std::string FindingCode::severities() const
{
    if (!also) {
        return to_string(severity);
    }
    const bool milder_first = badness(*also) <= badness(severity);
    return fmt::format(
        "{} or {}", to_string(milder_first ? *also : severity), to_string(milder_first ? severity : *also));
}

const FindingCode& code_in(const std::vector<FindingCode>& table, std::string_view code)
{
    for (const auto& c : table) {
        if (code == c.code) {
            return c;
        }
    }
    throw std::logic_error(fmt::format("finding code {} is not in its table", code));
}

Finding finding_from(
    const std::vector<FindingCode>& table, std::string_view code, std::string subject, std::string message)
{
    return code_in(table, code).make(std::move(subject), std::move(message));
}

} // namespace base
