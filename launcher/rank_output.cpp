#include "launcher/rank_output.hpp"

#include "probes/error.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
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

std::string ending_words(int wait_status)
{
    if (WIFSIGNALED(wait_status)) {
        const int sig = WTERMSIG(wait_status);
        const char* name = strsignal(sig);
        return fmt::format(
            "signal {} ({}){}", sig, name != nullptr ? name : "unknown", WCOREDUMP(wait_status) ? ", core dumped" : "");
    }
    return fmt::format("exit status {}", WEXITSTATUS(wait_status));
}

std::string failure_report(unsigned rank, const std::string& host, unsigned local_rank, int wait_status, double seconds,
    const std::deque<std::string>& tail)
{
    std::string out = fmt::format("gpurun: rank {} ({}, local rank {}) failed: {} after {:.1f} s", rank, host,
        local_rank, ending_words(wait_status), seconds);
    if (tail.empty()) {
        return out + "; it wrote nothing to stderr\n";
    }
    out += "; last lines of its stderr:\n";
    for (const auto& line : tail) {
        out += "  | " + probes::escape_controls(line, false) + '\n';
    }
    return out;
}

} // namespace launcher
