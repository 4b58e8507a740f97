// gpurun --monitor with the real Open MPI mpirun and the fake NVML: the monitor that local rank 0's
// helper starts samples the fake's sequences, reads the ranks' records, and its summary reaches
// gpurun's standard error through mpirun. Ranks "open" a GPU by writing their pid to the fake's
// process file (rank_probe PROBE_OPEN_GPU).
#include "base/topology.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <unistd.h>

using test_support::EnvChanges;
using test_support::TempDir;

namespace {

constexpr unsigned long long gib = 1ULL << 30;

std::string short_host()
{
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    std::string host = name;
    return host.substr(0, host.find('.'));
}

class GpurunMonitor : public ::testing::Test {
protected:
    void SetUp() override
    {
        const auto cpus = base::Topology::load_live(false).layout().allowed.cpus();
        // The fake GPUs are not on this machine's PCI bus: their locality comes from a sysfs tree.
        for (auto [bus, cpu] : {std::pair{"0000:07:00.0", cpus.front()}, std::pair{"0000:0f:00.0", cpus.back()}}) {
            const auto dev = m_dir / "root/sys/bus/pci/devices" / bus;
            std::filesystem::create_directories(dev);
            std::ofstream(dev / "local_cpulist") << cpu << '\n';
            std::ofstream(dev / "numa_node") << "-1\n";
        }
        std::filesystem::create_directory(m_tmp);
        m_env = {{"PROBE_DIR", m_dir.path().string()}, {"TMPDIR", m_tmp.string()}, {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
            {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}, {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
            {"CUDA_VISIBLE_DEVICES", test_support::unset_var}, {"MASTER_ADDR", test_support::unset_var},
            {"MASTER_PORT", test_support::unset_var}, {"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH},
            {"FAKE_NVML_FIXTURE", (m_dir / "nvml.json").string()},
            {"FAKE_NVML_PROCESS_FILE", (m_dir / "processes").string()}, {"PROBE_SLEEP", "1"}};
    }

    // Two A100s; `gpu0` and `gpu1` add fields to each.
    void fixture(const nlohmann::json& gpu0, const nlohmann::json& gpu1)
    {
        nlohmann::json doc = {{"driver", "550.54.15"},
            {"gpus",
                {{{"bus_id", "00000000:07:00.0"}, {"name", "NVIDIA A100-SXM4-80GB"},
                     {"uuid", "GPU-aaaaaaaa-0000-0000-0000-000000000000"}, {"memory_total", 80 * gib}},
                    {{"bus_id", "00000000:0F:00.0"}, {"name", "NVIDIA A100-SXM4-80GB"},
                        {"uuid", "GPU-bbbbbbbb-0000-0000-0000-000000000000"}, {"memory_total", 80 * gib}}}}};
        doc["gpus"][0].update(gpu0);
        doc["gpus"][1].update(gpu1);
        std::ofstream(m_dir / "nvml.json") << doc.dump();
    }

    test_support::Finished gpurun(std::vector<std::string> args, const EnvChanges& extra = {})
    {
        args.insert(args.begin(), {"-np", "2", "--sysroot", (m_dir / "root").string()});
        args.push_back(RANK_PROBE_PATH);
        return test_support::run_with(GPURUN_PATH, std::move(args), m_env, extra);
    }

    // The private job directories left in TMPDIR.
    std::vector<std::string> leftovers() const
    {
        std::vector<std::string> found;
        for (const auto& entry : std::filesystem::directory_iterator(m_tmp)) {
            found.push_back(entry.path().filename().string());
        }
        return found;
    }

    TempDir m_dir;
    std::filesystem::path m_tmp = m_dir / "tmp";
    EnvChanges m_env;
    std::string m_host = short_host();
};

} // namespace

TEST_F(GpurunMonitor, SummaryOfAHealthyJobReachesGpurunsOutput)
{
    // GPU 0 steady at 96%; GPU 1 starts idle, then 92%, with memory peaking at 40 GiB.
    fixture({{"utilization", 96}, {"memory_used", 60 * gib}, {"power_mw", 300000}, {"clock_event_reasons", 4}},
        {{"utilization", {0, 92}}, {"memory_used", {1 * gib, 40 * gib, 30 * gib}}, {"power_mw", 250000}});
    const auto json_file = m_dir / "mon.json";
    auto r = gpurun({"--monitor=0.1", "--monitor-json", json_file.string()}, {{"PROBE_OPEN_GPU", "own"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string prefix = "gpurun: monitor: ";
    EXPECT_NE(r.err.find(prefix + m_host + ": 2 GPUs, "), std::string::npos) << r.err;
    // The verdicts are findings of the one model: severity, subject, message, code.
    // GPUs with one finding share it, each with its own message.
    EXPECT_NE(r.err.find(prefix + "PASS  gpus 0-1: the GPU ran kernels nearly all the time  [monitor.healthy]"),
        std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(prefix + "      gpu 0: healthy: kernel-active 96.0% with rare dips (0 of "), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(prefix + "      gpu 1: healthy: kernel-active 92.0% with rare dips (0 of "), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(prefix + "INFO  gpu 1 ("), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("): left out, below 5%: start-up 0.1s  [monitor.startup_left_out]"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(prefix + "one rank per GPU: ranks 0-1 kept to their own GPUs\n"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("96%  100%   0         -        60 GiB (75%)  300 W\n"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("92%  100%   0         -        40 GiB (50%)  250 W\n"), std::string::npos) << r.err;

    std::ifstream in(json_file);
    ASSERT_TRUE(in) << "no --monitor-json file";
    const auto doc = nlohmann::json::parse(in);
    EXPECT_EQ(doc["host"], m_host);
    EXPECT_EQ(doc["gpus"].size(), 2U);
    const auto& gpu0 = doc["summary"][0];
    const auto& gpu1 = doc["summary"][1];
    const unsigned samples = gpu0["samples"];
    EXPECT_GE(samples, 5U) << "ranks sleep 1 s, sampled every 0.1 s";
    EXPECT_EQ(doc["samples"].size(), 2 * samples);
    EXPECT_EQ(gpu0["kernel_active_mean"], 96.0);
    EXPECT_EQ(gpu0["kernel_active_p10"], 96);
    EXPECT_EQ(gpu0["busy_share"], 1.0);
    EXPECT_EQ(gpu0["dips"], 0);
    EXPECT_EQ(gpu0["peak_memory"], 60 * gib);
    EXPECT_EQ(gpu0["mean_power_w"], 300.0);
    EXPECT_EQ(gpu0["clock_events"]["sw_power_cap"], 1.0);
    EXPECT_EQ(gpu0["verdict"], "healthy");
    EXPECT_EQ(gpu1["judged"], samples - 1);
    EXPECT_EQ(gpu1["startup_s"], 0.1);
    EXPECT_EQ(gpu1["kernel_active_mean"], 92.0);
    EXPECT_EQ(gpu1["peak_memory"], 40 * gib);
    EXPECT_EQ(doc["ownership"]["issues"].size(), 0U);
    EXPECT_EQ(doc["stopped_job"], false);
    EXPECT_EQ(leftovers(), std::vector<std::string>{}) << "the job directory was not removed";
}

TEST_F(GpurunMonitor, RanksThatAllOpenGpuZeroAndAForeignProcessAreReported)
{
    // Another user's process on GPU 1: this test's own child.
    const pid_t other = fork();
    if (other == 0) {
        execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
        _exit(127);
    }
    fixture({{"utilization", 95}}, {{"utilization", 95}, {"processes", {other}}});
    auto r = gpurun({"--monitor=0.1"}, {{"PROBE_OPEN_GPU", "0"}});
    kill(other, SIGKILL);
    test_support::wait_for(other, std::chrono::seconds(5));
    EXPECT_EQ(r.exit_code, 0) << "--enforce warn, the default, lets the job run:\n" << r.err;
    const std::string said = "gpurun: monitor: " + m_host + ": ";
    EXPECT_NE(r.err.find(said +
                  "ranks 0-1 all opened GPU 0 (0000:07:00.0); the program ignores LOCAL_RANK: try "
                  "--gpu-visibility=isolate\n"),
        std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(said + "GPU 1 (0000:0f:00.0) is also used by pid " + std::to_string(other) +
                  " (sleep), not part of this job"),
        std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("gpurun: monitor: one rank per GPU: ranks 0-1 all opened GPU 0"), std::string::npos) << r.err;
    EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

TEST_F(GpurunMonitor, EnforceKillStopsTheJob)
{
    fixture({{"utilization", 95}}, {{"utilization", 95}});
    const auto start = std::chrono::steady_clock::now();
    auto r = gpurun({"--monitor=0.1", "--enforce=kill"}, {{"PROBE_OPEN_GPU", "0"}, {"PROBE_SLEEP", "60"}});
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_LT(took, std::chrono::seconds(20)) << "the ranks were not stopped";
    // The monitor stops the job at the first breach it sees: both ranks on GPU 0, or, when it
    // samples between the two ranks' opening, rank 1 alone on GPU 0.
    const std::string stopping = "gpurun: monitor: " + m_host + ": stopping the job (--enforce=kill): ";
    const bool both_on_gpu0 = r.err.find(stopping + "ranks 0-1 all opened GPU 0 (0000:07:00.0)") != std::string::npos;
    EXPECT_TRUE(both_on_gpu0 ||
        r.err.find(stopping + "rank 1 opened GPU 0 (0000:07:00.0), not its own GPU 1 (0000:0f:00.0)") !=
            std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("gpurun: monitor: one rank per GPU: the job was stopped (--enforce=kill)"), std::string::npos)
        << r.err;
    for (unsigned rank = 0; rank < 2; ++rank) {
        pid_t pid = 0;
        std::ifstream(m_dir / ("pid-" + std::to_string(rank))) >> pid;
        if (pid == 0 && rank == 0 && !both_on_gpu0) {
            continue; // stopped for rank 1 before rank 0 wrote its pid (a loaded machine): nothing to outlive
        }
        ASSERT_GT(pid, 0) << "rank " << rank << " wrote no pid, though the monitor saw it open a GPU";
        EXPECT_FALSE(test_support::alive(pid)) << "rank " << rank << " survived";
    }
    EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

TEST_F(GpurunMonitor, HostPidsOfAContainerAreJudgedByCounts)
{
    // NVML lists pids that are not in this PID namespace (above 2^22, Linux's largest pid_max): one
    // on GPU 0, three on GPU 1.
    fixture({{"utilization", 95}, {"processes", {4200001}}},
        {{"utilization", 95}, {"processes", {4200002, 4200003, 4200004}}});
    auto r = gpurun({"--monitor=0.1"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string said = "gpurun: monitor: " + m_host + ": ";
    EXPECT_NE(r.err.find(said +
                  "NVML shows none of the job's PIDs but 4 processes on the job's GPUs: probably a "
                  "container (NVML reports host PIDs); checking per-GPU counts only\n"),
        std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(said + "GPU 1 (0000:0f:00.0) has 3 processes for 1 rank of this job"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("GPU 0 (0000:07:00.0) has"), std::string::npos) << r.err;
}

// The job id names each node's private directory, so it is kept out of every process's arguments,
// which any user can read in /proc (or `ps`): with it, another user could make $TMPDIR/gpurun-<id>
// on a node first and so stop the job there. The ranks look for it while the job runs.
TEST_F(GpurunMonitor, TheJobIdIsInNoProcessArguments)
{
    fixture({{"utilization", 96}}, {{"utilization", 96}});
    const auto script = m_dir / "look.sh";
    std::ofstream(script) << "#!/bin/sh\n"
                             "sleep 0.5\n"
                             "id=\n"
                             "for d in \"$TMPDIR\"/gpurun-*; do id=${d##*/gpurun-}; done\n"
                             "n=0\n"
                             "for f in /proc/[0-9]*/cmdline; do\n"
                             "  case $(tr '\\000' ' ' <\"$f\" 2>/dev/null) in *\"$id\"*) n=$((n+1));; esac\n"
                             "done\n"
                             "echo \"id=$id shown=$n variable=${GPURUN_MONITOR_JOB:-unset}\" >>\"$PROBE_DIR/ids\"\n";
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    const auto r = test_support::run_with(
        GPURUN_PATH, {"-np", "2", "--sysroot", (m_dir / "root").string(), "--monitor=0.1", script.string()}, m_env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(m_dir / "ids");
    std::string line;
    unsigned lines = 0;
    while (std::getline(in, line)) {
        ++lines;
        EXPECT_TRUE(std::regex_search(line, std::regex("^id=[0-9a-f]{16} "))) << "no job directory seen: " << line;
        EXPECT_NE(line.find(" shown=0 variable=unset"), std::string::npos) << line;
    }
    EXPECT_EQ(lines, 2U);
    EXPECT_EQ(leftovers(), std::vector<std::string>{}) << "the job directory was not removed";
}
