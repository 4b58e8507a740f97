#include "base/process.hpp"

#include "base/atomic_file.hpp"
#include "base/error.hpp"
#include "base/unique_fd.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <limits>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

// What a child started by start_sharing runs is not instrumented by AddressSanitizer: that child
// runs on a stack ASan does not know, and before a call that does not return ASan would clear
// the shadow of the thread's stack from there up (or warn on the child's standard error).
#define NOT_INSTRUMENTED __attribute__((no_sanitize("address")))

namespace base {

void KeptOutput::append(const char* data, std::size_t size)
{
    const std::size_t to_head = std::min(size, m_head_limit - m_head.size());
    m_head.append(data, to_head);
    data += to_head;
    size -= to_head;
    if (size == 0) {
        return;
    }
    m_tail.append(data, size);
    // Trim only once the tail is twice its size: each byte is moved at most once.
    if (m_tail.size() > 2 * m_tail_limit) {
        const std::size_t cut = m_tail.size() - m_tail_limit;
        m_tail.erase(0, cut);
        m_dropped += cut;
    }
}

std::string KeptOutput::take()
{
    if (m_tail.size() > m_tail_limit) {
        const std::size_t cut = m_tail.size() - m_tail_limit;
        m_tail.erase(0, cut);
        m_dropped += cut;
    }
    std::string out = std::move(m_head);
    if (m_dropped > 0) {
        if (!out.empty() && out.back() != '\n') {
            out += '\n';
        }
        out += fmt::format("[... {} bytes of output left out ...]\n", m_dropped);
    }
    out += m_tail;
    m_head.clear();
    m_tail.clear();
    m_dropped = 0;
    return out;
}

std::optional<std::string> find_executable(const std::string& name, const char* path)
{
    auto usable = [](const std::string& file) {
        struct stat st { };
        return stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0;
    };
    if (name.empty()) {
        return std::nullopt;
    }
    if (name.find('/') != std::string::npos) {
        return usable(name) ? std::optional<std::string>(name) : std::nullopt;
    }
    std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
    std::size_t pos = 0;
    while (pos <= dirs.size()) {
        std::size_t colon = dirs.find(':', pos);
        std::string dir = dirs.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
        std::string file = (dir.empty() ? std::string(".") : dir) + "/" + name;
        if (usable(file)) {
            return file;
        }
        if (colon == std::string::npos) {
            break;
        }
        pos = colon + 1;
    }
    return std::nullopt;
}

NOT_INSTRUMENTED void exit_after_failed_exec(const std::string& message, int err) noexcept
{
    // strerrordesc_np: no translation, so no allocation in a child that shares the parent's memory.
    const char* reason = strerrordesc_np(err);
    reason = reason != nullptr ? reason : "unknown error";
    for (const auto& [text, size] : {std::pair{message.data(), message.size()}, std::pair{reason, std::strlen(reason)},
             std::pair{"\n", std::size_t{1}}}) {
        if (write(STDERR_FILENO, text, size) < 0) {
            break;
        }
    }
    _exit(127);
}

// --- Child ---------------------------------------------------------------------------------------

Child::Child(pid_t pid, int output_fd, const SpawnOptions& options)
    : m_pid(pid), m_fd(output_fd), m_own_group(options.own_group), m_kept(options.keep_head, options.keep_tail)
{
}

Child::Child(Child&& other) noexcept
    : m_pid(std::exchange(other.m_pid, -1)), m_fd(std::exchange(other.m_fd, -1)), m_own_group(other.m_own_group),
      m_kept(std::move(other.m_kept))
{
}

Child& Child::operator=(Child&& other) noexcept
{
    if (this != &other) {
        close_output();
        m_pid = std::exchange(other.m_pid, -1);
        m_fd = std::exchange(other.m_fd, -1);
        m_own_group = other.m_own_group;
        m_kept = std::move(other.m_kept);
    }
    return *this;
}

Child::~Child()
{
    close_output();
}

void Child::signal(int signal) const
{
    if (m_pid <= 0) {
        return;
    }
    if (m_own_group) {
        killpg(m_pid, signal);
    }
    kill(m_pid, signal);
}

void Child::read_output()
{
    char buffer[65536];
    const ssize_t n = read(m_fd, buffer, sizeof buffer);
    if (n > 0) {
        m_kept.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
        close_output();
    }
}

void Child::close_output()
{
    if (m_fd >= 0) {
        close(m_fd);
        m_fd = -1;
    }
}

// --- Starting ------------------------------------------------------------------------------------

namespace {

/// Everything a child needs, made before fork: after it, a threaded parent's heap and stdio locks
/// may be held, so the child makes only async-signal-safe calls.
struct Prepared {
    std::vector<std::string> argv;
    std::vector<char*> args;
    std::string file; ///< with an environment: the program looked up in its PATH
    std::vector<std::string> env_entries;
    std::vector<char*> envp;
    long max_fd = 0;
};

Prepared prepare(const std::vector<std::string>& argv, const SpawnOptions& options)
{
    Prepared p;
    p.argv = argv;
    for (auto& a : p.argv) {
        p.args.push_back(a.data());
    }
    p.args.push_back(nullptr);
    if (options.env != nullptr) {
        const auto path = options.env->find("PATH");
        // Not found: execve fails in the child and the status is 127, as with execvp.
        p.file =
            find_executable(argv[0], path == options.env->end() ? nullptr : path->second.c_str()).value_or(argv[0]);
        for (const auto& [name, value] : *options.env) {
            std::string entry = name;
            entry += '=';
            entry += value;
            p.env_entries.push_back(std::move(entry));
        }
        for (auto& e : p.env_entries) {
            p.envp.push_back(e.data());
        }
        p.envp.push_back(nullptr);
    }
    p.max_fd = std::min(sysconf(_SC_OPEN_MAX), 65536L);
    return p;
}

void close_from(int first, long max_fd) noexcept
{
    if (syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, 0U) != 0) {
        for (long fd = first; fd < max_fd; ++fd) {
            close(static_cast<int>(fd));
        }
    }
}

/// The part of a child's set-up common to programs and functions; `mask` is the signal mask it
/// starts with (null: as it is).
NOT_INSTRUMENTED void set_up_child(const SpawnOptions& options, pid_t parent, const sigset_t* mask) noexcept
{
    if (options.own_group) {
        setpgid(0, 0);
    }
    if (options.die_with_parent) {
        prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
        if (getppid() != parent) {
            _exit(137); // the parent died before the request took hold
        }
    }
    if (mask != nullptr) {
        sigprocmask(SIG_SETMASK, mask, nullptr);
    }
    if (options.directory != nullptr && chdir(options.directory) != 0) {
        _exit(126);
    }
    if (options.stdin_null) {
        const int null = open("/dev/null", O_RDONLY | O_CLOEXEC); // closed at exec, after dup2
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
        }
    }
}

