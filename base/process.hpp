#pragma once

#include "base/unique_fd.hpp"

// The one place gpukit starts processes. Every child, whether it runs a program (mpirun, python3,
// ompi_info, a fit trial, the launcher of a job) or a function of ours that must not take the tool
// down with it (a GPU library call, hwloc on a malformed file, a probe's collector), is made here,
// with the same rules: argv only (never a shell), descriptors not inherited, signals restored,
// output kept within bounds, deadlines that end in SIGKILL, and a child stuck in the kernel left
// behind rather than waited for.

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace base {

/// Output kept from a command that may print without end: the first `head` bytes and the last
/// `tail` bytes, with "[... N bytes of output left out ...]" on a line of its own between them
/// when anything was dropped. The end matters as much as the start: a training run's out-of-memory
/// error comes last, after whatever it printed before.
class KeptOutput {
public:
    explicit KeptOutput(std::size_t head = 8U << 20, std::size_t tail = 8U << 20)
        : m_head_limit(head), m_tail_limit(tail)
    {
    }
    void append(const char* data, std::size_t size);
    /// Everything kept, in order; the object is left empty.
    std::string take();

private:
    std::size_t m_head_limit;
    std::size_t m_tail_limit;
    std::string m_head;
    std::string m_tail; ///< up to twice m_tail_limit between trims
    std::uint64_t m_dropped = 0;
};

/// How a child is set up between fork and its work.
struct SpawnOptions {
    /// Standard output and error: the caller's, a pipe the parent reads (both into one), or /dev/null.
    enum class Output { inherit, capture, discard };
    Output output = Output::inherit;
    bool stdin_null = false; ///< standard input from /dev/null
    /// A process group of its own (set on both sides of fork, so the parent can signal the group
    /// at once): what the child starts can be killed with it.
    bool own_group = false;
    bool die_with_parent = false; ///< `parent_death_signal` when the parent dies (PR_SET_PDEATHSIG)
    int parent_death_signal = SIGKILL; ///< SIGTERM lets a launcher stop what it started
    /// With Output::inherit: descriptors the child gets as standard output and error instead of
    /// the caller's (-1 keeps them), such as pipes the caller reads.
    int stdout_fd = -1;
    int stderr_fd = -1;
    /// Started twice removed, with no parent to wait for it (a daemon that outlives the caller's
    /// exec): standard streams on /dev/null, every other descriptor closed. Needs a program.
    bool detach = false;
    /// The signal mask the child starts with; null keeps the caller's.
    const sigset_t* mask = nullptr;
    /// For a program: exactly this environment, argv[0] looked up in its PATH; null: the caller's
    /// environment and a PATH search (execvp).
    const std::map<std::string, std::string>* env = nullptr;
    /// The child's working directory; null: the caller's. Probes run from "/", so that nothing in
    /// the directory gpudoctor was started from (a library an empty LD_LIBRARY_PATH entry finds, a
    /// pyenv .python-version) is read by them.
    const char* directory = nullptr;
    /// Printed before strerror when the program cannot be executed (exit status 127).
    std::string exec_error;
    /// Output kept when captured (see KeptOutput).
    std::size_t keep_head = 8U << 20;
    std::size_t keep_tail = 8U << 20;
};

/// A started child. Moveable; the destructor closes the output pipe but neither kills nor reaps.
class Child {
public:
    Child() = default;
    Child(pid_t pid, int output_fd, const SpawnOptions& options);
    Child(Child&& other) noexcept;
    Child& operator=(Child&& other) noexcept;
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    ~Child();

    pid_t pid() const { return m_pid; }
    bool own_group() const { return m_own_group; }
    /// Sends `signal` to the child, and to its group when it has one.
    void signal(int signal) const;

    // Used by wait_for_children.
    int output_fd() const { return m_fd; }
    void read_output();
    void close_output();
    KeptOutput& kept() { return m_kept; }

private:
    pid_t m_pid = -1;
    int m_fd = -1;
    bool m_own_group = false;
    KeptOutput m_kept;
};

/// Starts argv[0] with argv. Throws base::Error when the child cannot be made (pipe, fork); a
/// program that cannot be executed ends with status 127 after printing options.exec_error and why.
Child spawn_program(const std::vector<std::string>& argv, const SpawnOptions& options);

/// Runs `body` in a forked child and sends what it returns to the parent through the output pipe
/// (options.output is taken as capture). The child exits 0, or 3 after writing the message of an
/// exception that `body` threw. Use it for a call that may hang or crash in somebody else's code.
Child spawn_function(const std::function<std::string()>& body, SpawnOptions options);

/// How a waited-for child ended.
struct ChildOutcome {
    std::string output; ///< what it wrote, when captured
    bool timed_out = false; ///< killed at the deadline
    bool reaped = false; ///< false: killed, but still in the kernel (a wedged driver call)
    int status = 0; ///< the raw wait status, when reaped
    /// From the start of the wait until the child closed its output (or the deadline): how long
    /// it worked, for children started just before the wait.
    std::chrono::duration<double> elapsed{0};

    bool exited(int code) const;
    bool signaled() const;
    /// The exit status to hand on: the exit code, or 128+N for signal N.
    int exit_code() const;
};

/// Reads the children's output until they close it, then reaps them. At `timeout` (none: no
/// deadline) the children still writing are SIGKILLed (with their groups), given `reap_grace` to
/// die, and then left. A child with a group has the group killed once it is reaped: whatever it
/// started and left behind goes with it.
std::vector<ChildOutcome> wait_for_children(std::vector<Child>& children,
    std::optional<std::chrono::milliseconds> timeout, std::chrono::milliseconds reap_grace = std::chrono::seconds(2));

/// What an external command did.
struct CommandResult {
    int exit_code = -1; ///< exit status, or 128+signal
    bool timed_out = false;
    /// stdout and stderr together: all of it up to 16 MiB; past that the first and the last 8 MiB
    /// around a line that says how many bytes were left out (see KeptOutput).
    std::string output;
};

/// Runs argv[0] (searched in PATH) with argv, never through a shell, with a deadline after which
/// it is killed; stdin is /dev/null. It runs in a process group of its own, which is killed at the
/// deadline and after it ends, so nothing it started outlives it; it dies with this process.
/// Throws base::Error when it cannot be started.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

/// The same, but the child gets exactly `env` as its environment instead of this process's, and
/// argv[0] is searched in env's PATH: a collector runs a command in the environment snapshot it
/// was given (doctor::engine::CollectContext::env), not in whatever gpudoctor itself inherited.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
    const std::map<std::string, std::string>& env);

