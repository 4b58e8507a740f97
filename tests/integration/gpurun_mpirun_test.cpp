// gpurun with the real Open MPI mpirun: real ranks, real binding on this machine, checked from
// inside each rank.
#include "probes/cpu_set.hpp"
#include "probes/topology.hpp"
#include "tests/support/fake_nvml_fixture.hpp"
#include "tests/support/process.hpp"
#include "tests/support/rank_files.hpp"
#include "tests/support/temp_dir.hpp"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <thread>

using test_support::EnvChanges;
using test_support::TempDir;

namespace {

using Values = test_support::RankValues;
using test_support::one;
using test_support::read_rank;

class GpurunMpirun : public ::testing::Test {
protected:
    void SetUp() override
    {
        auto topology = probes::Topology::load_live(false);
        m_cpus = topology.layout().allowed;
        if (m_cpus.size() < 2) {
            GTEST_SKIP() << "needs 2 CPUs to check disjoint binding; this machine allows " << m_cpus.to_list();
        }
        m_env = {{"PROBE_DIR", m_dir.path().string()}, {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
            {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}, {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
            {"CUDA_VISIBLE_DEVICES", test_support::unset_var}, {"OMP_NUM_THREADS", test_support::unset_var},
            {"MASTER_ADDR", test_support::unset_var}, {"MASTER_PORT", test_support::unset_var}};
    }

    test_support::Finished gpurun(std::vector<std::string> args, const EnvChanges& extra = {})
    {
        return test_support::run_with(GPURUN_PATH, std::move(args), m_env, extra);
    }

    TempDir m_dir;
    EnvChanges m_env;
    probes::CpuSet m_cpus;
};

} // namespace

TEST_F(GpurunMpirun, CpuOnlyRanksGetDisjointCoresAndTheirVariables)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "--master-port", "29411", RANK_PROBE_PATH});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    probes::CpuSet seen;
    for (unsigned rank = 0; rank < 2; ++rank) {
        auto v = read_rank(m_dir, rank);
        EXPECT_EQ(one(v, "RANK"), std::to_string(rank));
        EXPECT_EQ(one(v, "WORLD_SIZE"), "2");
        EXPECT_EQ(one(v, "LOCAL_RANK"), std::to_string(rank));
        EXPECT_EQ(one(v, "LOCAL_WORLD_SIZE"), "2");
        EXPECT_EQ(one(v, "MASTER_ADDR"), "127.0.0.1");
        EXPECT_EQ(one(v, "MASTER_PORT"), "29411");
        EXPECT_EQ(one(v, "CUDA_DEVICE_ORDER"), "<unset>") << "no GPU variables with --cpu-only";
        EXPECT_EQ(one(v, "GPURUN_GPU"), "<unset>");
        auto cpus = probes::CpuSet::parse(one(v, "Cpus_allowed_list"));
        EXPECT_FALSE(cpus.empty());
        EXPECT_EQ(cpus.to_list(), one(v, "GPURUN_CPUS")) << "the kernel's mask is the planned one";
        EXPECT_FALSE(cpus.intersects(seen)) << "rank " << rank << " shares CPUs: " << cpus.to_list();
        EXPECT_EQ(one(v, "OMP_NUM_THREADS"), std::to_string(cpus.size()));
        seen = seen.unite(cpus);
    }
}

TEST_F(GpurunMpirun, GlobalBatchGivesEachRankItsShareAndLossWeight)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "--global-batch", "10", "--speeds", "1,4", RANK_PROBE_PATH});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto r0 = read_rank(m_dir, 0);
    auto r1 = read_rank(m_dir, 1);
    EXPECT_EQ(one(r0, "GPURUN_LOCAL_BATCH"), "2");
    EXPECT_EQ(one(r1, "GPURUN_LOCAL_BATCH"), "8");
    EXPECT_EQ(one(r0, "GPURUN_LOSS_WEIGHT"), "0.4");
    EXPECT_EQ(one(r1, "GPURUN_LOSS_WEIGHT"), "1.6");

    auto plain = gpurun({"--cpu-only", "-np", "2", RANK_PROBE_PATH});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(one(read_rank(m_dir, 0), "GPURUN_LOCAL_BATCH"), "<unset>");
    EXPECT_EQ(one(read_rank(m_dir, 1), "GPURUN_LOSS_WEIGHT"), "<unset>");

    std::filesystem::remove(m_dir / "rank-0.txt");
    auto wrong = gpurun({"--cpu-only", "-np", "2", "--global-batch", "10", "--speeds", "1,2,2", RANK_PROBE_PATH});
    EXPECT_EQ(wrong.exit_code, 2);
    EXPECT_EQ(wrong.err, "gpurun: --speeds 1,2,2: 3 speeds for 2 ranks; give one speed per rank, in rank order\n");
    EXPECT_FALSE(std::filesystem::exists(m_dir / "rank-0.txt")) << "no rank started";
}