[[noreturn]] NOT_INSTRUMENTED void exec_prepared(const Prepared& p, const SpawnOptions& options) noexcept
{
    if (options.env != nullptr) {
        execve(p.file.c_str(), p.args.data(), p.envp.data());
    } else {
        execvp(p.args[0], p.args.data());
    }
    if (options.exec_error.empty()) {
        _exit(127);
    }
    exit_after_failed_exec(options.exec_error, errno);
}

std::string cannot(const std::string& what, const char* step)
{
    return fmt::format("cannot run {}: {}: {}", what, step, std::strerror(errno));
}

} // namespace

namespace {

/// Every signal blocked in this thread while it lives, for a child that shares this process's
/// memory (start_sharing's, after_exit's middle process): no handler of this process's runs in
/// it. The mask it replaced comes back at the end, errno kept.
class SignalsBlocked {
public:
    SignalsBlocked() noexcept
    {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &m_before);
    }
    ~SignalsBlocked()
    {
        const int err = errno;
        pthread_sigmask(SIG_SETMASK, &m_before, nullptr);
        errno = err;
    }
    SignalsBlocked(const SignalsBlocked&) = delete;
    SignalsBlocked& operator=(const SignalsBlocked&) = delete;
    const sigset_t* before() const noexcept { return &m_before; }

private:
    sigset_t m_before{};
};

