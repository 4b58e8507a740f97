#include "base/cli_values.hpp"
#include "base/error.hpp"
#include "base/input_file.hpp"
#include "doctor/commands/commands.hpp"
#include "doctor/commands/node_options.hpp"
#include "doctor/engine/gpu_scope.hpp"
#include "doctor/engine/report.hpp"
#include "doctor/engine/runner.hpp"
#include "doctor/engine/snapshot.hpp"
#include "doctor/engine/verdict.hpp"
#include "doctor/probes/table.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <iostream>
#include <unistd.h>

namespace doctor::commands {

namespace {

struct CheckOptions {
    NodeOptions node;
    bool json = false;
    bool no_color = false;
    bool strict = false;
    bool quick = false;
    bool fail_summary = false;
    int expect_gpus = -1;
    std::string gpus; ///< --gpus LIST
    std::string from; ///< --from FILE: a snapshot instead of this node
    engine::JudgingOptions judging; ///< its --fail-on is spelled --strict
};

void add_check_options(CLI::App& app, CheckOptions& o)
{
    add_node_options(app, o.node);
    app.add_flag("--json", o.json, "Print the report as JSON");
    app.add_flag("--no-color", o.no_color, "No colour (also when NO_COLOR is set)");
    app.add_flag("--strict", o.strict, "Warnings fail too");
    app.add_flag("--quick", o.quick, "Quick tier only: NVML, sysfs and files, no timed GPU work (the default)");
    base::add_number(app, "--expect-gpus", o.expect_gpus, "GPUs this node must have (0 for a CPU node)", "N");
    app.add_option("--gpus", o.gpus,
           "Judge only these GPUs: NVML indexes, bus ids or UUIDs, comma-separated (default: the job's, from "
           "GPURUN_GPU_BUS_ID or CUDA_VISIBLE_DEVICES, else all); node-wide checks run either way")
        ->type_name("LIST");
    app.add_option("--from", o.from, "Judge a snapshot (gpudoctor snapshot > node.json) instead of this node")
        ->type_name("FILE");
    cli::add_judging_options(app, o.judging, false);
    app.add_flag("--fail-summary", o.fail_summary,
        "Print one line instead of the report: the first failing finding (CODE: SUBJECT: MESSAGE), else the summary");
}

engine::Facts load_snapshot(const std::string& path)
{
    return engine::read_snapshot(
        path == "-" ? base::read_input_fd(STDIN_FILENO, "-", "snapshot") : base::read_input_file(path, "snapshot"),
        path);
}

} // namespace

int run_check(const cli::Subcommand& self, int argc, char** argv)
{
    CLI::App app(self.summary, fmt::format("gpudoctor {}", self.name));
    CheckOptions o;
    add_check_options(app, o);
    app.footer("Exit status: 0 fit (warnings allowed), 1 a check failed, 2 usage or input error, 3 gpudoctor itself "
               "could not run. See gpudoctor(1).");
    if (!cli::parse_subcommand(app, argc, argv, self.name)) {
        return 0;
    }
    check_timeout(o.node);
    if (o.quick && o.node.deep) {
        throw base::Error("--quick and --deep: choose one tier (--deep includes the quick probes)");
    }
    if (o.fail_summary && o.json) {
        throw base::Error("--fail-summary and --json: choose one report on standard output");
    }
    check_deep_timeout(o.node);
    NodeRun run = prepare_node_run(o.node, !o.judging.quiet, o.from.empty());
    if (o.expect_gpus >= 0) {
        run.policy.expect_gpus = static_cast<unsigned>(o.expect_gpus);
    } else if (app.count("--expect-gpus") > 0) {
        throw base::Error(fmt::format("--expect-gpus {}: expected a number of GPUs, 0 or more", o.expect_gpus));
    }

    engine::ReportOptions report;
    const engine::Facts facts = o.from.empty()
        ? engine::collect(probes::collectors_for(run.probes), run.context, &report.collector_seconds)
        : load_snapshot(o.from);
    auto results = engine::judge(run.probes, facts, run.policy, o.from == "-" ? "standard input" : o.from);
    report.scope = engine::gpu_scope(facts, o.gpus, o.from.empty() ? &run.context.env : nullptr);
    engine::keep_in_scope(results, report.scope);
    report.strict = o.strict;
    report.quiet = o.judging.quiet;
    report.color = cli::use_color(o.no_color);
    for (const auto& collector : probes::collector_table()) {
        if (collector.deep) {
            report.measured.push_back(collector.name);
        }
    }
    // The extra files first: one that cannot be written is exit 2, before any report is printed.
    engine::write_verdict_files(o.judging.files, engine::check_verdict(results, facts, o.strict), &facts);
    if (o.fail_summary) {
        std::cout << engine::render_fail_summary(results, report);
    } else if (o.json) {
        std::cout << engine::render_json(results, facts, report).dump(2) << '\n';
    } else {
        std::cout << engine::render_text(results, facts, report);
    }
    return engine::exit_code(results, o.strict);
}

} // namespace doctor::commands
