#include "launcher/job_process.hpp"

#include "probes/command.hpp"
#include "probes/error.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

namespace launcher {

int run_job(const std::vector<std::string>& argv, double grace_seconds, const std::function<void()>& tick)
{
    // With SIGCHLD ignored (inherited from some wrappers) the kernel reaps the launcher itself and
    // waitpid can never report it.
    signal(SIGCHLD, SIG_DFL);
    sigset_t watched;
    sigemptyset(&watched);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) {
        sigaddset(&watched, s);
    }
    sigset_t previous;
    sigprocmask(SIG_BLOCK, &watched, &previous);

    // With a terminal, the launcher stays in our process group so it can read stdin and gets the
    // terminal's Ctrl-C itself; otherwise it gets a group of its own and only what we forward.
    const bool own_group = isatty(STDIN_FILENO) == 0;
    std::vector<char*> args;
    for (const auto& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    const std::string cannot_run = fmt::format("gpurun: cannot run {}: ", argv[0]);
    pid_t pid = fork();
    if (pid < 0) {
        int err = errno;
        sigprocmask(SIG_SETMASK, &previous, nullptr);
        throw probes::Error(fmt::format("cannot start {}: fork: {}", argv[0], std::strerror(err)));
    }
    if (pid == 0) {
        if (own_group) {
            setpgid(0, 0);
        }
        sigprocmask(SIG_SETMASK, &previous, nullptr);
        execvp(args[0], args.data());
        probes::exit_after_failed_exec(cannot_run, errno);
    }
    if (own_group) {
        setpgid(pid, pid);
    }

    int received = 0;
    bool killed = false;
    auto deadline = std::chrono::steady_clock::time_point::max();
    int status = 0;
    while (true) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) {
            break;
        }
        if (done < 0 && errno == ECHILD) {
            status = 0; // reaped elsewhere: its status is lost
            break;
        }
        timespec wait{0, 200 * 1000 * 1000};
        siginfo_t info{};
        int sig = sigtimedwait(&watched, &info, &wait);
        const auto now = std::chrono::steady_clock::now();
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            if (received == 0) {
                received = sig;
                // A terminal's Ctrl-C already reached a launcher in our group: do not send it twice.
                bool from_terminal = info.si_code == SI_KERNEL && !own_group;
                if (!from_terminal) {
                    kill(pid, sig);
                }
                deadline = now +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(std::min(grace_seconds, 1e6)));
                fmt::print(stderr, "gpurun: {} received, stopping the job ({}s grace; again to kill now)\n",
                    strsignal(sig), grace_seconds);
            } else if (!killed) {
                deadline = now;
            }
        }
        if (!killed && now >= deadline) {
            killed = true;
            fmt::print(stderr, "gpurun: the job did not stop in time; killing it\n");
            if (own_group) {
                killpg(pid, SIGKILL);
            }
            kill(pid, SIGKILL);
        }
        if (tick) {
            tick();
        }
    }
    if (own_group) {
        // Anything the launcher left in its group belongs to the job.
        killpg(pid, SIGKILL);
    }
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    if (received != 0) {
        return 128 + received;
    }
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    return 128 + WTERMSIG(status);
}

} // namespace launcher
