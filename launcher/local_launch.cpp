#include "launcher/local_launch.hpp"

#include "base/error.hpp"
#include "base/process.hpp"
#include "base/python.hpp"
#include "launcher/binding_plan.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <sys/wait.h>
#include <unistd.h>

namespace launcher {

namespace {

using Clock = std::chrono::steady_clock;
using base::Error;

struct LocalJob {
    unsigned ranks = 0;
    double grace_seconds = 10.0;
    std::vector<std::string> command;
};

LocalJob parse(const std::vector<std::string>& args)
{
    LocalJob job;
    auto number = [](const std::string& text, auto& value) {
        auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
    };
    if (args.empty() || !number(args[0], job.ranks) || job.ranks == 0 || job.ranks > max_job_ranks) {
        throw Error(fmt::format("{} needs a number of ranks from 1 to {}", local_launch_flag, max_job_ranks));
    }
    std::size_t i = 1;
    if (i + 1 < args.size() && args[i] == "--grace") {
        if (!number(args[i + 1], job.grace_seconds) || !(job.grace_seconds >= 0 && job.grace_seconds <= 86400)) {
            throw Error(fmt::format("--grace {}: expected seconds from 0 to 86400", args[i + 1]));
        }
        i += 2;
    }
    if (i >= args.size() || args[i] != "--" || i + 1 >= args.size()) {
        throw Error(fmt::format(
            "{} N [--grace S] -- COMMAND: no command; gpurun-rank is started by gpurun", local_launch_flag));
    }
    job.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
    return job;
}

} // namespace

int run_local_launch(const std::vector<std::string>& args)
{
    const LocalJob job = parse(args);
    sigset_t watched;
    sigemptyset(&watched);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) {
        sigaddset(&watched, s);
    }
    sigset_t previous;
    sigprocmask(SIG_BLOCK, &watched, &previous);

    std::map<std::string, std::string> env = base::environment();
    env["GPURUN_LAUNCH_SIZE"] = env["GPURUN_LAUNCH_LOCAL_SIZE"] = std::to_string(job.ranks);
    std::vector<pid_t> live;
    std::vector<base::Child> children;
    for (unsigned rank = 0; rank < job.ranks; ++rank) {
        env["GPURUN_LAUNCH_RANK"] = env["GPURUN_LAUNCH_LOCAL_RANK"] = std::to_string(rank);
        base::SpawnOptions options;
        options.env = &env;
        options.mask = &previous;
        options.die_with_parent = true;
        options.parent_death_signal = SIGTERM; // the helper stops its rank
        options.exec_error = fmt::format("gpurun-rank: cannot run '{}': ", job.command[0]);
        children.push_back(base::spawn_program(job.command, options));
        live.push_back(children.back().pid());
    }

    auto signal_live = [&](int sig) {
        for (pid_t p : live) {
            kill(p, sig);
        }
    };
    const auto grace =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(job.grace_seconds, 1e6)));
    auto kill_at = Clock::time_point::max();
    int received = 0;
    int first_failure = 0;
    while (!live.empty()) {
        const timespec wait{0, 100'000'000};
        siginfo_t info{};
        const int sig = sigtimedwait(&watched, &info, &wait);
        const auto now = Clock::now();
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            if (received == 0 && first_failure == 0) {
                received = sig;
                // A terminal's Ctrl-C reached the helpers in this process group already.
                if (info.si_code != SI_KERNEL) {
                    signal_live(sig);
                }
                kill_at = now + grace;
            } else {
                kill_at = now;
            }
        }
        int status = 0;
        pid_t done = 0;
        while ((done = waitpid(-1, &status, WNOHANG)) > 0) {
            const auto it = std::find(live.begin(), live.end(), done);
            if (it == live.end()) {
                continue;
            }
            const auto rank = static_cast<unsigned>(
                std::find_if(children.begin(), children.end(), [&](const base::Child& c) { return c.pid() == done; }) -
                children.begin());
            live.erase(it);
            const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            if (code != 0 && received == 0 && first_failure == 0) {
                first_failure = code;
                if (!live.empty()) {
                    fmt::print(stderr, "gpurun: rank {} failed first (status {}); stopping the other {} rank{}\n", rank,
                        code, live.size(), live.size() == 1 ? "" : "s");
                    signal_live(SIGTERM);
                    kill_at = now + grace;
                }
            }
        }
        if (now >= kill_at) {
            signal_live(SIGKILL);
        }
    }
    return received != 0 ? 128 + received : first_failure;
}

} // namespace launcher
