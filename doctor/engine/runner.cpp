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

/// A collector's output as its facts: JSON of the shape its struct reads, else the collector broke.
void add_output(Facts& facts, const std::string& name, const std::string& output)
{
    nlohmann::json parsed;
    try {
        parsed = nlohmann::json::parse(output);
    } catch (const nlohmann::json::exception&) {
        facts.add_error(name, "returned facts that are not JSON");
        return;
    }
    try {
        facts.add(name, parsed, "the collector's output");
    } catch (const base::Error& e) {
        facts.add_error(name, fmt::format("returned facts its rules cannot read: {}", e.what()));
    }
}

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
            facts.add_error(c->name, e.what());
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
            facts.add_error(name,
                fmt::format("timed out after {}, and stuck in the kernel (uninterruptible): "
                            "the driver is likely wedged",
                    seconds_text(timeout)));
        } else if (outcome.timed_out) {
            facts.add_error(name, fmt::format("timed out after {}", seconds_text(timeout)));
        } else if (outcome.signaled()) {
            facts.add_error(name, fmt::format("crashed ({})", strsignal(WTERMSIG(outcome.status))));
        } else if (!outcome.exited(0)) {
            facts.add_error(name, fmt::format("exited with status {}", outcome.exit_code()));
        } else {
            add_output(facts, name, outcome.output);
        }
    }
}

} // namespace

Facts collect(
    const std::vector<const Collector*>& collectors, const CollectContext& ctx, std::map<std::string, double>* seconds)
{
    Facts facts;
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

FindingCode error_code(const Probe& probe)
{
    return {probe.name + ".error", Severity::error, fmt::format("the {} probe could not run", probe.name),
        "Its collector timed out, crashed, or its rule broke. A GPU library call that hangs (a wedged driver, a GPU "
        "that fell off the bus) shows up here; the other probes still ran.",
        fmt::format("look at dmesg (Xid errors) and nvidia-smi, and run again with a longer {}; a rule that broke on "
                    "facts collected here is a bug: report it with the output of 'gpudoctor snapshot'",
            probe.deep ? "--deep-timeout" : "--timeout")};
}

FindingCode skip_code(const Probe& probe)
{
    return {probe.name + ".skip", Severity::skip, fmt::format("the {} probe was not checked", probe.name),
        "The facts it needs were not collected (a snapshot taken with --only/--skip, or an older snapshot). A "
        "skipped probe is never a pass.",
        ""};
}

namespace {

/// The findings of one probe whose facts are there: its rule's, or an error when the rule broke.
std::vector<Finding> run_rule(const Probe& p, const Facts& facts, const Policy& policy, const std::string& snapshot)
{
    Findings out(p);
    try {
        p.judge(facts, policy, out);
    } catch (const std::exception& e) {
        // A fact that is missing or of another type than its collector writes.
        if (!snapshot.empty()) {
            throw base::Error(fmt::format("{}: the {} facts are not as gpudoctor snapshot writes them ({}); "
                                          "write the snapshot again with 'gpudoctor snapshot > node.json'",
                snapshot, p.name, e.what()));
        }
        return {error_code(p).make("host", fmt::format("the {} rule broke on these facts: {}", p.name, e.what()))};
    }
    if (out.empty()) {
        return {error_code(p).make("host", fmt::format("the {} rule returned no finding", p.name))};
    }
    return out.take();
}

} // namespace

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
            r.findings.push_back(
                error_code(*p).make("host", fmt::format("the {} probe could not run: {}", p->name, broken)));
        } else if (!missing.empty()) {
            r.findings.push_back(
                skip_code(*p).make("host", fmt::format("not checked: the facts have no '{}' section", missing)));
        } else {
            r.findings = run_rule(*p, facts, policy, snapshot);
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