/// A program run in the foreground while this process watches SIGINT, SIGTERM and SIGHUP for it:
/// the launcher of a job (gpurun), the command under `gpudoctor monitor`. Made before the child,
/// it blocks those signals (and SIGCHLD) so none is lost; they are delivered through wait().
/// The destructor restores the signal mask and, when the child had a group of its own, kills what
/// is left in it.
class Supervisor {
public:
    Supervisor();
    ~Supervisor();
    Supervisor(const Supervisor&) = delete;
    Supervisor& operator=(const Supervisor&) = delete;

    /// Starts the program with the signal mask the caller had; it gets SIGTERM if the caller dies
    /// (even by SIGKILL). Throws base::Error as spawn_program.
    /// `stderr_fd` and `stdout_fd`, when not -1, become its standard error and output (pipes the
    /// caller reads; one pipe for both keeps their order); `stdin_null`: standard input from
    /// /dev/null (a program that reads the terminal's must not get it).
    void start(const std::vector<std::string>& argv, bool own_group, const std::string& exec_error, int stderr_fd = -1,
        int stdout_fd = -1, bool stdin_null = false);
    bool started() const { return m_child.pid() > 0; }
    const Child& child() const { return m_child; }

    struct Event {
        int signal = 0; ///< SIGINT, SIGTERM or SIGHUP received; 0 for none
        /// The signal came from the terminal driver (Ctrl-C): a child in our process group got
        /// it too and must not get it twice.
        bool from_terminal = false;
        bool exited = false; ///< the child ended (or was reaped elsewhere: status 0)
        int exit_code = 0; ///< its exit code, or 128+N for signal N
        bool readable = false; ///< a watched descriptor has something to read (or was closed)
    };
    /// Waits up to `timeout` for a watched signal, the child's end or something to read from
    /// `watch_fd` or `watch_fd2` (-1: none), whichever comes first.
    Event wait(std::chrono::nanoseconds timeout, int watch_fd = -1, int watch_fd2 = -1);
    /// SIGKILL to the child and its group.
    void kill_now() const;

private:
    sigset_t m_watched{};
    sigset_t m_previous{};
    int m_signals = -1; ///< a signalfd for m_watched
    Child m_child;
    bool m_done = false;
};

