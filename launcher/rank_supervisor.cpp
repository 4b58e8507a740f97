#include "launcher/rank_supervisor.hpp"

#include "base/atomic_file.hpp"
#include "base/error.hpp"
#include "base/process.hpp"
#include "base/sysroot.hpp"
#include "base/unique_fd.hpp"
#include "launcher/rank_output.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <functional>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

namespace launcher {

namespace {

using Clock = std::chrono::steady_clock;
using base::Error;
using base::UniqueFd;

/// The processes whose parent is `parent`, from /proc/<pid>/stat.
/// The processes (but this one) whose /proc/PID/`file` satisfies `wanted`. A process may end
/// while it is read (ESRCH): it then does not count.
std::vector<pid_t> processes_where(const char* file, const std::function<bool(const std::string&)>& wanted)
{
    std::vector<pid_t> out;
    DIR* proc = opendir("/proc");
    if (proc == nullptr) {
        return out;
    }
    const base::Sysroot root("/");
    while (const dirent* entry = readdir(proc)) {
        char* end = nullptr;
        const long pid = std::strtol(entry->d_name, &end, 10);
        if (pid <= 0 || *end != '\0' || pid == getpid()) {
            continue;
        }
        if (const auto text = root.read(fmt::format("/proc/{}/{}", pid, file)); text && wanted(*text)) {
            out.push_back(static_cast<pid_t>(pid));
        }
    }
    closedir(proc);
    return out;
}

/// The living processes whose parent is `parent`, from /proc/PID/stat.
std::vector<pid_t> children_of(pid_t parent)
{
    return processes_where("stat", [parent](const std::string& text) {
        // "pid (comm) state ppid ...": comm may hold anything, so read after its last ')'.
        const std::size_t close = text.rfind(')');
        // " S PPID ...": the state, then the parent.
        if (close == std::string::npos || close + 4 >= text.size() || text[close + 2] == 'Z') {
            return false;
        }
        char* ppid_end = nullptr;
        const long ppid = std::strtol(text.c_str() + close + 4, &ppid_end, 10);
        return ppid_end != text.c_str() + close + 4 && ppid == parent;
    });
}

/// 64 random bits for the rank's marker, from the kernel (std::random_device asks the CPU first,
/// which a VM traps: 0.1 ms per rank); the clock where getrandom has nothing to give.
std::uint64_t marker_nonce()
{
    std::uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof nonce)) {
        nonce = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    return nonce;
}

/// Whether any process is left below the helper (the program's orphans come to it): without one,
/// nothing of the rank's is left but what is still in the program's group.
bool has_children()
{
    siginfo_t info{};
    return waitid(P_ALL, 0, &info, WEXITED | WSTOPPED | WCONTINUED | WNOHANG | WNOWAIT) == 0;
}

/// `signal` to the program's group and to every process the helper is parent of (the program's
/// orphans come to it as their subreaper).
void signal_all(pid_t group, int signal)
{
    killpg(group, signal);
    for (pid_t child : children_of(getpid())) {
        kill(child, signal);
    }
}

/// Every process of this user's whose environment holds `marker` ("NAME=VALUE"), read from
/// /proc/PID/environ (what it was started with), but this one.
std::vector<pid_t> marked_processes(const std::string& marker)
{
    const std::string wanted = '\0' + marker + '\0';
    return processes_where(
        "environ", [&wanted](const std::string& text) { return ('\0' + text).find(wanted) != std::string::npos; });
}

/// SIGKILL to every process marked so, until none is left (a process may fork while it goes).
void kill_marked(const std::string& marker)
{
    for (int pass = 0; pass < 20; ++pass) {
        const auto left = marked_processes(marker);
        if (left.empty()) {
            return;
        }
        for (pid_t pid : left) {
            kill(pid, SIGKILL);
        }
        usleep(50000);
    }
}

double wall_clock()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// One of the program's output streams, copied to where the helper's own goes.
struct Stream {
    UniqueFd from;
    int to = -1; ///< STDOUT_FILENO or STDERR_FILENO
    UniqueFd log;
    std::optional<LineTagger> tagger;
    TailLines* tail = nullptr;
    double last_write = 0; ///< when the program last wrote here, seconds since the epoch
    /// Since when the tagger holds an unfinished line back; max() when it holds none.
    Clock::time_point held_since = Clock::time_point::max();

