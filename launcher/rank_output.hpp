#pragma once

// What the rank helper does with a rank's output: tag each line with the rank, keep the last lines
// of its standard error for the failure report. Pure, so they are tested on any bytes.

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace launcher {

/// Puts `prefix` ("[3] ") before every line of a byte stream that arrives in pieces. Bytes pass
/// through as they are (binary too), and a line of any length gets one prefix, at its start.
/// tag() gives out all it was given at once; tag_lines() holds an unfinished last line back (up
/// to `hold_limit` bytes) until its end comes or flush() is called, so that a line a program
/// writes in pieces (Python with PYTHONUNBUFFERED writes each print argument apart) reaches the
/// launcher in one write and is not cut by another rank's line there.
class LineTagger {
public:
    explicit LineTagger(std::string prefix, std::size_t hold_limit = 64U << 10)
        : m_prefix(std::move(prefix)), m_hold_limit(hold_limit)
    {
    }
    /// The piece with its prefixes.
    std::string tag(std::string_view piece);
    /// What was held and the piece, tagged, up to the end of their last complete line; the rest
    /// is held, unless it is longer than the limit.
    std::string tag_lines(std::string_view piece);
    /// What is held, tagged.
    std::string flush();
    bool holding() const { return !m_held.empty(); }

private:
    std::string m_prefix;
    std::size_t m_hold_limit;
    bool m_line_start = true;
    std::string m_held;
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

/// A rank that failed: what its helper knows, what the report says, what gpurun reads back.
struct RankFailure {
    unsigned rank = 0;
    std::string host;
    unsigned local_rank = 0;
    std::string ending; ///< base::ending_words(): "exit status 3", "signal 11 (Segmentation fault)"
    int exit_status = 0; ///< the status a shell would show: N, or 128+N for signal N
    double seconds = 0; ///< since the rank started
    std::deque<std::string> tail; ///< its last lines of standard error, oldest first
    /// When it failed, in seconds since the epoch by its host's clock (0: not known): when it last
    /// wrote to standard error, if that was within failed_at_window of its end (a traceback is
    /// written when the error happens; the interpreter's teardown may take a while after it, and
    /// the other ranks fail as soon as its connections close), else when it ended.
    double at = 0;

    static RankFailure of(unsigned rank, std::string host, unsigned local_rank, int wait_status, double seconds,
        std::deque<std::string> tail);
};

/// How close to its end a rank's last line on standard error must be to count as when it failed.
inline constexpr double failed_at_window = 10;

/// The time a rank failed (RankFailure::at): `last_write` (0: none) when within failed_at_window
/// seconds before `ended`, else `ended`.
double failed_at(double last_write, double ended);

/// The report, e.g. with `verb` "failed":
/// "gpurun: rank 1 (n02, local rank 1) failed: exit status 3 after 12.4 s; last lines of its stderr:"
/// then each line indented by "  | ". Without lines: "...; it wrote nothing to stderr". With
/// `with_tail` false, the first line alone, ending after the time. With `with_at` (the helper's
/// report, for gpurun to order the failures of several ranks) ", at EPOCH" follows the time.
std::string failure_report(
    const RankFailure& f, std::string_view verb = "failed", bool with_tail = true, bool with_at = false);

/// Which of the first `count` failures came first: the earliest `at`, those without one after all
/// that have one, and in the order they came where that does not tell.
std::size_t first_failure(const std::vector<RankFailure>& failures, std::size_t count);

/// Finds the helpers' failure reports in the stream gpurun relays from its launcher (standard
/// error of every rank on every host, in the order they reach it): each is taken out of the
/// stream and kept; every other byte passes through at once, except the start of a line that may
/// still become a report, which waits for its end (at most 64 KiB).
class FailureScanner {
public:
    /// What to print of `piece` now.
    std::string feed(std::string_view piece);
    /// What is still held, at the stream's end.
    std::string finish();
    /// The reports found, in the order they came.
    const std::vector<RankFailure>& failures() const { return m_failures; }
    /// How many of them are whole: the last may still be waiting for lines of its tail.
    std::size_t complete() const { return m_failures.size() - (m_in_report ? 1 : 0); }
    /// The last report's tail is over (nothing more came for a while).
    void end_report() { m_in_report = false; }

private:
    /// A complete line (with its newline): kept as part of a report, or returned to print.
    std::string line(std::string_view text);
    /// Whether a line that starts so may still be a report or a line of its tail.
    bool may_be_report(std::string_view start) const;

    std::string m_held; ///< the start of a line that may be a report
    bool m_passing = false; ///< in a line that is not a report: the rest passes through
    bool m_in_report = false; ///< the previous line was a report's, so "  | " lines are its tail
    std::vector<RankFailure> m_failures;
};

} // namespace launcher