/// The first executable `name` in the PATH-style list `path`; a name with a '/' is checked as is.
std::optional<std::string> find_executable(const std::string& name, const char* path);

/// For a child whose exec failed: writes `message` (made before fork), strerror(`err`) and a newline
/// to standard error with write(2) only, since after fork a threaded parent's heap and stdio locks
/// may be held, then _exit(127).
[[noreturn]] void exit_after_failed_exec(const std::string& message, int err) noexcept;

/// A deadline on a call into somebody else's library that has to run in this process (NVML
/// sampling uses handles this process holds, so it cannot move to a child): when the scope is not
/// left within `seconds`, SIGALRM writes `message` (a string literal) to standard error, runs
/// `cleanup` (async-signal-safe; may be null) and ends the process with `exit_code`. One at a time.
class CallDeadline {
public:
    CallDeadline(unsigned seconds, const char* message, int exit_code, void (*cleanup)() = nullptr);
    ~CallDeadline();
    CallDeadline(const CallDeadline&) = delete;
    CallDeadline& operator=(const CallDeadline&) = delete;

private:
    struct sigaction m_previous { };
};

/// Starts a watcher, twice removed and in a process group of its own (so a signal to this process's
/// group or terminal does not reach it), that removes `dir` once this process has ended, however
/// it ended (`kill -9` too), when `dir` is still a directory of this user's with mode 0700 (as
/// mkdtemp makes it). It holds no descriptor of this process's but a pidfd. Best effort: returns
/// false when it could not be started; the caller removes `dir` itself on the ordinary way out.
bool remove_after_exit(const std::string& dir) noexcept;

/// Writes all of `text` to `fd` (again after EINTR); a reader that went away loses the rest.
void write_all(int fd, std::string_view text) noexcept;

/// A pipe (both ends close-on-exec) whose read end does not block, for output this process reads
/// from a child while it waits for other things.
struct ReaderPipe {
    UniqueFd read;
    UniqueFd write;
};
/// Throws base::Error "cannot make a pipe for `what`: ...".
ReaderPipe make_reader_pipe(const char* what);

/// The watcher of remove_after_exit, doing `action` instead (in the watcher: this process's
/// memory as it was at the call, no threads, standard streams on /dev/null). Call it while this
/// process has one thread only. Returns the descriptor (close-on-exec) through which this process
/// may tell the watcher, with not_needed_after_exit, that it did what `action` does on its own way
/// out: the watcher then ends without it. Invalid when the watcher could not be started.
UniqueFd after_exit(const std::function<void()>& action) noexcept;

/// Tells the watcher of `after_exit` that its action is not needed (best effort: the watcher
/// then does it anyway). Call it last, when nothing can be left for the action to do.
void not_needed_after_exit(const UniqueFd& watcher) noexcept;

/// For a program's main, last: flushes standard output. When it could not be written (a full disk,
/// /dev/full, an output file's quota) says so on standard error as "PROGRAM: cannot write the
/// output: REASON" and returns 3 (the program could not do its work); else returns `status`.
int exit_status_after_output(int status, const char* program) noexcept;

/// How a process ended, as failure reports say it: "exit status 3", "signal 9 (Killed)",
/// "signal 11 (Segmentation fault), core dumped"; `wait_status` as waitpid() gives it.
std::string ending_words(int wait_status);

} // namespace base
