#include "launcher/job_process.hpp"

#include "probes/process.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

namespace launcher {

int run_job(const std::vector<std::string>& argv, double grace_seconds, const std::function<void()>& tick)
{
    probes::Supervisor job;
    // With a terminal, the launcher stays in our process group so it can read stdin and gets the
    // terminal's Ctrl-C itself; otherwise it gets a group of its own and only what we forward.
    const bool own_group = isatty(STDIN_FILENO) == 0;
    job.start(argv, own_group, fmt::format("gpurun: cannot run {}: ", argv[0]));

    int received = 0;
    bool killed = false;
    auto deadline = std::chrono::steady_clock::time_point::max();
    int exit_code = 0;
    while (true) {
        const auto event = job.wait(std::chrono::milliseconds(200));
        const auto now = std::chrono::steady_clock::now();
        if (event.signal != 0) {
            if (received == 0) {
                received = event.signal;
                // A terminal's Ctrl-C already reached a launcher in our group: do not send it twice.
                if (!(event.from_terminal && !own_group)) {
                    job.child().signal(event.signal);
                }
                deadline = now +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(std::min(grace_seconds, 1e6)));
                fmt::print(stderr, "gpurun: {} received, stopping the job ({}s grace; again to kill now)\n",
                    strsignal(event.signal), grace_seconds);
            } else if (!killed) {
                deadline = now;
            }
        }
        if (event.exited) {
            exit_code = event.exit_code;
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
    return received != 0 ? 128 + received : exit_code;
}

} // namespace launcher