/// What a child started by start_sharing needs; it reads this in the parent's memory.
struct SharedStart {
    const Prepared* prepared = nullptr;
    const SpawnOptions* options = nullptr;
    pid_t parent = 0;
    const sigset_t* mask = nullptr; ///< the mask the program starts with
    int capture = -1; ///< the write end of the capture pipe, or -1
};

/// The child's side of start_sharing: it runs on its own stack in the parent's memory, so it makes
/// system calls only (no allocation, no locks) until it executes the program or exits.
NOT_INSTRUMENTED int run_shared_start(void* arg) noexcept
{
    const auto& s = *static_cast<const SharedStart*>(arg);
    const SpawnOptions& options = *s.options;
    // A handler of the parent's would run on the parent's memory: every caught signal goes back to
    // its default before signals are let in again (exec would reset them only then).
    for (int sig = 1; sig < NSIG; ++sig) {
        struct sigaction action = {};
        if (sig != SIGKILL && sig != SIGSTOP && sigaction(sig, nullptr, &action) == 0 && action.sa_handler != SIG_DFL &&
            action.sa_handler != SIG_IGN) {
            action = {};
            action.sa_handler = SIG_DFL;
            sigaction(sig, &action, nullptr);
        }
    }
    set_up_child(options, s.parent, s.mask);
    if (s.capture >= 0) {
        dup2(s.capture, STDOUT_FILENO);
        dup2(s.capture, STDERR_FILENO);
    } else if (options.output == SpawnOptions::Output::discard) {
        const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
    } else {
        if (options.stdout_fd >= 0) {
            dup2(options.stdout_fd, STDOUT_FILENO);
        }
        if (options.stderr_fd >= 0) {
            dup2(options.stderr_fd, STDERR_FILENO);
        }
    }
    exec_prepared(*s.prepared, options);
}

/// Starts a program as posix_spawn does: the child shares this process's memory, on a stack of
/// its own, while the calling thread waits until it has executed the program (or failed to), so
/// no page table is copied and no page is copied on write (fork's cost grows with the caller's
/// memory; this one does not). All signals are blocked around it, so none is handled in the child
/// on the parent's memory; the program starts with `options.mask`, else the caller's mask.
/// Returns the child's pid, or -1 with errno.
pid_t start_sharing(const Prepared& p, const SpawnOptions& options, pid_t parent, int capture)
{
    // The stack execvp and the child's frames use: execvp builds each PATH candidate on it.
    std::size_t stack_size = 64 * 1024 + p.file.size() + p.args.size() * sizeof(char*);
    if (const char* path = std::getenv("PATH"); path != nullptr) {
        stack_size += std::strlen(path) + p.argv.front().size();
    }
    std::vector<std::max_align_t> stack(stack_size / sizeof(std::max_align_t) + 1);
    const SignalsBlocked blocked;
    SharedStart start{&p, &options, parent, options.mask != nullptr ? options.mask : blocked.before(), capture};
    return clone(run_shared_start, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
}

} // namespace

