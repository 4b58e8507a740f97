#include "doctor/runner.hpp"

#include "probes/error.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace doctor {

namespace {

struct Child {
    const Collector* collector = nullptr;
    pid_t pid = -1;
    int fd = -1;
    std::string output;
    bool timed_out = false;
};

[[noreturn]] void run_child(const Collector& collector, const CollectContext& ctx, int fd)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::string text;
    try {
        text = collector.collect(ctx).dump();
    } catch (const std::exception& e) {
        text = nlohmann::json{{"error", e.what()}}.dump();
    }
    const char* p = text.data();
    std::size_t left = text.size();
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        p += n;
        left -= static_cast<std::size_t>(n);
    }
    _exit(0);
}

std::string seconds_text(std::chrono::milliseconds t)
{
    return t.count() % 1000 == 0 ? fmt::format("{} s", t.count() / 1000) : fmt::format("{:.1f} s", t.count() / 1000.0);
}

} // namespace

const char* to_string(Severity severity)
{
    switch (severity) {
    case Severity::pass:
        return "pass";
    case Severity::warn:
        return "warn";
    case Severity::fail:
        return "fail";
    case Severity::skip:
        return "skip";
    case Severity::error:
        return "error";
    }
    return "?";
}

namespace {

/// Runs `collectors` at once, each in its own child with `timeout` as the deadline, into `facts`.
void collect_group(const std::vector<const Collector*>& collectors, const CollectContext& ctx,
    std::chrono::milliseconds timeout, Facts& facts)
{
    std::vector<Child> children;
    for (const Collector* c : collectors) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            facts[c->name] = {{"error", fmt::format("pipe: {}", std::strerror(errno))}};
            continue;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            run_child(*c, ctx, fds[1]);
        }
        close(fds[1]);
        if (pid < 0) {
            close(fds[0]);
            facts[c->name] = {{"error", fmt::format("fork: {}", std::strerror(errno))}};
            continue;
        }
        setpgid(pid, pid);
        children.push_back(Child{c, pid, fds[0], {}, false});
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[65536];
    while (true) {
        std::vector<pollfd> fds;
        std::vector<Child*> owners;
        for (auto& child : children) {
            if (child.fd >= 0) {
                fds.push_back({child.fd, POLLIN, 0});
                owners.push_back(&child);
            }
        }
        if (fds.empty()) {
            break;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            for (Child* child : owners) {
                child->timed_out = true;
                killpg(child->pid, SIGKILL);
                kill(child->pid, SIGKILL);
                close(child->fd);
                child->fd = -1;
            }
            break;
        }
        if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0) {
            continue; // EINTR, or a poll failure: the deadline still ends the wait
        }
        for (std::size_t i = 0; i < fds.size(); ++i) {
            if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
                continue;
            }
            ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
            if (n > 0) {
                owners[i]->output.append(buffer, static_cast<std::size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                close(owners[i]->fd);
                owners[i]->fd = -1;
            }
        }
    }
    for (auto& child : children) {
        int status = 0;
        bool reaped = false;
        if (child.timed_out) {
            // SIGKILLed, but a child stuck in the kernel (a wedged driver ioctl) only dies when the
            // call returns: wait a little, then leave it rather than hang with it.
            for (int i = 0; i < 100 && !reaped; ++i) {
                reaped = waitpid(child.pid, &status, WNOHANG) == child.pid;
                if (!reaped) {
                    usleep(20000);
                }
            }
        } else {
            while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) { }
            reaped = true;
        }
        killpg(child.pid, SIGKILL); // whatever the collector started and left behind
        const std::string& name = child.collector->name;
        if (child.timed_out && !reaped) {
            facts[name] = {{"error",
                fmt::format("timed out after {}, and stuck in the kernel (uninterruptible): "
                            "the driver is likely wedged",
                    seconds_text(timeout))}};
        } else if (child.timed_out) {
            facts[name] = {{"error", fmt::format("timed out after {}", seconds_text(timeout))}};
        } else if (WIFSIGNALED(status)) {
            facts[name] = {{"error", fmt::format("crashed ({})", strsignal(WTERMSIG(status)))}};
        } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
            facts[name] = {{"error", fmt::format("exited with status {}", WEXITSTATUS(status))}};
        } else {
            try {
                facts[name] = nlohmann::json::parse(child.output);
            } catch (const nlohmann::json::exception&) {
                facts[name] = {{"error", "returned facts that are not JSON"}};
            }
        }
    }
}

} // namespace

