#include "launcher/rank_output.hpp"

#include "base/error.hpp"
#include "base/process.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <optional>
#include <sys/wait.h>

namespace launcher {

std::string LineTagger::tag(std::string_view piece)
{
    std::string out;
    out.reserve(piece.size() + m_prefix.size() * 2);
    std::size_t at = 0;
    while (at < piece.size()) {
        if (m_line_start) {
            out += m_prefix;
            m_line_start = false;
        }
        const std::size_t newline = piece.find('\n', at);
        const std::size_t end = newline == std::string_view::npos ? piece.size() : newline + 1;
        out.append(piece.substr(at, end - at));
        m_line_start = newline != std::string_view::npos;
        at = end;
    }
    return out;
}

std::string LineTagger::tag_lines(std::string_view piece)
{
    m_held.append(piece);
    const std::size_t newline = m_held.rfind('\n');
    if (m_held.size() > m_hold_limit) {
        return flush();
    }
    if (newline == std::string::npos) {
        return "";
    }
    std::string out = tag(std::string_view(m_held).substr(0, newline + 1));
    m_held.erase(0, newline + 1);
    return out;
}

std::string LineTagger::flush()
{
    std::string out = tag(m_held);
    m_held.clear();
    return out;
}

void TailLines::add(std::string_view piece)
{
    std::size_t at = 0;
    while (at < piece.size()) {
        const std::size_t newline = piece.find('\n', at);
        const std::size_t end = newline == std::string_view::npos ? piece.size() : newline;
        const std::string_view part = piece.substr(at, end - at);
        const std::size_t room = m_line_bytes - std::min(m_line_bytes, m_current.size());
        m_current_cut = m_current_cut || part.size() > room;
        m_current.append(part.substr(0, room));
        if (newline == std::string_view::npos) {
            break;
        }
        m_done.push_back(m_current_cut ? m_current + " ..." : m_current);
        m_current.clear();
        m_current_cut = false;
        if (m_done.size() > m_lines) {
            m_done.pop_front();
        }
        at = newline + 1;
    }
}

std::deque<std::string> TailLines::lines() const
{
    std::deque<std::string> out = m_done;
    if (!m_current.empty()) {
        out.push_back(m_current_cut ? m_current + " ..." : m_current);
        if (out.size() > m_lines) {
            out.pop_front();
        }
    }
    return out;
}

RankFailure RankFailure::of(
    unsigned rank, std::string host, unsigned local_rank, int wait_status, double seconds, std::deque<std::string> tail)
{
    RankFailure f;
    f.rank = rank;
    f.host = std::move(host);
    f.local_rank = local_rank;
    f.ending = base::ending_words(wait_status);
    f.exit_status = WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status) : WEXITSTATUS(wait_status);
    f.seconds = seconds;
    f.tail = std::move(tail);
    return f;
}

namespace {

constexpr std::string_view report_start = "gpurun: rank ";
constexpr std::string_view tail_start = "  | ";
constexpr std::string_view with_lines = "; last lines of its stderr:";
constexpr std::string_view without_lines = "; it wrote nothing to stderr";
constexpr std::size_t most_held = 64U << 10;

bool starts_with(std::string_view text, std::string_view prefix)
{
    return text.substr(0, prefix.size()) == prefix;
}

/// Takes `prefix` off the front of `text`; false when it is not there.
bool take(std::string_view& text, std::string_view prefix)
{
    if (!starts_with(text, prefix)) {
        return false;
    }
    text.remove_prefix(prefix.size());
    return true;
}

/// Takes a decimal number off the front of `text`.
bool take_number(std::string_view& text, unsigned& value)
{
    std::size_t digits = 0;
    unsigned long long n = 0;
    while (digits < text.size() && digits < 10 && text[digits] >= '0' && text[digits] <= '9') {
        n = n * 10 + static_cast<unsigned>(text[digits] - '0');
        ++digits;
    }
    if (digits == 0 || n > 0xffffffffULL) {
        return false;
    }
    value = static_cast<unsigned>(n);
    text.remove_prefix(digits);
    return true;
}

/// The exit status an ending stands for: "exit status 3" is 3, "signal 9 (Killed)" 137.
std::optional<int> status_of(std::string_view ending)
{
    unsigned n = 0;
    if (take(ending, "exit status ") && take_number(ending, n) && ending.empty() && n < 256) {
        return static_cast<int>(n);
    }
    if (take(ending, "signal ") && take_number(ending, n) && take(ending, " (") && n > 0 && n < 128) {
        return 128 + static_cast<int>(n);
    }
    return std::nullopt;
}

/// The first line of a helper's report (without its newline), read back; nothing for any other
/// line. `tail_follows`: the line says its lines of standard error come next.
std::optional<RankFailure> parse_report_line(std::string_view line, bool& tail_follows)
{
    RankFailure f;
    if (!take(line, report_start) || !take_number(line, f.rank) || !take(line, " (")) {
        return std::nullopt;
    }
    const std::size_t local = line.rfind(", local rank ");
    if (local == std::string_view::npos) {
        return std::nullopt;
    }
    f.host = std::string(line.substr(0, local));
    line.remove_prefix(local + std::string_view(", local rank ").size());
    if (!take_number(line, f.local_rank) || !take(line, ") failed: ")) {
        return std::nullopt;
    }
    // "exit status 3 after 12.4 s" and what follows: the time is the last " after ".
    tail_follows = line.size() >= with_lines.size() && line.substr(line.size() - with_lines.size()) == with_lines;
    if (tail_follows) {
        line.remove_suffix(with_lines.size());
    } else if (line.size() >= without_lines.size() &&
        line.substr(line.size() - without_lines.size()) == without_lines) {
        line.remove_suffix(without_lines.size());
    }
    // ", at 1764782345.123" after the time: when it failed, by its host's clock.
    if (const std::size_t at = line.rfind(", at "); at != std::string_view::npos) {
        const std::string stamp(line.substr(at + 5));
        char* stamp_end = nullptr;
        const double value = std::strtod(stamp.c_str(), &stamp_end);
        if (!stamp.empty() && stamp_end == stamp.c_str() + stamp.size() && value > 0 && value < 1e11) {
            f.at = value;
            line.remove_suffix(line.size() - at);
        }
    }
    const std::size_t after = line.rfind(" after ");
    if (after == std::string_view::npos || line.size() < after + 9 || line.substr(line.size() - 2) != " s") {
        return std::nullopt;
    }
    f.ending = std::string(line.substr(0, after));
    const std::string seconds(line.substr(after + 7, line.size() - after - 9));
    char* end = nullptr;
    f.seconds = std::strtod(seconds.c_str(), &end);
    const auto status = status_of(f.ending);
    if (seconds.empty() || end != seconds.c_str() + seconds.size() || !status || !(f.seconds >= 0)) {
        return std::nullopt;
    }
    f.exit_status = *status;
    return f;
}

} // namespace