Child spawn_program(const std::vector<std::string>& argv, const SpawnOptions& options)
{
    if (argv.empty()) {
        throw Error("cannot run a program: empty argv");
    }
    const Prepared p = prepare(argv, options);
    int fds[2] = {-1, -1};
    const bool capture = options.output == SpawnOptions::Output::capture;
    if (capture && pipe2(fds, O_CLOEXEC) != 0) {
        throw Error(cannot(argv[0], "pipe"));
    }
    const pid_t parent = getpid();
    // A daemon is started from a forked child (it forks again, which a child sharing this memory
    // must not); every other program the cheap way.
    const pid_t pid = options.detach ? fork() : start_sharing(p, options, parent, capture ? fds[1] : -1);
    if (pid < 0) {
        const std::string message = cannot(argv[0], "fork");
        if (capture) {
            close(fds[0]);
            close(fds[1]);
        }
        throw Error(message);
    }
    if (pid == 0) {
        set_up_child(options, parent, options.mask);
        if (fork() != 0) {
            _exit(0); // the daemon's first parent goes at once: it is nobody's child to wait for
        }
        const int null = open("/dev/null", O_RDWR);
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO); // standard error stays, for the daemon's own messages
        close_from(3, p.max_fd);
        exec_prepared(p, options);
    }
    if (options.own_group) {
        setpgid(pid, pid); // on both sides: whichever runs first, the group exists before either goes on
    }
    if (capture) {
        close(fds[1]);
    }
    if (options.detach) {
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) { }
        return Child();
    }
    return Child(pid, fds[0], options);
}

Child spawn_function(const std::function<std::string()>& body, SpawnOptions options)
{
    options.output = SpawnOptions::Output::capture;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        throw Error(cannot("a child", "pipe"));
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        const std::string message = cannot("a child", "fork");
        close(fds[0]);
        close(fds[1]);
        throw Error(message);
    }
    if (pid == 0) {
        close(fds[0]);
        set_up_child(options, parent, options.mask);
        // The child is a copy of a process that may have had threads: it does its one piece of
        // work and leaves with _exit, running no destructors or atexit handlers of the parent's.
        int code = 0;
        std::string text;
        try {
            text = body();
        } catch (const std::exception& e) {
            text = e.what();
            code = 3;
        } catch (...) {
            code = 3;
        }
        write_all(fds[1], text);
        _exit(code);
    }
    close(fds[1]);
    if (options.own_group) {
        setpgid(pid, pid);
    }
    return Child(pid, fds[0], options);
}

// --- Waiting -------------------------------------------------------------------------------------

bool ChildOutcome::exited(int code) const
{
    return reaped && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

bool ChildOutcome::signaled() const
{
    return reaped && WIFSIGNALED(status);
}

int ChildOutcome::exit_code() const
{
    if (!reaped) {
        return 128 + SIGKILL;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

namespace {

using Clock = std::chrono::steady_clock;

/// Reaps `pid`: at once when `until` is nullopt, else by polling until then. False when it has not
/// ended by then.
bool reap(pid_t pid, int& status, std::optional<Clock::time_point> until)
{
    auto pause = std::chrono::microseconds(200);
    while (true) {
        // Without a deadline waitpid blocks; with one it is asked, with pauses growing to 20 ms.
        const pid_t done = waitpid(pid, &status, until ? WNOHANG : 0);
        if (done == pid) {
            return true;
        }
        if (done < 0 && errno != EINTR) {
            status = 0; // reaped elsewhere: its status is lost
            return true;
        }
        if (done == 0) {
            const auto now = Clock::now();
            if (now >= *until) {
                return false;
            }
            usleep(static_cast<useconds_t>(std::min<long long>(
                pause.count(), std::chrono::duration_cast<std::chrono::microseconds>(*until - now).count())));
            pause = std::min(pause * 2, std::chrono::microseconds(20000));
        }
    }
}

} // namespace

std::vector<ChildOutcome> wait_for_children(std::vector<Child>& children,
    std::optional<std::chrono::milliseconds> timeout, std::chrono::milliseconds reap_grace)
{
    std::vector<ChildOutcome> outcomes(children.size());
    const Clock::time_point start = Clock::now();
    std::optional<Clock::time_point> deadline;
    if (timeout) {
        deadline = Clock::now() + *timeout;
    }
    // 1. Their output, until each closes it or the deadline.
    while (true) {
        std::vector<pollfd> fds;
        std::vector<std::size_t> owners;
        for (std::size_t i = 0; i < children.size(); ++i) {
            if (children[i].output_fd() >= 0) {
                fds.push_back({children[i].output_fd(), POLLIN, 0});
                owners.push_back(i);
            }
        }
        if (fds.empty()) {
            break;
        }
        int wait_ms = -1;
        if (deadline) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
            if (left.count() <= 0) {
                for (const std::size_t i : owners) {
                    outcomes[i].timed_out = true;
                    outcomes[i].elapsed = Clock::now() - start;
                    children[i].signal(SIGKILL);
                    children[i].close_output();
                }
                break;
            }
            wait_ms = static_cast<int>(std::min<long long>(left.count(), std::numeric_limits<int>::max()));
        }
        if (poll(fds.data(), fds.size(), wait_ms) < 0) {
            continue; // EINTR, or a poll failure: the deadline still ends the wait
        }
        for (std::size_t k = 0; k < fds.size(); ++k) {
            if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) != 0) {
                children[owners[k]].read_output();
                if (children[owners[k]].output_fd() < 0) {
                    outcomes[owners[k]].elapsed = Clock::now() - start;
                }
            }
        }
    }
    // 2. Their end. One that closed its output but goes on past the deadline is killed then; one
    // killed but stuck in the kernel (a wedged driver ioctl dies only when the call returns) is
    // given reap_grace and then left, rather than hang with it.
    for (std::size_t i = 0; i < children.size(); ++i) {
        ChildOutcome& outcome = outcomes[i];
        Child& child = children[i];
        if (child.pid() <= 0) {
            continue;
        }
        if (!outcome.timed_out) {
            outcome.reaped = reap(child.pid(), outcome.status, deadline);
            if (!outcome.reaped) {
                outcome.timed_out = true;
                child.signal(SIGKILL);
            }
        }
        if (!outcome.reaped) {
            outcome.reaped = reap(child.pid(), outcome.status, Clock::now() + reap_grace);
        }
        if (child.own_group()) {
            killpg(child.pid(), SIGKILL); // whatever it started and left behind
        }
        outcome.output = child.kept().take();
    }
    return outcomes;
}

