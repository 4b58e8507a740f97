#include "tests/support/doctor_support.hpp"

#include <gtest/gtest.h>
#include <sched.h>

using doctor::engine::Severity;

namespace {

// Two NUMA nodes: GPUs 0000:1a:00.0 near CPUs 0-7 (NUMA 0) and 0000:88:00.0 near 8-15 (NUMA 1).
nlohmann::json two_socket_topology()
{
    return {{"source", "live"}, {"allowed_cpus", "0-15"},
        {"numa_nodes",
            {{{"os_index", 0}, {"cpus", "0-7"}, {"gpu_memory", false}},
                {{"os_index", 1}, {"cpus", "8-15"}, {"gpu_memory", false}}}},
        {"gpus",
            {{{"index", 0}, {"bus_id", "0000:1a:00.0"}, {"cpus", "0-7"}, {"numa", {0}}},
                {{"index", 1}, {"bus_id", "0000:88:00.0"}, {"cpus", "8-15"}, {"numa", {1}}}}}};
}

const nlohmann::json nvml = {{"driver_file", "NVRM"}, {"nvml_loaded", true},
    {"gpus",
        {{{"index", 0}, {"bus_id", "0000:1a:00.0"}, {"uuid", "GPU-aaaa-1111"}},
            {{"index", 1}, {"bus_id", "0000:88:00.0"}, {"uuid", "GPU-bbbb-2222"}}}}};

std::vector<doctor::engine::Finding> judge(const std::string& cpus, const nlohmann::json& env)
{
    nlohmann::json facts = {
        {"affinity", {{"cpus", cpus}, {"env", env}}}, {"topology", two_socket_topology()}, {"nvml", nvml}};
    return test_support::judge_one("binding", facts);
}

} // namespace

TEST(BindingProbe, NotUnderALauncherIsASkipThatSaysHow)
{
    auto findings = judge("0-15", nlohmann::json::object());
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "binding.not_under_launcher");
    EXPECT_EQ(findings[0].severity, Severity::skip);
    EXPECT_NE(findings[0].message.find("gpurun -np 8 gpudoctor check --only binding"), std::string::npos);
}

TEST(BindingProbe, AffinityInsideTheGpusLocalityPasses)
{
    auto findings = judge("8-11", {{"GPURUN_GPU_BUS_ID", "0000:88:00.0"}});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "binding.ok");
    EXPECT_EQ(findings[0].severity, Severity::pass);
    EXPECT_EQ(findings[0].subject, "gpu 1 (0000:88:00.0)");
}

TEST(BindingProbe, AffinityOnTheOtherSocketFails)
{
    auto findings = judge("0-3", {{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "binding.remote");
    EXPECT_EQ(findings[0].severity, Severity::fail);
    EXPECT_NE(findings[0].message.find("local CPUs 8-15"), std::string::npos) << findings[0].message;
    EXPECT_FALSE(findings[0].remedy.empty());
}

TEST(BindingProbe, PartlyOutsideWarnsAndAllCpusOfAMultiNumaNodeIsUnbound)
{
    auto partly = judge("4-11", {{"LOCAL_RANK", "0"}});
    ASSERT_EQ(partly.size(), 1U);
    EXPECT_EQ(partly[0].code, "binding.partly_remote");
    EXPECT_NE(partly[0].message.find("4 of this process's 8 CPUs (8-11)"), std::string::npos) << partly[0].message;
    auto unbound = judge("0-15", {{"LOCAL_RANK", "0"}});
    ASSERT_EQ(unbound.size(), 1U);
    EXPECT_EQ(unbound[0].code, "binding.unbound");
    EXPECT_EQ(unbound[0].severity, Severity::warn);
}

TEST(BindingProbe, LocalRankPicksFromCudaVisibleDevices)
{
    // Local rank 0 with CUDA_VISIBLE_DEVICES=1,0 is PCI GPU 1; by UUID prefix as well.
    auto by_index = judge("8-15", {{"LOCAL_RANK", "0"}, {"CUDA_VISIBLE_DEVICES", "1,0"}});
    EXPECT_EQ(by_index.at(0).code, "binding.ok");
    auto by_uuid = judge("8-15", {{"LOCAL_RANK", "1"}, {"CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb"}});
    EXPECT_EQ(by_uuid.at(0).code, "binding.ok");
    EXPECT_EQ(by_uuid.at(0).subject, "gpu 1 (0000:88:00.0)");
    auto past = judge("8-15", {{"LOCAL_RANK", "2"}, {"CUDA_VISIBLE_DEVICES", "0,1"}});
    EXPECT_EQ(past.at(0).code, "binding.gpu_unknown");
    EXPECT_EQ(past.at(0).severity, Severity::skip);
}

TEST(BindingProbe, SkipsWhenTheTopologyHasNoGpu)
{
    nlohmann::json facts = {{"affinity", {{"cpus", "0-3"}, {"env", {{"LOCAL_RANK", "0"}}}}},
        {"topology", {{"source", "live"}, {"gpus", nlohmann::json::array()}}},
        {"nvml", {{"driver_file", nullptr}, {"nvml_loaded", false}, {"nvml_error", "x"}}}};
    auto findings = test_support::judge_one("binding", facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].severity, Severity::skip);
    EXPECT_NE(findings[0].message.find("no NVIDIA driver"), std::string::npos) << findings[0].message;
}

TEST(BindingCollector, RecordsThisProcesssAffinityAndTheLaunchersVariables)
{
    doctor::engine::CollectContext ctx;
    ctx.env = {{"LOCAL_RANK", "3"}, {"CUDA_VISIBLE_DEVICES", "0,1,2,3"}, {"UNRELATED", "x"}};
    auto facts = test_support::collector_named("affinity").collect(ctx);
    cpu_set_t mask;
    CPU_ZERO(&mask);
    ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
    EXPECT_FALSE(facts["cpus"].get<std::string>().empty());
    EXPECT_EQ(facts["env"]["LOCAL_RANK"], "3");
    EXPECT_EQ(facts["env"]["CUDA_VISIBLE_DEVICES"], "0,1,2,3");
    EXPECT_FALSE(facts["env"].contains("UNRELATED"));
}