    /// How long an unfinished line may wait for its end before it goes out as it is.
    static constexpr std::chrono::milliseconds hold_for{100};
    Clock::time_point flush_at() const
    {
        return held_since == Clock::time_point::max() ? held_since : held_since + hold_for;
    }
    /// Sends what the tagger holds (at the stream's end, or once it has waited long enough).
    void flush()
    {
        if (tagger && tagger->holding()) {
            base::write_all(to, tagger->flush());
        }
        held_since = Clock::time_point::max();
    }

    /// Copies one read of what is there (the descriptor does not block); false when nothing was
    /// there or the stream has ended.
    bool relay()
    {
        std::array<char, 65536> buffer{};
        const ssize_t n = read(from.get(), buffer.data(), buffer.size());
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            return false;
        }
        if (n <= 0) {
            from.reset();
            flush();
            return false;
        }
        const std::string_view piece(buffer.data(), static_cast<std::size_t>(n));
        last_write = wall_clock();
        if (tail != nullptr) {
            tail->add(piece);
        }
        if (log.get() >= 0) {
            base::write_all(log.get(), piece);
        }
        if (!tagger) {
            base::write_all(to, piece);
            return true;
        }
        base::write_all(to, tagger->tag_lines(piece));
        if (!tagger->holding()) {
            held_since = Clock::time_point::max();
        } else if (held_since == Clock::time_point::max()) {
            held_since = Clock::now();
        }
        return true;
    }
};

UniqueFd open_log(const std::string& dir, unsigned rank, const char* kind)
{
    return UniqueFd(base::open_output_file(fmt::format("{}/rank{}.{}", dir, rank, kind), "--log-dir", 0644));
}

} // namespace