namespace {

CommandResult run_captured(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
    const std::map<std::string, std::string>* env)
{
    SpawnOptions options;
    options.output = SpawnOptions::Output::capture;
    options.stdin_null = true;
    options.env = env;
    // In a group of its own, killed with it at the deadline and once it is reaped: a command that
    // hangs (`mpirun --version` on a broken install) leaves none of its children running.
    options.own_group = true;
    options.die_with_parent = true;
    std::vector<Child> children;
    children.push_back(spawn_program(argv, options));
    const ChildOutcome outcome = wait_for_children(children, timeout).front();
    CommandResult result;
    result.timed_out = outcome.timed_out;
    result.exit_code = outcome.exit_code();
    result.output = outcome.output;
    return result;
}

} // namespace

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout)
{
    return run_captured(argv, timeout, nullptr);
}

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
    const std::map<std::string, std::string>& env)
{
    return run_captured(argv, timeout, &env);
}

// --- Supervisor ----------------------------------------------------------------------------------

Supervisor::Supervisor()
{
    // With SIGCHLD ignored (inherited from some wrappers) the kernel reaps the child itself and
    // waitpid can never report it.
    ::signal(SIGCHLD, SIG_DFL);
    sigemptyset(&m_watched);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) {
        sigaddset(&m_watched, s);
    }
    sigprocmask(SIG_BLOCK, &m_watched, &m_previous);
    m_signals = signalfd(-1, &m_watched, SFD_CLOEXEC | SFD_NONBLOCK);
    if (m_signals < 0) {
        const int err = errno;
        sigprocmask(SIG_SETMASK, &m_previous, nullptr);
        throw Error(fmt::format("cannot watch signals (signalfd): {}", std::strerror(err)));
    }
}

Supervisor::~Supervisor()
{
    if (m_child.own_group() && m_child.pid() > 0) {
        killpg(m_child.pid(), SIGKILL); // anything the program left in its group belongs to it
    }
    close(m_signals);
    sigprocmask(SIG_SETMASK, &m_previous, nullptr);
}