double failed_at(double last_write, double ended)
{
    return last_write > 0 && last_write <= ended && ended - last_write <= failed_at_window ? last_write : ended;
}

std::string failure_report(const RankFailure& f, std::string_view verb, bool with_tail, bool with_at)
{
    std::string out = fmt::format("gpurun: rank {} ({}, local rank {}) {}: {} after {:.1f} s", f.rank,
        base::escape_controls(f.host, false), f.local_rank, verb, base::escape_controls(f.ending, false), f.seconds);
    if (with_at && f.at > 0) {
        out += fmt::format(", at {:.3f}", f.at);
    }
    if (!with_tail) {
        return out + '\n';
    }
    if (f.tail.empty()) {
        return out += std::string(without_lines) + '\n';
    }
    out += std::string(with_lines) + '\n';
    for (const auto& line : f.tail) {
        out += std::string(tail_start) + base::escape_controls(line, false) + '\n';
    }
    return out;
}

std::size_t first_failure(const std::vector<RankFailure>& failures, std::size_t count)
{
    count = std::min(count, failures.size());
    std::size_t first = 0;
    auto key = [&](std::size_t i) { return failures[i].at > 0 ? failures[i].at : HUGE_VAL; };
    for (std::size_t i = 1; i < count; ++i) {
        if (key(i) < key(first)) {
            first = i;
        }
    }
    return first;
}

std::string FailureScanner::line(std::string_view text)
{
    const std::string_view bare = text.substr(0, text.size() - 1);
    if (m_in_report && starts_with(bare, tail_start)) {
        m_failures.back().tail.emplace_back(bare.substr(tail_start.size()));
        return "";
    }
    m_in_report = false;
    bool tail_follows = false;
    if (auto f = parse_report_line(bare, tail_follows)) {
        m_failures.push_back(std::move(*f));
        m_in_report = tail_follows;
        return "";
    }
    return std::string(text);
}

bool FailureScanner::may_be_report(std::string_view start) const
{
    auto agrees = [&](std::string_view prefix) {
        const std::size_t n = std::min(start.size(), prefix.size());
        return start.substr(0, n) == prefix.substr(0, n);
    };
    return agrees(report_start) || (m_in_report && agrees(tail_start));
}

std::string FailureScanner::feed(std::string_view piece)
{
    std::string out;
    while (!piece.empty()) {
        const std::size_t newline = piece.find('\n');
        const std::size_t end = newline == std::string_view::npos ? piece.size() : newline + 1;
        if (m_passing) {
            out.append(piece.substr(0, end));
            m_passing = newline == std::string_view::npos;
        } else {
            m_held.append(piece.substr(0, end));
            if (newline != std::string_view::npos) {
                out += line(m_held);
                m_held.clear();
            } else if (!may_be_report(m_held) || m_held.size() > most_held) {
                // Not a report after all (or too long for one): it passes through from here on.
                m_in_report = false;
                out += m_held;
                m_held.clear();
                m_passing = true;
            }
        }
        piece.remove_prefix(end);
    }
    return out;
}

std::string FailureScanner::finish()
{
    std::string out = std::move(m_held);
    m_held.clear();
    m_passing = false;
    m_in_report = false;
    return out;
}

} // namespace launcher
