#include "base/error.hpp"
#include "base/spelling.hpp"
#include "launcher/cli.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

using launcher::CliRequest;

namespace {

CliRequest parse(std::vector<std::string> args)
{
    args.insert(args.begin(), "gpurun");
    return launcher::parse_command_line(args);
}

std::string error_of(std::vector<std::string> args)
{
    try {
        parse(std::move(args));
    } catch (const base::Error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(Cli, MpirunStyleNpAndProgramArgumentsUntouched)
{
    auto r = parse({"-np", "4", "--bind", "socket", "python", "-np", "3", "--bind", "x", "a b"});
    ASSERT_EQ(r.action, CliRequest::Action::run);
    EXPECT_EQ(r.options.np, 4U);
    EXPECT_EQ(r.options.plan.bind, launcher::BindMode::socket);
    EXPECT_EQ(r.options.program, (std::vector<std::string>{"python", "-np", "3", "--bind", "x", "a b"}));
}

TEST(Cli, NpAfterFlagsAndOptionValues)
{
    auto r = parse({"--cpu-only", "--bind", "cores", "-np", "2", "prog", "-np", "5"});
    EXPECT_EQ(r.options.np, 2U);
    EXPECT_TRUE(r.options.plan.cpu_only);
    EXPECT_EQ(r.options.program, (std::vector<std::string>{"prog", "-np", "5"}));
}

TEST(Cli, DoubleDashEndsOptions)
{
    auto r = parse({"--cpu-only", "-n", "2", "--", "--weird-program-name", "--help"});
    EXPECT_TRUE(r.options.plan.cpu_only);
    EXPECT_EQ(r.options.program, (std::vector<std::string>{"--weird-program-name", "--help"}));
}

TEST(Cli, AllOptions)
{
    auto r = parse({"--np=2", "-H", "n1:2,n2:2", "--cpus-per-rank", "3", "--ranks-per-gpu", "2", "--gpu-visibility",
        "isolate", "--mem-bind", "strict", "--topology", "t.xml", "--sysroot", "/s", "--report-bindings",
        "--allow-run-as-root", "--grace", "2.5", "--master-addr", "n1", "--master-port", "1234", "-x", "A=1", "-x", "B",
        "prog"});
    const auto& o = r.options;
    EXPECT_EQ(o.np, 2U);
    ASSERT_EQ(o.hosts.size(), 2U);
    EXPECT_EQ(o.hosts[1].name, "n2");
    EXPECT_EQ(o.plan.cpus_per_rank, 3U);
    EXPECT_EQ(o.plan.ranks_per_gpu, 2U);
    EXPECT_EQ(o.plan.visibility, launcher::GpuVisibility::isolate);
    EXPECT_EQ(o.plan.memory, base::MemoryPolicy::strict);
    EXPECT_EQ(o.plan.topology_file, "t.xml");
    EXPECT_EQ(o.plan.sysroot, "/s");
    EXPECT_TRUE(o.report_bindings);
    EXPECT_TRUE(o.allow_run_as_root);
    EXPECT_DOUBLE_EQ(o.grace_seconds, 2.5);
    EXPECT_EQ(o.master_addr, "n1");
    EXPECT_EQ(o.master_port, 1234U);
    EXPECT_EQ(o.exports, (std::vector<std::string>{"A=1", "B"}));
}

TEST(Cli, HelpAndVersion)
{
    auto help = parse({"--help"});
    EXPECT_EQ(help.action, CliRequest::Action::help);
    EXPECT_NE(help.help_text.find("--gpu-visibility"), std::string::npos);
    EXPECT_EQ(parse({"--version"}).action, CliRequest::Action::version);
}

TEST(Cli, UsageErrorsSayWhatAndSuggest)
{
    EXPECT_EQ(
        error_of({"--bnid", "numa", "prog"}), "unknown option '--bnid' (did you mean --bind?); see gpurun --help");
    EXPECT_EQ(error_of({"--bind", "numaa", "prog"}),
        "--bind numaa: expected one of numa, socket, cores, none (did you mean numa?)");
    EXPECT_EQ(error_of({"-np", "0", "prog"}), "-np 0: a job needs at least one rank");
    EXPECT_NE(error_of({"-np", "x", "prog"}).find("see gpurun --help"), std::string::npos);
    EXPECT_NE(error_of({"-np", "2"}).find("no program to run"), std::string::npos);
    EXPECT_NE(error_of({"--json", "prog"}).find("--json needs --dry-run"), std::string::npos);
    EXPECT_NE(error_of({"--ranks-per-gpu", "0", "prog"}).find("--ranks-per-gpu 0"), std::string::npos);
    EXPECT_NE(error_of({"--master-port", "70000", "prog"}).find("1 to 65535"), std::string::npos);
    EXPECT_NE(error_of({"--grace", "nan", "prog"}).find("is not a decimal number"), std::string::npos);
    EXPECT_NE(error_of({"--grace", "1e12", "prog"}).find("from 0 to 86400"), std::string::npos);
    EXPECT_NE(error_of({"-H", "a", "--hostfile", "f", "prog"}).find("both given"), std::string::npos);
    EXPECT_NE(error_of({"-x", "=v", "prog"}).find("NAME or NAME=VALUE"), std::string::npos);
    EXPECT_EQ(error_of({"--gpus-per-node", "0", "prog"}), "--gpus-per-node 0: expected a count of GPUs from 1 to 1024");
    EXPECT_NE(error_of({"--gpus-per-node", "-1", "prog"}).find("--gpus-per-node"), std::string::npos);
    EXPECT_NE(error_of({"--gpus-per-node", "abc", "prog"}).find("'abc' is not a decimal number"), std::string::npos);
    EXPECT_EQ(parse({"--gpus-per-node", "08", "prog"}).options.gpus_per_node, 8U) << "decimal, not octal";
}

TEST(Cli, AnEmptyValueIsAnErrorNotTheDefault)
{
    // -H '' ran the job on this node alone, --master-addr '' used 127.0.0.1.
    EXPECT_EQ(error_of({"-H", "", "prog"}), "-H,--host '': expected a value");
    EXPECT_EQ(error_of({"--master-addr", "", "prog"}), "--master-addr '': expected a value");
    EXPECT_EQ(error_of({"--topology", "", "prog"}), "--topology '': expected a file name");
    EXPECT_EQ(error_of({"-np", "", "prog"}), "-n,--np '': expected a value");
}

TEST(Cli, ExportNamesAndTheMasterAddressAreChecked)
{
    // "-x --" would have put "--" into the launcher's arguments as a variable name.
    for (const char* bad : {"--", "A B=1", "1A=2", "\xff=1", "NCCL-DEBUG"}) {
        EXPECT_EQ(error_of({"-x", bad, "prog"}),
            fmt::format("-x '{}': expected NAME or NAME=VALUE, NAME of letters, digits and _, not starting with a "
                        "digit",
                bad));
    }
    EXPECT_EQ(error_of({"-x", "_A1=x y", "-x", "PATH", "prog"}), "") << "values are anything";
    for (const char* bad : {"-foo", "a b", "a\tb"}) {
        EXPECT_EQ(error_of({"--master-addr", bad, "prog"}),
            fmt::format("--master-addr {}: expected a host name or IP address", base::quote_input(bad)));
    }
    EXPECT_EQ(
        error_of({"--master-addr", "a\tb", "prog"}), "--master-addr 'a\\x09b': expected a host name or IP address")
        << "a tab is shown as an escape";
    EXPECT_EQ(error_of({"--master-addr", "fe80::1%eth0", "prog"}), "");
}

TEST(Cli, NcclCheckValueIsAttachedWithAnEqualsSign)
{
    auto plain = parse({"--nccl-check", "prog", "--nccl-check=init"});
    EXPECT_EQ(plain.options.nccl_check, launcher::NcclCheckMode::end);
    EXPECT_EQ(plain.options.program, (std::vector<std::string>{"prog", "--nccl-check=init"}))
        << "the word after --nccl-check is the program, and the program's arguments are its own";
    EXPECT_EQ(parse({"--nccl-check=end", "prog"}).options.nccl_check, launcher::NcclCheckMode::end);
    auto init = parse({"--nccl-check=init", "--nccl-log-dir", "logs", "-np", "2", "prog"});
    EXPECT_EQ(init.options.nccl_check, launcher::NcclCheckMode::init);
    EXPECT_EQ(init.options.nccl_log_dir, "logs");
    EXPECT_EQ(init.options.np, 2U);
    EXPECT_EQ(parse({"prog"}).options.nccl_check, launcher::NcclCheckMode::off);
    EXPECT_NE(parse({"--help"}).help_text.find("--nccl-check[=WHEN]"), std::string::npos);
}

TEST(Cli, NcclCheckErrors)
{
    EXPECT_EQ(
        error_of({"--nccl-check=ini", "prog"}), "--nccl-check=ini: expected one of end, init (did you mean init?)");
    EXPECT_EQ(error_of({"--nccl-check=", "prog"}), "--nccl-check=: expected one of end, init");
    EXPECT_EQ(error_of({"--nccl-log-dir", "d", "prog"}),
        "--nccl-log-dir needs --nccl-check: only the check makes NCCL write log files");
    EXPECT_EQ(error_of({"--nccl-check", "--nccl-log-dir", "", "prog"}), "--nccl-log-dir '': expected a directory");
    EXPECT_EQ(error_of({"--nccl-check", "-x", "NCCL_DEBUG_FILE=/x/%h", "prog"}),
        "-x NCCL_DEBUG_FILE=/x/%h and --nccl-check both given: the check has NCCL write its own log files; pass "
        "--nccl-log-dir DIR to keep them");
    EXPECT_EQ(error_of({"--nccl-chek", "prog"}),
        "unknown option '--nccl-chek' (did you mean --nccl-check?); see gpurun --help");
}

TEST(Cli, ClosestMatch)
{
    EXPECT_EQ(base::closest_match("--dry-rn", {"--dry-run", "--json"}), "--dry-run");
    EXPECT_EQ(base::closest_match("--zzzzzz", {"--dry-run", "--json"}), "");
}

TEST(Cli, GlobalBatchAndSpeeds)
{
    auto r = parse({"--global-batch", "96", "--speeds", "1,2,2", "-np", "3", "prog", "--speeds", "x"});
    EXPECT_EQ(r.options.batch.global_batch, 96U);
    EXPECT_EQ(r.options.batch.speeds, (std::vector<double>{1, 2, 2}));
    EXPECT_EQ(r.options.program, (std::vector<std::string>{"prog", "--speeds", "x"}));

    auto equal = parse({"--global-batch=10", "prog"});
    EXPECT_EQ(equal.options.batch.global_batch, 10U);
    EXPECT_TRUE(equal.options.batch.speeds.empty()) << "no --speeds: equal speeds";
    EXPECT_EQ(
        parse({"--speeds=0.5,1", "--global-batch", "3", "prog"}).options.batch.speeds, (std::vector<double>{0.5, 1}));
    EXPECT_EQ(parse({"prog"}).options.batch, launcher::BatchOptions{});
}

TEST(Cli, GlobalBatchErrors)
{
    EXPECT_EQ(error_of({"--speeds", "1,2", "prog"}),
        "--speeds needs --global-batch: the speeds say how to split a global batch over the ranks");
    EXPECT_EQ(error_of({"--global-batch", "0", "prog"}), "--global-batch 0: expected at least one sample per rank");
    EXPECT_NE(error_of({"--global-batch", "many", "prog"}).find("see gpurun --help"), std::string::npos);
    EXPECT_NE(error_of({"--global-batch", "-4", "prog"}).find("see gpurun --help"), std::string::npos);
    EXPECT_EQ(error_of({"--global-batch", "8", "--speeds", "1,0", "prog"}),
        "--speeds 1,0: speed 0 is not above 0; give relative speeds as positive numbers, like 1,2,2 or 0.5,1,1");
    EXPECT_EQ(error_of({"--global-batch", "8", "--speeds", "1,,2", "prog"}),
        "--speeds 1,,2: speed 2 is empty; give relative speeds as positive numbers, like 1,2,2 or 0.5,1,1");
    EXPECT_EQ(error_of({"--global-batch", "8", "--speeds", "fast,slow", "prog"}),
        "--speeds fast,slow: 'fast' is not a number; give relative speeds as positive numbers, like 1,2,2 or 0.5,1,1");
    EXPECT_EQ(error_of({"--global-bach", "8", "prog"}),
        "unknown option '--global-bach' (did you mean --global-batch?); see gpurun --help");
}

TEST(Cli, MonitorTakesItsIntervalOnlyAfterEquals)
{
    auto plain = parse({"--monitor", "python", "train.py"});
    EXPECT_DOUBLE_EQ(plain.options.monitor.interval, 1.0);
    EXPECT_EQ(plain.options.program, (std::vector<std::string>{"python", "train.py"}));
    EXPECT_EQ(plain.options.monitor.enforce, launcher::EnforceMode::warn);
    auto all = parse({"--monitor=0.5", "--monitor-json", "m.json", "--enforce=kill", "prog", "--monitor=3"});
    EXPECT_DOUBLE_EQ(all.options.monitor.interval, 0.5);
    EXPECT_EQ(all.options.monitor.json_file, "m.json");
    EXPECT_EQ(all.options.monitor.enforce, launcher::EnforceMode::kill);
    EXPECT_EQ(all.options.program, (std::vector<std::string>{"prog", "--monitor=3"}));
    EXPECT_DOUBLE_EQ(parse({"--enforce", "warn", "--monitor", "p"}).options.monitor.interval, 1.0);
}

TEST(Cli, MonitorUsageErrors)
{
    EXPECT_EQ(error_of({"--monitor=0", "p"}), "--monitor=0: expected the seconds between samples, from 0.1 to 3600");
    EXPECT_EQ(error_of({"--monitor=1s", "p"}), "--monitor=1s: expected the seconds between samples, from 0.1 to 3600");
    EXPECT_EQ(
        error_of({"--monitor=nan", "p"}), "--monitor=nan: expected the seconds between samples, from 0.1 to 3600");
    EXPECT_EQ(error_of({"--monitor", "--enforce", "kil", "p"}),
        "--enforce kil: expected one of warn, kill (did you mean kill?)");
    EXPECT_EQ(error_of({"--enforce", "kill", "p"}),
        "--enforce kill needs --monitor: the monitor is what sees ranks share a GPU");
    EXPECT_EQ(error_of({"--monitor-json", "m.json", "p"}),
        "--monitor-json needs --monitor: only the monitor has samples to write");
    EXPECT_EQ(error_of({"--monitor", "--cpu-only", "p"}),
        "--monitor and --cpu-only: the monitor samples GPUs, and the ranks get none");
}

TEST(Cli, NumbersAreDecimalOnly)
{
    // CLI11 converts with strtoll(s, 0): "-np 010" was 8 ranks and "--master-port 0x50" port 80.
    EXPECT_EQ(parse({"-np", "010", "prog"}).options.np, 10U);
    EXPECT_EQ(parse({"-np=08", "prog"}).options.np, 8U) << "once an error: 08 is not octal";
    EXPECT_EQ(parse({"--master-port", "00080", "-np", "1", "prog"}).options.master_port, 80U);
    EXPECT_EQ(parse({"--grace", "0.5", "prog"}).options.grace_seconds, 0.5);
    EXPECT_EQ(error_of({"--master-port", "0x50", "prog"}),
        "--master-port: '0x50' is not a decimal number; see gpurun --help");
    EXPECT_EQ(error_of({"-np", "0x10", "prog"}), "--np: '0x10' is not a decimal number; see gpurun --help");
    EXPECT_EQ(error_of({"--grace", "0x1p4", "prog"}), "--grace: '0x1p4' is not a decimal number; see gpurun --help");
    EXPECT_EQ(error_of({"--grace", "inf", "prog"}), "--grace: 'inf' is not a decimal number; see gpurun --help");
}

TEST(Cli, EchoedInputIsShortAndOnOneLine)
{
    const std::string error = error_of({"-np", std::string(100000, '7') + "\n\x1b[2J", "prog"});
    EXPECT_LT(error.size(), 400U) << error;
    EXPECT_NE(error.find("(first 200 of 100005 bytes)"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_EQ(base::quote_input("a\nb\x1b"), "'a\\x0ab\\x1b'");
}
