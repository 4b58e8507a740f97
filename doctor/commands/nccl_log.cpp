#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/nccl/log.hpp"
#include "doctor/commands/commands.hpp"
#include "doctor/engine/verdict.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fmt/format.h>
#include <iostream>

namespace doctor::commands {

namespace {

struct NcclLogOptions {
    std::vector<std::string> files;
    bool json = false;
    bool no_color = false;
    engine::JudgingOptions judging;
};

int read_logs(const NcclLogOptions& options)
{
    namespace nccl = base::nccl;
    const auto& files = options.files;
    const auto threshold = base::parse_fail_on(options.judging.fail_on);
    if (files.empty()) {
        throw base::Error("nccl-log: name the log files to read (- for stdin); see gpudoctor nccl-log --help");
    }
    if (std::count(files.begin(), files.end(), "-") > 1) {
        throw base::Error("stdin (-) named more than once; name it once");
    }
    nccl::Analyzer analyzer;
    // A directory holds per-rank logs (NCCL_DEBUG_FILE, gpurun --nccl-log-dir): its logs are read,
    // not what lies beside them (a README, a JSON report that quote NCCL lines).
    std::vector<std::string> skipped;
    for (const auto& file : base::input_files(files, nccl::looks_like_log,
             "holds no logs (files named *.log, *.txt, *.out, *.err or *.gz, or holding NCCL records; logs in its "
             "subdirectories are not read); name the log files or their own directory",
             &skipped)) {
        analyzer.read_file(file);
    }
    for (const auto& file : skipped) {
        analyzer.skip(file);
    }
    const nccl::Analysis analysis = analyzer.analysis();
    const engine::Verdict verdict = engine::findings_verdict("nccl-log", analysis.findings, threshold);
    engine::write_verdict_files(options.judging.files, verdict, nullptr);
    if (options.json) {
        std::string text;
        nccl::write_json(analysis, text);
        std::cout << text << '\n';
    } else if (options.judging.quiet) {
        std::cout << engine::render_problems(verdict, cli::use_color(options.no_color));
    } else {
        std::cout << nccl::render_text(analysis, cli::use_color(options.no_color));
    }
    return verdict.exit_code();
}

} // namespace

int run_nccl_log(const cli::Subcommand& self, int argc, char** argv)
{
    CLI::App app(self.summary, fmt::format("gpudoctor {}", self.name));
    NcclLogOptions o;
    app.add_option("files", o.files, "Log files or directories of them (- for stdin; gzip is decompressed)")
        ->type_name("FILE");
    app.add_flag("--json", o.json, "Print the report as JSON");
    app.add_flag("--no-color", o.no_color, "No colour (also when NO_COLOR is set)");
    cli::add_judging_options(app, o.judging, true);
    app.footer("Exit status: 0 no finding at the --fail-on level (warnings allowed), 1 a finding failed (or reached "
               "--fail-on), 2 unreadable input or usage error.");
    if (!cli::parse_subcommand(app, argc, argv, self.name)) {
        return 0;
    }
    return read_logs(o);
}

} // namespace doctor::commands
