#include "base/error.hpp"
#include "base/library_versions.hpp"
#include "base/spelling.hpp"
#include "doctor/cli/subcommand_args.hpp"
#include "doctor/commands/commands.hpp"
#include "doctor/fit/cli.hpp"
#include "doctor/gpudoctor.hpp"
#include "doctor/monitor/cli.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <iostream>
#include <string_view>

#ifndef GPUKIT_VERSION
#define GPUKIT_VERSION "unknown"
#endif

namespace doctor {

namespace {

/// gpudoctor's subcommands, in the order --help lists them. A new one is a row here and its file:
/// doctor/commands/NAME.cpp (its options and its run), or its own folder's cli.cpp.
constexpr cli::Subcommand subcommands[] = {
    {"check", "Check the node and report (the default)", commands::run_check},
    {"snapshot", "Print every collected fact as JSON, for check --from", commands::run_snapshot},
    {"fleet", "Check every node of a job at once: the odd node, the facts that differ, the healthy hosts",
        commands::run_fleet},
    {"list", "List the probes in the order they run", commands::run_list},
    {"explain", "Explain a finding code and its remedy", commands::run_explain},
    {"topo", "Print the GPU link matrix like nvidia-smi topo -m, with NUMA and NIC", commands::run_topo},
    {"nccl-log", "Read NCCL_DEBUG=INFO logs: the transports NCCL used, and what is slow", commands::run_nccl_log},
    {"profile", "Read Nsight Systems SQLite exports: GPU busy share, top kernels, copies, idle gaps",
        commands::run_profile},
    {"fit", "The largest batch that fits, the learning rate, the split over unequal GPUs", fit::run_fit},
    {"monitor", "Sample GPU kernel-active time, memory and power like nvidia-smi dmon; judge them",
        monitor::run_monitor},
};

/// gpudoctor --help and --version; anything else there is a usage error.
int run_top(int argc, char** argv)
{
    CLI::App app("Tell whether this node is fit to train, and why not.", "gpudoctor");
    bool version = false;
    app.add_flag("--version", version, "Print the version and exit");
    for (const auto& sub : subcommands) {
        app.add_subcommand(sub.name, sub.summary);
    }
    app.footer("Exit status: 0 fit (warnings allowed), 1 a check failed, 2 usage or input error, 3 gpudoctor "
               "itself could not run. See gpudoctor(1).");
    if (!cli::parse_or_help(app, argc, argv, "gpudoctor --help")) {
        return 0;
    }
    std::cout << base::version_text("gpudoctor", GPUKIT_VERSION, base::library_versions());
    return 0;
}

} // namespace

int run_gpudoctor(int argc, char** argv)
{
    // A subcommand comes first, as in git; anything else (options, or nothing) means check.
    const std::string_view first = argc > 1 ? argv[1] : "";
    try {
        std::vector<std::string> names;
        for (const auto& sub : subcommands) {
            if (first == sub.name) {
                return sub.run(sub, argc - 1, argv + 1);
            }
            names.emplace_back(sub.name);
        }
        if (first == "--help" || first == "-h" || first == "--version") {
            return run_top(argc, argv);
        }
        if (!first.empty() && first.front() != '-') {
            const std::string hint = base::closest_match(std::string(first), names);
            throw base::Error(fmt::format("unknown subcommand '{}'{}; see gpudoctor --help", first,
                hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint)));
        }
        // Options alone, or nothing: check's. Its argv[0] is the subcommand's name, as after "check".
        std::vector<char*> args(argv, argv + argc);
        static char check_word[] = "check";
        args[0] = check_word;
        return subcommands[0].run(subcommands[0], argc, args.data());
    } catch (const base::Error& e) {
        fmt::print(stderr, "gpudoctor: {}\n", base::printable(e.what()));
        return 2;
    } catch (const base::Unavailable& e) {
        fmt::print(stderr, "gpudoctor: {}\n", base::printable(e.what()));
        return 3;
    } catch (const std::exception& e) {
        fmt::print(stderr, "gpudoctor: internal error: {}\n", base::printable(e.what()));
        return 3;
    }
}

} // namespace doctor
