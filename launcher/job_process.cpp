#include "launcher/job_process.hpp"

#include "base/error.hpp"
#include "base/process.hpp"
#include "base/unique_fd.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <poll.h>
#include <unistd.h>

namespace launcher {

namespace {

using Clock = std::chrono::steady_clock;

/// The launcher's standard error, read by gpurun and passed on to its own.
class ErrorRelay {
public:
    int read_fd() const { return m_pipe.read.get(); }
    int write_fd() const { return m_pipe.write.get(); }
    /// After the launcher has started: only it and what it starts hold the pipe.
    void started() { m_pipe.write.reset(); }

    /// Passes on what there is to read now; false at the stream's end.
    bool relay()
    {
        std::array<char, 65536> buffer{};
        while (true) {
            const ssize_t n = read(m_pipe.read.get(), buffer.data(), buffer.size());
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0 && errno == EAGAIN) {
                return true;
            }
            if (n <= 0) {
                print(m_scanner.finish());
                return false;
            }
            print(m_scanner.feed(std::string_view(buffer.data(), static_cast<std::size_t>(n))));
        }
    }
    /// What is left once the launcher has ended: what its leftovers still write, until they close
    /// the pipe or for at most `most`.
    void drain(std::chrono::milliseconds most)
    {
        const auto until = Clock::now() + most;
        while (relay()) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
            pollfd fd{m_pipe.read.get(), POLLIN, 0};
            if (left <= 0 || poll(&fd, 1, static_cast<int>(left)) == 0) {
                print(m_scanner.finish());
                return;
            }
        }
    }
    const std::vector<RankFailure>& failures() const { return m_scanner.failures(); }
    /// The reports that are whole: a report's tail may come in several reads. One whose tail has
    /// had nothing new for `quiet` counts as whole.
    std::size_t complete(Clock::duration quiet)
    {
        const auto now = Clock::now();
        const std::size_t tails = m_scanner.failures().empty() ? 0 : m_scanner.failures().back().tail.size();
        if (m_scanner.failures().size() != m_open_count || tails != m_open_tail) {
            m_open_count = m_scanner.failures().size();
            m_open_tail = tails;
            m_open_since = now;
        } else if (now - m_open_since >= quiet) {
            m_scanner.end_report();
        }
        return m_scanner.complete();
    }

private:
    static void print(const std::string& text) { base::write_all(STDERR_FILENO, text); }

    base::ReaderPipe m_pipe = base::make_reader_pipe("the job's output");
    FailureScanner m_scanner;
    std::size_t m_open_count = 0; ///< the reports, and the last one's tail lines, when last seen
    std::size_t m_open_tail = 0;
    Clock::time_point m_open_since{};
};

Clock::duration seconds_of(double seconds)
{
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(seconds, 1e6)));
}

} // namespace