Facts collect(const std::vector<const Collector*>& collectors, const CollectContext& ctx)
{
    Facts facts = nlohmann::json::object();
    std::vector<const Collector*> quick;
    std::vector<const Collector*> deep;
    for (const Collector* c : collectors) {
        (c->deep ? deep : quick).push_back(c);
    }
    collect_group(quick, ctx, ctx.timeout, facts);
    for (const Collector* c : deep) {
        progress_line(ctx, fmt::format("{}: starting", c->name));
        collect_group({c}, ctx, ctx.deep_timeout, facts);
    }
    if (!deep.empty() && ctx.progress) {
        fmt::print(stderr, "\r\033[K");
        std::fflush(stderr);
    }
    return facts;
}

std::vector<const Collector*> collectors_for(const std::vector<const Probe*>& probes)
{
    std::vector<const Collector*> out;
    for (const auto& c : collector_table()) {
        // "host" names the node in every report and snapshot.
        bool needed = c.name == "host" || std::any_of(probes.begin(), probes.end(), [&](const Probe* p) {
            return std::find(p->collectors.begin(), p->collectors.end(), c.name) != p->collectors.end();
        });
        if (needed) {
            out.push_back(&c);
        }
    }
    return out;
}

std::vector<ProbeResult> judge(
    const std::vector<const Probe*>& probes, const Facts& facts, const Policy& policy, const std::string& snapshot)
{
    std::vector<ProbeResult> results;
    for (const Probe* p : probes) {
        ProbeResult r{p, {}};
        std::string missing;
        std::string broken;
        for (const auto& c : p->collectors) {
            if (collector_facts(facts, c) == nullptr && missing.empty()) {
                missing = c;
            }
            std::string error = collector_error(facts, c);
            if (!error.empty() && broken.empty()) {
                broken = fmt::format("collecting {}: {}", c, error);
            }
        }
        if (!broken.empty()) {
            r.findings.push_back({p->name + ".error", Severity::error, "host",
                fmt::format("the {} probe could not run: {}", p->name, broken),
                fmt::format("the driver or library it calls may be hung or broken; run again with a longer {}, "
                            "and check dmesg and nvidia-smi",
                    p->deep ? "--deep-timeout" : "--timeout"),
                nullptr});
        } else if (!missing.empty()) {
            r.findings.push_back({p->name + ".skip", Severity::skip, "host",
                fmt::format("not checked: the facts have no '{}' section", missing), "", nullptr});
        } else {
            try {
                r.findings = p->judge(facts, policy);
            } catch (const nlohmann::json::exception& e) {
                if (!snapshot.empty()) {
                    throw probes::Error(fmt::format("{}: the {} facts are not as gpudoctor snapshot writes them ({}); "
                                                    "write the snapshot again with 'gpudoctor snapshot > node.json'",
                        snapshot, p->name, e.what()));
                }
                r.findings.push_back({p->name + ".error", Severity::error, "host",
                    fmt::format("the {} rule broke on these facts: {}", p->name, e.what()),
                    "report this with the output of 'gpudoctor snapshot'", nullptr});
            } catch (const std::exception& e) {
                r.findings.push_back({p->name + ".error", Severity::error, "host",
                    fmt::format("the {} rule broke on these facts: {}", p->name, e.what()),
                    "report this with the output of 'gpudoctor snapshot'", nullptr});
            }
            if (r.findings.empty()) {
                r.findings.push_back({p->name + ".error", Severity::error, "host",
                    fmt::format("the {} rule returned no finding", p->name),
                    "report this with the output of 'gpudoctor snapshot'", nullptr});
            }
        }
        results.push_back(std::move(r));
    }
    return results;
}

int exit_code(const std::vector<ProbeResult>& results, bool strict)
{
    int code = 0;
    for (const auto& r : results) {
        for (const auto& f : r.findings) {
            if (f.severity == Severity::fail || f.severity == Severity::error ||
                (strict && f.severity == Severity::warn)) {
                code = 1;
            }
        }
    }
    return code;
}

} // namespace doctor