int supervise_rank(const std::vector<std::string>& program, const RankSupervision& o)
{
    // Everything the program starts inherits a marker of this rank. Should the helper be killed
    // with SIGKILL before it could stop them (a launcher that stops its processes so), a watcher
    // in a process group of its own kills what still carries it: a daemon that left the program's
    // process group and session is no longer below the helper by then.
    const std::string marker = fmt::format("{}={}-{:016x}", rank_marker_variable, getpid(), marker_nonce());
    UniqueFd watcher;
    if (setenv(rank_marker_variable, marker.substr(marker.find('=') + 1).c_str(), 1) == 0) {
        watcher = base::after_exit([&marker] { kill_marked(marker); });
    }
    // Only now: the watcher, twice removed, must not come back to the helper as an orphan (it
    // would be taken for one of the program's, signalled with them, and waited for).
    prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL);
    Stream out;
    Stream err;
    out.to = STDOUT_FILENO;
    err.to = STDERR_FILENO;
    if (!o.log_dir.empty()) {
        const std::string dir = base::own_directory(o.log_dir, "--log-dir");
        out.log = open_log(dir, o.rank, "out");
        err.log = open_log(dir, o.rank, "err");
    }
    if (o.tag_output) {
        out.tagger.emplace(fmt::format("[{}] ", o.rank));
        err.tagger.emplace(fmt::format("[{}] ", o.rank));
    }
    TailLines tail;
    err.tail = &tail;
    // Standard error always passes through the helper (for the failure report); standard output
    // only when it is tagged or logged.
    base::ReaderPipe err_pipe = base::make_reader_pipe("the rank's output");
    base::ReaderPipe out_pipe;
    if (o.tag_output || out.log.get() >= 0) {
        out_pipe = base::make_reader_pipe("the rank's output");
    }

    sigset_t watched;
    sigemptyset(&watched);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
        sigaddset(&watched, s);
    }
    sigset_t previous;
    sigprocmask(SIG_BLOCK, &watched, &previous);
    UniqueFd signals(signalfd(-1, &watched, SFD_CLOEXEC | SFD_NONBLOCK));
    if (signals.get() < 0) {
        throw Error(fmt::format("cannot watch signals (signalfd): {}", std::strerror(errno)));
    }

    base::SpawnOptions spawn;
    spawn.own_group = true;
    // Should the helper itself be killed with SIGKILL (a launcher that stops its processes so),
    // the program goes with it.
    spawn.die_with_parent = true;
    spawn.mask = &previous;
    spawn.exec_error = fmt::format("gpurun-rank: cannot run '{}': ", program.at(0));
    spawn.stdout_fd = out_pipe.write.get();
    spawn.stderr_fd = err_pipe.write.get();
    const auto started = Clock::now();
    const base::Child child = base::spawn_program(program, spawn);
    const pid_t pid = child.pid();
    if (o.started) {
        o.started(pid);
    }
    out_pipe.write.reset();
    err_pipe.write.reset();
    out.from = std::move(out_pipe.read);
    err.from = std::move(err_pipe.read);

    int status = 0;
    bool ended = false;
    double seconds = 0;
    double ended_at = 0; // seconds since the epoch
    int forwarded = 0;
    bool leftovers_told = false;
    bool killed = false;
    auto kill_at = Clock::time_point::max();
    const auto grace =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(o.grace_seconds, 1e6)));
    while (true) {
        if (ended) {
            int ignored = 0;
            const pid_t reaped = waitpid(-1, &ignored, WNOHANG);
            if (reaped < 0 && errno == ECHILD) {
                break; // nothing of the rank's is left
            }
        }
        std::array<pollfd, 3> fds{};
        nfds_t n = 0;
        fds[n++] = pollfd{signals.get(), POLLIN, 0};
        for (Stream* s : {&out, &err}) {
            if (s->from.get() >= 0) {
                fds[n++] = pollfd{s->from.get(), POLLIN, 0};
            }
        }
        int timeout = 1000;
        if (kill_at != Clock::time_point::max()) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - Clock::now()).count();
            timeout = static_cast<int>(std::clamp<long long>(left, 0, 1000));
        }
        if (killed || (ended && leftovers_told)) {
            timeout = std::min(timeout, 50); // reap what the kills reach
        }
        for (const Stream* s : {&out, &err}) {
            if (s->flush_at() != Clock::time_point::max()) {
                const auto left = std::chrono::ceil<std::chrono::milliseconds>(s->flush_at() - Clock::now()).count();
                timeout = std::min(timeout, static_cast<int>(std::max<long long>(left, 0)));
            }
        }
        if (poll(fds.data(), n, timeout) < 0 && errno != EINTR) {
            throw Error(fmt::format("cannot wait for the rank (poll): {}", std::strerror(errno)));
        }
        for (nfds_t i = 1; i < n; ++i) {
            if (fds[i].revents != 0) {
                (fds[i].fd == out.from.get() ? out : err).relay();
            }
        }
        signalfd_siginfo info{};
        while (read(signals.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
            const int sig = static_cast<int>(info.ssi_signo);
            if (sig == SIGCHLD) {
                int st = 0;
                pid_t reaped = 0;
                while ((reaped = waitpid(-1, &st, WNOHANG)) > 0) {
                    if (reaped == pid) {
                        status = st;
                        ended = true;
                        seconds = std::chrono::duration<double>(Clock::now() - started).count();
                        ended_at = wall_clock();
                    }
                }
            } else if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
                if (forwarded == 0) {
                    forwarded = sig;
                    signal_all(pid, sig);
                    kill_at = std::min(kill_at, Clock::now() + grace);
                } else {
                    kill_at = Clock::now(); // a second signal: at once
                }
            }
        }
        const auto now = Clock::now();
        for (Stream* s : {&out, &err}) {
            if (now >= s->flush_at()) {
                s->flush();
            }
        }
        if (ended && !leftovers_told) {
            // The rank is done: what it left running goes too, SIGKILL if it is still there in 2 s.
            leftovers_told = true;
            if (has_children()) {
                signal_all(pid, SIGTERM);
            } else {
                killpg(pid, SIGTERM); // nothing left below the helper: no need to read /proc
            }
            kill_at = std::min(kill_at, now + std::chrono::seconds(2));
        }
        if (now >= kill_at) {
            killed = true;
            signal_all(pid, SIGKILL); // again each turn: the orphans of those killed come to the helper
        }
    }
    // Nothing the program started is left: as the subreaper, the helper was the parent of every
    // orphan among them, and it has reaped them all. The watcher has nothing to look for.
    base::not_needed_after_exit(watcher);
    for (Stream* s : {&out, &err}) {
        while (s->from.get() >= 0 && s->relay()) { }
        s->flush();
    }
    const bool failed = WIFSIGNALED(status) || WEXITSTATUS(status) != 0;
    if (failed && forwarded == 0) {
        RankFailure f = RankFailure::of(o.rank, o.host, o.local_rank, status, seconds, tail.lines());
        f.at = failed_at(err.last_write, ended_at);
        base::write_all(STDERR_FILENO, failure_report(f, "failed", true, true));
    }
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

} // namespace launcher
