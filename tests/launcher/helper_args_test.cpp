#include "base/error.hpp"
#include "launcher/helper_args.hpp"

#include <gtest/gtest.h>

using launcher::HelperOptions;

TEST(HelperArgs, RoundTripKeepsEveryOptionAndTheProgramByteExact)
{
    HelperOptions o;
    o.plan.bind = launcher::BindMode::cores;
    o.plan.cpus_per_rank = 4;
    o.plan.ranks_per_gpu = 2;
    o.plan.cpu_only = true;
    o.plan.visibility = launcher::GpuVisibility::isolate;
    o.plan.memory = base::MemoryPolicy::strict;
    o.plan.topology_file = "/t/x.xml";
    o.plan.sysroot = "/fake root";
    o.master_addr = "10.0.0.1";
    o.master_port = 29501;
    o.report_bindings = true;
    o.batch.global_batch = 96;
    o.batch.speeds = {1, 2.5, 0.1 + 0.2, 1.0 / 3};
    o.host_ranks = {8, 8, 4};
    o.output.tag = true;
    o.output.log_dir = "/logs/a b";
    o.grace_seconds = 0.1 + 0.2;
    o.program = {"prog", "--", "a b", "$(x)", "\"q\"", "--bind", ""};
    auto args = launcher::helper_arguments(o);
    EXPECT_EQ(launcher::parse_helper_arguments(args), o);
}

TEST(HelperArgs, NicBindingAndProfilerMpiTravelToTheHelper)
{
    HelperOptions o;
    o.nic_binding = launcher::NicBinding::nccl;
    o.profile.profiler = launcher::Profiler::nsys;
    o.profile.dir = "/p";
    o.profile.mpi_impl = "mpich";
    o.program = {"prog"};
    auto args = launcher::helper_arguments(o);
    EXPECT_EQ(args,
        (std::vector<std::string>{"--nic-binding", "nccl", "--profile", "nsys", "--profile-dir", "/p",
            "--profile-ranks", "0", "--profile-mpi", "mpich", "--", "prog"}));
    EXPECT_EQ(launcher::parse_helper_arguments(args), o);
    EXPECT_THROW(launcher::parse_helper_arguments({"--nic-binding", "rdma", "--", "x"}), base::Error);
    EXPECT_THROW(launcher::parse_helper_arguments({"--profile-mpi", "mpich", "--", "x"}), base::Error) << "no profiler";
}

TEST(HelperArgs, DefaultsAreLeftOut)
{
    HelperOptions o;
    o.program = {"true"};
    EXPECT_EQ(launcher::helper_arguments(o), (std::vector<std::string>{"--", "true"}));
}

TEST(HelperArgs, RejectsWhatGpurunDoesNotWrite)
{
    EXPECT_THROW(launcher::parse_helper_arguments({"--bogus", "--", "x"}), base::Error);
    EXPECT_THROW(launcher::parse_helper_arguments({"--bind", "tiles", "--", "x"}), base::Error);
    EXPECT_THROW(launcher::parse_helper_arguments({"--cpus-per-rank"}), base::Error);
    EXPECT_THROW(launcher::parse_helper_arguments({"--"}), base::Error);
}

TEST(HelperArgs, GlobalBatchTravelsWithItsSpeeds)
{
    HelperOptions o;
    o.batch.global_batch = 96;
    o.batch.speeds = {1, 2, 2};
    o.program = {"prog"};
    EXPECT_EQ(launcher::helper_arguments(o),
        (std::vector<std::string>{"--global-batch", "96", "--speeds", "1,2,2", "--", "prog"}));
    EXPECT_EQ(launcher::parse_helper_arguments(launcher::helper_arguments(o)), o);

    o.batch.speeds = {};
    EXPECT_EQ(launcher::helper_arguments(o), (std::vector<std::string>{"--global-batch", "96", "--", "prog"}));
    EXPECT_EQ(launcher::parse_helper_arguments(launcher::helper_arguments(o)), o);
}

TEST(HelperArgs, RejectsABatchGpurunDoesNotWrite)
{
    EXPECT_THROW(launcher::parse_helper_arguments({"--global-batch", "0", "--", "x"}), base::Error);
    EXPECT_THROW(launcher::parse_helper_arguments({"--global-batch", "-1", "--", "x"}), base::Error);
    EXPECT_THROW(launcher::parse_helper_arguments({"--speeds", "1,2", "--", "x"}), base::Error)
        << "speeds without a global batch";
    EXPECT_THROW(
        launcher::parse_helper_arguments({"--global-batch", "4", "--speeds", "1,nan", "--", "x"}), base::Error);
    EXPECT_THROW(launcher::parse_helper_arguments({"--global-batch", "4", "--speeds"}), base::Error);
}

TEST(HelperArgs, MonitorOptionsTravelToTheHelper)
{
    HelperOptions o;
    o.monitor.interval = 0.5;
    o.monitor.json_file = "/r/mon.%h.json";
    o.monitor.enforce = launcher::EnforceMode::kill;
    o.program = {"train"};
    auto with_id = o;
    with_id.monitor_job = "0123456789abcdef";
    const auto args = launcher::helper_arguments(with_id);
    EXPECT_EQ(args,
        (std::vector<std::string>{
            "--monitor-interval", "0.5", "--monitor-json", "/r/mon.%h.json", "--enforce", "kill", "--", "train"}));
    EXPECT_EQ(launcher::parse_helper_arguments(args), o);
    EXPECT_THROW(launcher::parse_helper_arguments({"--monitor-interval", "0", "--", "x"}), base::Error);
    // The job id names the nodes' private directories: it is not shown to other users in argv.
    EXPECT_THROW(launcher::parse_helper_arguments({"--monitor-job", "0123456789abcdef", "--", "x"}), base::Error);
    // Monitor settings without the monitor would not survive the trip back to argv: refused.
    EXPECT_THROW(launcher::parse_helper_arguments({"--monitor-json", "ly", "--", "x"}), base::Error);
    EXPECT_THROW(launcher::parse_helper_arguments({"--enforce", "kill", "--", "x"}), base::Error);
    EXPECT_THROW(launcher::parse_helper_arguments({"--enforce", "stop", "--", "x"}), base::Error);
}

TEST(HelperArgs, OutputAndGraceAreCheckedWhereTheHelperReadsThem)
{
    for (const auto& bad : std::vector<std::vector<std::string>>{{"--grace", "-1", "--", "p"},
             {"--grace", "1e9", "--", "p"}, {"--grace", "nan", "--", "p"}, {"--log-dir", "", "--", "p"}}) {
        EXPECT_THROW(launcher::parse_helper_arguments(bad), base::Error) << bad[0] << ' ' << bad[1];
    }
    EXPECT_EQ(launcher::parse_helper_arguments({"--grace", "2.5", "--", "p"}).grace_seconds, 2.5);
}