void Supervisor::start(const std::vector<std::string>& argv, bool own_group, const std::string& exec_error,
    int stderr_fd, int stdout_fd, bool stdin_null)
{
    SpawnOptions options;
    options.own_group = own_group;
    // Killed with SIGKILL, the caller cannot pass anything on: the launcher gets SIGTERM from the
    // kernel instead, and stops what it started.
    options.die_with_parent = true;
    options.parent_death_signal = SIGTERM;
    options.mask = &m_previous;
    options.exec_error = exec_error;
    options.stderr_fd = stderr_fd;
    options.stdout_fd = stdout_fd;
    options.stdin_null = stdin_null;
    m_child = spawn_program(argv, options);
}

Supervisor::Event Supervisor::wait(std::chrono::nanoseconds timeout, int watch_fd, int watch_fd2)
{
    Event event;
    auto check_child = [&] {
        if (!started() || m_done) {
            return;
        }
        int status = 0;
        const pid_t done = waitpid(m_child.pid(), &status, WNOHANG);
        if (done == m_child.pid()) {
            m_done = true;
            event.exited = true;
            event.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        } else if (done < 0 && errno == ECHILD) {
            m_done = true; // reaped elsewhere: its status is lost
            event.exited = true;
        }
    };
    check_child();
    if (event.exited) {
        return event;
    }
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(std::max(timeout, std::chrono::nanoseconds(0)));
    std::array<pollfd, 3> fds{pollfd{m_signals, POLLIN, 0}, pollfd{watch_fd, POLLIN, 0}, pollfd{watch_fd2, POLLIN, 0}};
    // poll skips a negative descriptor.
    if (poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(ms.count(), 1 << 30))) > 0) {
        signalfd_siginfo info{};
        if (read(m_signals, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
            const auto sig = static_cast<int>(info.ssi_signo);
            if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
                event.signal = sig;
                event.from_terminal = info.ssi_code == SI_KERNEL;
            }
        }
        event.readable = fds[1].revents != 0 || fds[2].revents != 0;
    }
    check_child();
    return event;
}

void Supervisor::kill_now() const
{
    m_child.signal(SIGKILL);
}

namespace {

// What the deadline's handler says and does; set before alarm() and read only by the handler.
const char* volatile g_deadline_message = nullptr;
volatile int g_deadline_code = 1;
void (*volatile g_deadline_cleanup)() = nullptr;

extern "C" void call_deadline_passed(int /*signal*/)
{
    const char* message = g_deadline_message;
    if (message != nullptr) {
        [[maybe_unused]] auto n = write(STDERR_FILENO, message, std::strlen(message));
    }
    if (auto* cleanup = g_deadline_cleanup; cleanup != nullptr) {
        cleanup();
    }
    _exit(g_deadline_code);
}

} // namespace

CallDeadline::CallDeadline(unsigned seconds, const char* message, int exit_code, void (*cleanup)())
{
    g_deadline_message = message;
    g_deadline_code = exit_code;
    g_deadline_cleanup = cleanup;
    struct sigaction action { };
    action.sa_handler = call_deadline_passed;
    sigemptyset(&action.sa_mask);
    sigaction(SIGALRM, &action, &m_previous);
    sigset_t alarm_only;
    sigemptyset(&alarm_only);
    sigaddset(&alarm_only, SIGALRM);
    sigprocmask(SIG_UNBLOCK, &alarm_only, nullptr);
    alarm(seconds);
}

CallDeadline::~CallDeadline()
{
    alarm(0);
    sigaction(SIGALRM, &m_previous, nullptr);
}

bool remove_after_exit(const std::string& dir) noexcept
{
    return after_exit([&dir] { remove_private_dir(dir); }).get() >= 0;
}

void not_needed_after_exit(const UniqueFd& watcher) noexcept
{
    if (watcher.get() >= 0) {
        write_all(watcher.get(), "n");
    }
}

