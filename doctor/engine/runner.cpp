#include "doctor/engine/runner.hpp"

#include "base/error.hpp"
#include "base/process.hpp"
#include "doctor/engine/report.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <sys/wait.h>

namespace doctor::engine {

namespace {

std::string seconds_text(std::chrono::milliseconds t)
{
    return t.count() % 1000 == 0 ? fmt::format("{} s", t.count() / 1000) : fmt::format("{:.1f} s", t.count() / 1000.0);
}

} // namespace

namespace {

/// Runs `collectors` at once, each in its own child (and process group) with `timeout` as the
/// deadline, into `facts`.
void collect_group(const std::vector<const Collector*>& collectors, const CollectContext& ctx,
    std::chrono::milliseconds timeout, Facts& facts, std::map<std::string, double>* seconds)
{
    base::SpawnOptions options;
    options.own_group = true;
    options.die_with_parent = true;
    options.keep_head = std::size_t{1} << 40; // facts are JSON: all of it, or it does not parse
    options.directory = "/"; // nothing of the caller's directory is read (see SpawnOptions)
    std::vector<base::Child> children;
    std::vector<const Collector*> started;
    for (const Collector* c : collectors) {
        try {
            children.push_back(base::spawn_function(
                [&] {
                    try {
                        return c->collect(ctx).dump();
                    } catch (const std::exception& e) {
                        return nlohmann::json{{"error", e.what()}}.dump();
                    }
                },
                options));
            started.push_back(c);
        } catch (const base::Error& e) {
            facts[c->name] = {{"error", e.what()}};
        }
    }
    const auto outcomes = base::wait_for_children(children, timeout);
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
        const base::ChildOutcome& outcome = outcomes[i];
        const std::string& name = started[i]->name;
        if (seconds != nullptr) {
            (*seconds)[name] = outcome.elapsed.count();
        }
        if (outcome.timed_out && !outcome.reaped) {
            facts[name] = {{"error",
                fmt::format("timed out after {}, and stuck in the kernel (uninterruptible): "
                            "the driver is likely wedged",
                    seconds_text(timeout))}};
        } else if (outcome.timed_out) {
            facts[name] = {{"error", fmt::format("timed out after {}", seconds_text(timeout))}};
        } else if (outcome.signaled()) {
            facts[name] = {{"error", fmt::format("crashed ({})", strsignal(WTERMSIG(outcome.status)))}};
        } else if (!outcome.exited(0)) {
            facts[name] = {{"error", fmt::format("exited with status {}", outcome.exit_code())}};
        } else {
            try {
                facts[name] = nlohmann::json::parse(outcome.output);
            } catch (const nlohmann::json::exception&) {
                facts[name] = {{"error", "returned facts that are not JSON"}};
            }
        }
    }
}

} // namespace

Facts collect(
    const std::vector<const Collector*>& collectors, const CollectContext& ctx, std::map<std::string, double>* seconds)
{
    Facts facts = nlohmann::json::object();
    std::vector<const Collector*> quick;
    std::vector<const Collector*> deep;
    for (const Collector* c : collectors) {
        (c->deep ? deep : quick).push_back(c);
    }
    collect_group(quick, ctx, ctx.timeout, facts, seconds);
    for (const Collector* c : deep) {
        progress_line(ctx, fmt::format("{}: starting", c->name));
        collect_group({c}, ctx, ctx.deep_timeout, facts, seconds);
    }
    if (!deep.empty() && ctx.progress) {
        fmt::print(stderr, "\r\033[K");
        std::fflush(stderr);
    }
    return facts;
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
            } catch (const std::exception& e) {
                // A fact that is missing or of another type than its collector writes.
                if (!snapshot.empty()) {
                    throw base::Error(fmt::format("{}: the {} facts are not as gpudoctor snapshot writes them ({}); "
                                                  "write the snapshot again with 'gpudoctor snapshot > node.json'",
                        snapshot, p->name, e.what()));
                }
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
            if (is_failing(f, strict)) {
                code = 1;
            }
        }
    }
    return code;
}

void progress_line(const CollectContext& ctx, const std::string& text)
{
    if (ctx.progress) {
        fmt::print(stderr, "\r\033[Kgpudoctor: {}", text);
        std::fflush(stderr);
    }
}

const char* CollectContext::getenv(const std::string& name) const
{
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
}

} // namespace doctor::engine