TEST_F(GpurunMpirun, FakeNvmlGpusBindEachRankNearItsGpu)
{
    test_support::FakeNvmlFixture fixture(m_dir, test_support::two_gpu_fixture);
    // The fake GPUs are not on this machine's PCI bus: their locality comes from a sysfs tree.
    const unsigned a = m_cpus.cpus()[0];
    const unsigned b = m_cpus.cpus()[1];
    auto root = m_dir / "root";
    for (auto [bus, cpu] : {std::pair{"0000:07:00.0", a}, std::pair{"0000:0f:00.0", b}}) {
        auto dev = root / "sys/bus/pci/devices" / bus;
        std::filesystem::create_directories(dev);
        std::ofstream(dev / "local_cpulist") << cpu << '\n';
        std::ofstream(dev / "numa_node") << "-1\n";
    }
    EnvChanges env{{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", fixture.path()}};
    auto r = gpurun({"-np", "2", "--sysroot", root.string(), RANK_PROBE_PATH}, env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto r0 = read_rank(m_dir, 0);
    auto r1 = read_rank(m_dir, 1);
    EXPECT_EQ(one(r0, "Cpus_allowed_list"), std::to_string(a));
    EXPECT_EQ(one(r1, "Cpus_allowed_list"), std::to_string(b));
    EXPECT_EQ(one(r0, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    EXPECT_EQ(one(r0, "GPURUN_GPU"), "0");
    EXPECT_EQ(one(r1, "GPURUN_GPU"), "1");
    EXPECT_EQ(one(r1, "GPURUN_GPU_BUS_ID"), "0000:0f:00.0");
    EXPECT_EQ(one(r1, "GPURUN_GPU_UUID"), "GPU-bbbbbbbb-0000-0000-0000-000000000000");
    EXPECT_EQ(one(r0, "CUDA_VISIBLE_DEVICES"), "<unset>") << "--gpu-visibility all keeps every GPU visible";

    auto iso = gpurun({"-np", "2", "--gpu-visibility", "isolate", "--sysroot", root.string(), RANK_PROBE_PATH}, env);
    ASSERT_EQ(iso.exit_code, 0) << iso.err;
    EXPECT_EQ(one(read_rank(m_dir, 1), "CUDA_VISIBLE_DEVICES"), "GPU-bbbbbbbb-0000-0000-0000-000000000000");
    EXPECT_EQ(one(read_rank(m_dir, 1), "GPURUN_GPU"), "0");

    auto too_many = gpurun({"-np", "3", "--sysroot", root.string(), RANK_PROBE_PATH}, env);
    EXPECT_EQ(too_many.exit_code, 2);
    EXPECT_NE(too_many.err.find("3 ranks on host"), std::string::npos) << too_many.err;
    EXPECT_NE(too_many.err.find("but only 2 GPUs"), std::string::npos) << too_many.err;
}

TEST_F(GpurunMpirun, ArgumentsArriveByteExact)
{
    std::vector<std::string> odd = {"a b", "$(x)", "\"q\"", "'s'", "*", "", "--np", "-np"};
    std::vector<std::string> args = {"--cpu-only", "-np", "1", RANK_PROBE_PATH};
    args.insert(args.end(), odd.begin(), odd.end());
    auto r = gpurun(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto v = read_rank(m_dir, 0);
    std::vector<std::string> got;
    for (auto [it, end] = v.equal_range("arg"); it != end; ++it) {
        got.push_back(it->second);
    }
    EXPECT_EQ(got, odd);
}

TEST_F(GpurunMpirun, ExitStatusOfTheJob)
{
    auto r = gpurun({"--cpu-only", "-np", "2", RANK_PROBE_PATH}, {{"PROBE_EXIT_RANK", "1"}, {"PROBE_EXIT", "3"}});
    EXPECT_EQ(r.exit_code, 3) << r.err;
}

TEST_F(GpurunMpirun, ReportBindingsPrintsWhatEachRankGot)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "--report-bindings", RANK_PROBE_PATH});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (unsigned rank = 0; rank < 2; ++rank) {
        auto v = read_rank(m_dir, rank);
        std::string expected = "local rank " + std::to_string(rank) + "): no gpu; cpus " + one(v, "Cpus_allowed_list");
        EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    }
}

TEST_F(GpurunMpirun, SigintLeavesNoRankBehind)
{
    auto log = (m_dir / "gpurun.log").string();
    EnvChanges env = m_env;
    env["PROBE_SLEEP"] = "120";
    pid_t pid = test_support::start({GPURUN_PATH, "--cpu-only", "-np", "2", "--grace", "3", RANK_PROBE_PATH}, env, log);
    std::vector<pid_t> ranks = test_support::wait_for_rank_pids(m_dir, 2, std::chrono::milliseconds(15000));
    ASSERT_EQ(ranks.size(), 2U) << "ranks did not start";
    kill(pid, SIGINT);
    int code = test_support::wait_for(pid, std::chrono::seconds(20));
    EXPECT_EQ(code, 128 + SIGINT);
    for (pid_t p : ranks) {
        EXPECT_FALSE(test_support::alive(p)) << "rank process " << p << " survived gpurun";
        if (test_support::alive(p)) {
            kill(p, SIGKILL);
        }
    }
}

TEST_F(GpurunMpirun, ProgramNotFoundStartsNothing)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "/nonexistent/train"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "gpurun: program not found: '/nonexistent/train' is not an executable file\n");
    EXPECT_TRUE(r.out.empty());
}

TEST_F(GpurunMpirun, LauncherThatIgnoresSignalsIsKilledAfterTheGracePeriod)
{
    // A fake mpirun on PATH that says it is Open MPI, ignores SIGINT and SIGTERM, and leaves a
    // child behind in its process group.
    auto bin = m_dir / "bin";
    std::filesystem::create_directory(bin);
    std::ofstream(bin / "mpirun") << "#!/bin/sh\n"
                                     "if [ \"$1\" = --version ]; then echo 'mpirun (Open MPI) 4.1.4'; exit 0; fi\n"
                                     "trap '' INT TERM\n"
                                     "sleep 120 &\n"
                                     "echo $! > \"$PROBE_DIR/child\"\n"
                                     "echo ready > \"$PROBE_DIR/ready\"\n"
                                     "wait\n";
    std::filesystem::permissions(bin / "mpirun", std::filesystem::perms::owner_all);
    EnvChanges env = m_env;
    env["PATH"] = bin.string() + ":" + std::getenv("PATH");
    pid_t pid = test_support::start(
        {GPURUN_PATH, "--cpu-only", "-np", "1", "--grace", "1", RANK_PROBE_PATH}, env, (m_dir / "log").string());
    for (int i = 0; i < 200 && !std::filesystem::exists(m_dir / "ready"); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ASSERT_TRUE(std::filesystem::exists(m_dir / "ready"));
    const auto sent = std::chrono::steady_clock::now();
    kill(pid, SIGTERM);
    int code = test_support::wait_for(pid, std::chrono::seconds(15));
    const auto took = std::chrono::steady_clock::now() - sent;
    EXPECT_EQ(code, 128 + SIGTERM);
    EXPECT_GE(took, std::chrono::milliseconds(900)) << "SIGKILL came before the grace period ended";
    EXPECT_LT(took, std::chrono::seconds(5));
    pid_t child = 0;
    std::ifstream(m_dir / "child") >> child;
    ASSERT_GT(child, 0);
    for (int i = 0; i < 50 && test_support::alive(child); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_FALSE(test_support::alive(child)) << "the launcher's child survived";
    if (test_support::alive(child)) {
        kill(child, SIGKILL);
    }
}

TEST_F(GpurunMpirun, EndsWhenStartedWithSigchldIgnored)
{
    // Some wrappers start programs with SIGCHLD ignored; the kernel then reaps mpirun by itself.
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGCHLD, SIG_IGN);
        for (const auto& [k, v] : m_env) {
            if (v == test_support::unset_var) {
                unsetenv(k.c_str());
            } else {
                setenv(k.c_str(), v.c_str(), 1);
            }
        }
        execl(GPURUN_PATH, GPURUN_PATH, "--cpu-only", "-np", "1", RANK_PROBE_PATH, static_cast<char*>(nullptr));
        _exit(127);
    }
    int code = test_support::wait_for(pid, std::chrono::seconds(20));
    if (code == -1) {
        kill(pid, SIGKILL);
    }
    EXPECT_EQ(code, 0) << "gpurun did not end";
}
