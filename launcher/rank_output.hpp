#pragma once

// What the rank helper does with a rank's output: tag each line with the rank, keep the last lines
// of its standard error for the failure report. Pure, so they are tested on any bytes.

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>

namespace launcher {

/// Puts `prefix` ("[3] ") before every line of a byte stream that arrives in pieces. Bytes pass
/// through as they are (binary too); a line of any length gets one prefix, at its start, and
/// nothing is held back: what comes in goes out at once.
class LineTagger {
public:
    explicit LineTagger(std::string prefix) : m_prefix(std::move(prefix)) { }
    /// The piece with its prefixes.
    std::string tag(std::string_view piece);

private:
    std::string m_prefix;
    bool m_line_start = true;
};

/// The last `lines` lines of a stream, each cut to `line_bytes` (with " ..."), for a failure
/// report. Control characters are escaped when the lines are read back.
class TailLines {
public:
    explicit TailLines(std::size_t lines = 20, std::size_t line_bytes = 512) : m_lines(lines), m_line_bytes(line_bytes)
    {
    }
    void add(std::string_view piece);
    /// The kept lines, oldest first, the unfinished last line included.
    std::deque<std::string> lines() const;

private:
    std::size_t m_lines;
    std::size_t m_line_bytes;
    std::deque<std::string> m_done;
    std::string m_current;
    bool m_current_cut = false;
};

/// How a rank ended, as the failure report says it: "exit status 3", "signal 9 (Killed)".
std::string ending_words(int wait_status);

/// The report the helper prints when its rank fails, e.g.
/// "gpurun: rank 1 (n02, local rank 1) failed: exit status 3 after 12.4 s; last lines of its stderr:"
/// then each line indented by "  | ". Without lines: "...; it wrote nothing to stderr".
std::string failure_report(unsigned rank, const std::string& host, unsigned local_rank, int wait_status, double seconds,
    const std::deque<std::string>& tail);

} // namespace launcher