namespace {

/// The watcher of after_exit: waits until `watched` has ended (readable `pidfd`, else kill(pid, 0)
/// every second), then does `action` unless a byte in the `note` pipe says it is not needed.
[[noreturn]] void watch(pid_t watched, int pidfd, int note_read, const std::function<void()>& action) noexcept
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3 && null >= 0; ++fd) {
        dup2(null, fd);
    }
    // Nothing of the watched process's is held open (its output pipe would not end), but the pidfd
    // as 3 and the note's read end as 4 (dup3 clears close-on-exec; nothing is executed).
    const int note = fcntl(note_read, F_DUPFD, 5);
    if (pidfd >= 0) {
        dup2(pidfd, 3);
    } else {
        close(3);
    }
    dup2(note, 4);
    close_from(5, std::min(sysconf(_SC_OPEN_MAX), 65536L));
    if (pidfd >= 0) {
        pollfd p{3, POLLIN, 0};
        while (poll(&p, 1, -1) < 0 && errno == EINTR) { }
    } else {
        while (kill(watched, 0) == 0 || errno == EPERM) {
            sleep(1);
        }
    }
    char byte = 0;
    if (read(4, &byte, 1) == 1) {
        _exit(0); // the process did it itself
    }
    try {
        action();
    } catch (...) { // best effort: nothing to tell, and nobody to tell it to
    }
    _exit(0);
}

/// The watcher must be nobody's child (an orphan coming back to the caller, a subreaper, would
/// be taken for one of its own): a middle process makes it and exits at once. That process shares
/// the caller's memory and stack, as vfork's does, while the caller waits for its exit, so its
/// start and its exit copy and free no page table; only the watcher, made with fork, has memory of
/// its own (the caller's as it is now). Signals stay blocked until the middle process is gone; the
/// watcher lets them in again. Returns the middle process's pid (exit status 0 when the watcher
/// started), or -1.
pid_t start_watcher(pid_t watched, int pidfd, int note_read, const std::function<void()>& action) noexcept
{
    const SignalsBlocked blocked;
    const pid_t first = vfork(); // NOLINT(clang-analyzer-security.insecureAPI.vfork): see above
    if (first == 0) {
        // Nothing written here that the caller reads after; fork takes and gives back its locks.
        // A process group of its own (not a session: that would cost a scheduler group): what
        // signals the caller's group, or its terminal's foreground group, misses the watcher.
        setpgid(0, 0);
        const pid_t watcher = fork();
        if (watcher == 0) {
            watch(watched, pidfd, note_read, action);
        }
        _exit(watcher > 0 ? 0 : 1);
    }
    return first;
}

} // namespace

UniqueFd after_exit(const std::function<void()>& action) noexcept
{
    const pid_t watched = getpid();
    // Opened here, while `watched` surely lives: the watcher waits on it (readable once the
    // process has ended). Without pidfd_open (Linux < 5.3) it asks kill(pid, 0) every second.
    const UniqueFd owned(static_cast<int>(syscall(SYS_pidfd_open, watched, 0)));
    const int pidfd = owned.get();
    // The watcher reads this pipe once the process has ended: a byte in it says the action is
    // not needed. Only this process holds the write end (close-on-exec: no program it runs).
    int ends[2] = {-1, -1};
    if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) {
        return UniqueFd();
    }
    const UniqueFd note_read(ends[0]);
    UniqueFd note_write(ends[1]);
    const pid_t first = start_watcher(watched, pidfd, note_read.get(), action);
    if (first < 0) {
        return UniqueFd();
    }
    int status = 0;
    while (waitpid(first, &status, 0) < 0 && errno == EINTR) { }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return UniqueFd();
    }
    return note_write;
}

void write_all(int fd, std::string_view text) noexcept
{
    while (!text.empty()) {
        const ssize_t n = write(fd, text.data(), text.size());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return; // a reader that went away loses the rest
        }
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

ReaderPipe make_reader_pipe(const char* what)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
        throw Error(fmt::format("cannot make a pipe for {}: {}", what, std::strerror(errno)));
    }
    return ReaderPipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
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

} // namespace base