JobEnd run_job(const std::vector<std::string>& argv, const JobControl& control, const std::function<void()>& tick)
{
    const double grace_seconds = control.grace_seconds;
    base::Supervisor job;
    ErrorRelay errors;
    // With a terminal, the launcher stays in our process group so it can read stdin and gets the
    // terminal's Ctrl-C itself; otherwise it gets a group of its own and only what we forward.
    const bool own_group = isatty(STDIN_FILENO) == 0;
    const auto started = Clock::now();
    job.start(argv, own_group, fmt::format("gpurun: cannot run {}: ", argv[0]), errors.write_fd());
    errors.started();

    JobEnd end;
    bool killed = false;
    bool reading = true;
    auto deadline = Clock::time_point::max();
    auto name_at = Clock::time_point::max(); // when to say which rank failed first
    std::size_t told = 0; // failure reports printed so far
    std::optional<std::size_t> first;
    // Prints the first `whole` reports: once `name` is true, the one that failed first with its
    // tail, each other in one line.
    auto tell = [&](std::size_t whole, bool name) {
        if (!first && (!name || whole == 0)) {
            return;
        }
        if (!first) {
            first = first_failure(errors.failures(), whole);
            fmt::print(stderr, "{}", failure_report(errors.failures()[*first], "failed first"));
        }
        for (; told < whole; ++told) {
            if (told != *first) {
                fmt::print(stderr, "{}", failure_report(errors.failures()[told], "also failed", false));
            }
        }
    };
    while (true) {
        const auto event = job.wait(std::chrono::milliseconds(200), reading ? errors.read_fd() : -1);
        const auto now = Clock::now();
        if (event.readable) {
            reading = errors.relay();
        }
        const std::size_t whole = errors.complete(std::chrono::milliseconds(300));
        if (whole > 0 && name_at == Clock::time_point::max()) {
            // The others' reports may be on their way: which failed first is said when they had
            // a moment to come (their clocks tell the order, not their arrival).
            name_at = now + std::chrono::milliseconds(500);
            if (!control.launcher_stops_on_failure && end.signal == 0 && !event.exited) {
                // MPICH's Hydra waits for every rank of a program that exits without MPI_Abort.
                fmt::print(stderr, "gpurun: a rank failed; stopping the others ({}s grace)\n", grace_seconds);
                job.child().signal(SIGTERM);
                deadline = std::min(deadline, now + seconds_of(grace_seconds));
            }
        }
        tell(whole, now >= name_at || event.exited);
        if (event.signal != 0) {
            if (end.signal == 0) {
                end.signal = event.signal;
                const bool translated = control.interrupt_as != 0 && event.signal != SIGTERM;
                // A terminal's Ctrl-C already reached a launcher in our group: do not send it twice.
                if (translated) {
                    job.child().signal(control.interrupt_as);
                } else if (!(event.from_terminal && !own_group)) {
                    job.child().signal(event.signal);
                }
                deadline = std::min(deadline, now + seconds_of(grace_seconds));
                fmt::print(stderr, "gpurun: {} received, stopping the job ({}s grace; again to kill now)\n",
                    strsignal(event.signal), grace_seconds);
            } else if (!killed) {
                deadline = now;
            }
        }
        if (event.exited) {
            end.launcher_status = event.exit_code;
            break;
        }
        if (!killed && now >= deadline) {
            killed = true;
            fmt::print(stderr, "gpurun: the job did not stop in time; killing it\n");
            job.kill_now();
        }
        if (tick) {
            tick();
        }
    }
    end.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    if (reading) {
        errors.drain(std::chrono::milliseconds(1000));
    }
    tell(errors.failures().size(), true);
    end.failures = errors.failures();
    end.first = first.value_or(0);
    if (end.signal != 0) {
        end.status = 128 + end.signal;
    } else if (!end.failures.empty()) {
        end.status = end.failures[end.first].exit_status;
    } else {
        end.status = end.launcher_status;
    }
    return end;
}

nlohmann::json summary_json(const JobEnd& end, const std::vector<std::string>& launcher_command, unsigned ranks)
{
    auto failure = [](const RankFailure& f) {
        nlohmann::json tail = nlohmann::json::array();
        for (const auto& line : f.tail) {
            tail.push_back(line);
        }
        return nlohmann::json{{"rank", f.rank}, {"host", f.host}, {"local_rank", f.local_rank}, {"ending", f.ending},
            {"exit_status", f.exit_status}, {"seconds", f.seconds},
            {"failed_at", f.at > 0 ? nlohmann::json(f.at) : nlohmann::json()}, {"stderr_tail", tail}};
    };
    nlohmann::json failures = nlohmann::json::array();
    for (const auto& f : end.failures) {
        failures.push_back(failure(f));
    }
    return nlohmann::json{{"exit_status", end.status}, {"ranks", ranks}, {"seconds", end.seconds},
        {"signal", end.signal != 0 ? nlohmann::json(fmt::format("SIG{}", sigabbrev_np(end.signal))) : nlohmann::json()},
        {"launcher", {{"command", launcher_command}, {"exit_status", end.launcher_status}}},
        {"first_failure", end.failures.empty() ? nlohmann::json() : failure(end.failures.at(end.first))},
        {"failures", failures}};
}

} // namespace launcher
