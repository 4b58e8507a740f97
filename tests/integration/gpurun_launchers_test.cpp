// gpurun with launchers other than Open MPI: MPICH's and Intel MPI's Hydra mpiexec and Slurm's
// srun, stood in for by tests/support/fake_launcher.cpp on PATH. The fake starts every rank here,
// with the variables the real launcher gives, and logs the command line it got; it refuses options
// it does not know, so a wrong command line fails the job.
#include "tests/support/process.hpp"
#include "tests/support/rank_files.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <thread>
#include <unistd.h>

using test_support::EnvChanges;
using test_support::TempDir;

namespace {

using Values = test_support::RankValues;
using test_support::one;
using test_support::read_rank;
using Argv = std::vector<std::string>;

std::string joined(const Argv& argv)
{
    std::string out;
    for (const auto& a : argv) {
        out += (out.empty() ? "" : " ") + a;
    }
    return out;
}

/// Whether `words` appear in `argv` one after the other.
bool has_words(const Argv& argv, const Argv& words)
{
    return std::search(argv.begin(), argv.end(), words.begin(), words.end()) != argv.end();
}

/// Whether `argv` has `--opt value` or `--opt=value`.
bool has_option(const Argv& argv, const std::string& opt, const std::string& value)
{
    return has_words(argv, {opt, value}) || has_words(argv, {opt + "=" + value});
}

std::string basename(const std::string& path)
{
    return std::filesystem::path(path).filename().string();
}

/// Whether `gpurun --help` lists --launcher: these tests wait for it.
bool gpurun_has_launcher()
{
    static const bool has = test_support::run({GPURUN_PATH, "--help"}).out.find("--launcher") != std::string::npos;
    return has;
}

// Four ranks, two on each host: the job's variables, and the launcher's own rank variable
// (`launcher_rank`) showing which launcher started them.
void expect_two_ranks_per_host(const TempDir& dir, const std::string& launcher_rank,
    const std::pair<std::string, std::string>& hosts, const std::string& master)
{
    for (unsigned rank = 0; rank < 4; ++rank) {
        auto v = read_rank(dir, rank);
        SCOPED_TRACE("rank " + std::to_string(rank));
        EXPECT_EQ(one(v, "RANK"), std::to_string(rank));
        EXPECT_EQ(one(v, launcher_rank), std::to_string(rank)) << "started by the fake launcher";
        EXPECT_EQ(one(v, "WORLD_SIZE"), "4");
        EXPECT_EQ(one(v, "LOCAL_RANK"), std::to_string(rank % 2));
        EXPECT_EQ(one(v, "LOCAL_WORLD_SIZE"), "2");
        EXPECT_EQ(one(v, "FAKE_LAUNCHER_HOST"), rank < 2 ? hosts.first : hosts.second);
        EXPECT_EQ(one(v, "MASTER_ADDR"), master);
    }
}

class GpurunLaunchers : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!gpurun_has_launcher()) {
            GTEST_SKIP() << "needs --launcher: gpurun --help does not list it";
        }
        std::filesystem::create_directory(m_bin);
        m_env = {{"PROBE_DIR", m_dir.path().string()}, {"FAKE_LAUNCHER_LOG", m_log.string()},
            {"PATH", m_bin.string() + ":" + std::getenv("PATH")}, {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
            {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}, {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"}};
        // Nothing from the environment the tests run in may pick the launcher or number the ranks.
        for (const char* name : {"CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT",
                 "FAKE_HYDRA_FLAVOUR", "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
                 "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE",
                 "SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE", "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_LOCALID",
                 "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"}) {
            m_env[name] = test_support::unset_var;
        }
    }

    /// Puts the fake launcher on PATH under these names.
    void fake(std::initializer_list<const char*> names) const
    {
        for (const char* name : names) {
            std::filesystem::create_symlink(FAKE_LAUNCHER_PATH, m_bin / name);
        }
    }

    test_support::Finished gpurun(std::vector<std::string> args, const EnvChanges& extra = {})
    {
        return test_support::run_with(GPURUN_PATH, std::move(args), m_env, extra, std::chrono::seconds(30));
    }

    /// Every command line the fakes got, in order; each starts with argv[0], a fake's name or path.
    std::vector<Argv> invocations() const
    {
        std::vector<Argv> out;
        std::ifstream in(m_log);
        std::string line;
        while (std::getline(in, line)) {
            const std::string name = basename(line);
            const bool argv0 = (name == "mpiexec" || name == "mpirun" || name == "srun") &&
                (line == name || line.rfind(m_bin.string() + "/", 0) == 0);
            if (argv0 || out.empty()) {
                out.emplace_back();
            }
            out.back().push_back(line);
        }
        return out;
    }

    /// The one command line that started ranks (not a --version or --mpi=list question); empty if none.
    Argv launch() const
    {
        Argv found;
        for (auto& argv : invocations()) {
            if (argv.size() > 1 && argv[1] != "--version" && argv[1] != "--mpi=list") {
                EXPECT_TRUE(found.empty()) << "launched twice: " << joined(found) << " and " << joined(argv);
                found = argv;
            }
        }
        return found;
    }

    TempDir m_dir;
    std::filesystem::path m_bin = m_dir / "bin";
    std::filesystem::path m_log = m_dir / "launcher.log";
    EnvChanges m_env;
};

} // namespace

TEST_F(GpurunLaunchers, HydraUniformHostsGetPpnAndNoBinding)
{
    fake({"mpiexec", "mpirun"});
    auto r = gpurun({"--launcher", "mpich", "--cpu-only", "-np", "4", "-H", "a:2,b:2", "--master-addr", "10.0.0.1",
        RANK_PROBE_PATH});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_two_ranks_per_host(m_dir, "PMI_RANK", {"a", "b"}, "10.0.0.1");
    const Argv argv = launch();
    ASSERT_FALSE(argv.empty()) << "no mpiexec command logged";
    EXPECT_EQ(basename(argv[0]), "mpiexec");
    EXPECT_TRUE(has_words(argv, {"-ppn", "2", "-hosts", "a,b"})) << joined(argv);
    EXPECT_TRUE(has_words(argv, {"-bind-to", "none"})) << joined(argv);
    EXPECT_FALSE(has_words(argv, {"I_MPI_PIN"})) << joined(argv);
}

TEST_F(GpurunLaunchers, IntelMpiIsToldNotToPin)
{
    fake({"mpiexec", "mpirun"});
    auto r = gpurun({"--launcher", "mpich", "--cpu-only", "-np", "4", "-H", "a:2,b:2", "--master-addr", "10.0.0.1",
                        RANK_PROBE_PATH},
        {{"FAKE_HYDRA_FLAVOUR", "intel"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(one(read_rank(m_dir, 3), "PMI_RANK"), "3");
    const Argv argv = launch();
    ASSERT_FALSE(argv.empty()) << "no mpiexec command logged";
    EXPECT_TRUE(has_words(argv, {"-genv", "I_MPI_PIN", "0"})) << joined(argv);
    EXPECT_FALSE(has_words(argv, {"-bind-to"})) << "Intel MPI's Hydra pins with I_MPI_PIN: " << joined(argv);
}

TEST_F(GpurunLaunchers, HydraUnevenHostsGetOneSectionEach)
{
    fake({"mpiexec", "mpirun"});
    auto r = gpurun({"--launcher", "mpich", "--cpu-only", "-np", "4", "-H", "a:3,b:1", "--master-addr", "10.0.0.1",
        RANK_PROBE_PATH});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (unsigned rank = 0; rank < 4; ++rank) {
        auto v = read_rank(m_dir, rank);
        SCOPED_TRACE("rank " + std::to_string(rank));
        EXPECT_EQ(one(v, "RANK"), std::to_string(rank));
        EXPECT_EQ(one(v, "WORLD_SIZE"), "4");
        EXPECT_EQ(one(v, "LOCAL_RANK"), rank < 3 ? std::to_string(rank) : "0");
        EXPECT_EQ(one(v, "LOCAL_WORLD_SIZE"), rank < 3 ? "3" : "1");
        EXPECT_EQ(one(v, "FAKE_LAUNCHER_HOST"), rank < 3 ? "a" : "b");
    }
    const Argv argv = launch();
    ASSERT_FALSE(argv.empty()) << "no mpiexec command logged";
    EXPECT_TRUE(has_words(argv, {"-n", "3", "-hosts", "a"})) << joined(argv);
    EXPECT_TRUE(has_words(argv, {":", "-n", "1", "-hosts", "b"})) << joined(argv);
    EXPECT_FALSE(has_words(argv, {"-ppn"})) << joined(argv);
}

TEST_F(GpurunLaunchers, AutoDetectsHydraFromMpirunVersion)
{
    fake({"mpiexec", "mpirun"});
    auto r = gpurun({"--cpu-only", "-np", "2", RANK_PROBE_PATH});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(one(read_rank(m_dir, 1), "PMI_RANK"), "1") << "the ranks were started by the fake Hydra";
    EXPECT_EQ(one(read_rank(m_dir, 1), "LOCAL_WORLD_SIZE"), "2");
    const Argv argv = launch();
    ASSERT_FALSE(argv.empty()) << "no launch logged";
    EXPECT_EQ(basename(argv[0]), "mpiexec") << joined(argv);
}

TEST_F(GpurunLaunchers, SlurmAllocationUsesSrunUnlessOpenMpiIsAsked)
{
    fake({"srun"});
    const EnvChanges slurm = {{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_NODELIST", "node[1-2]"}};
    auto r = gpurun({"--cpu-only", "-np", "4", RANK_PROBE_PATH}, slurm);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_two_ranks_per_host(m_dir, "SLURM_PROCID", {"node1", "node2"}, "node1");
    Argv argv = launch();
    ASSERT_FALSE(argv.empty()) << "no srun command logged";
    EXPECT_EQ(basename(argv[0]), "srun");
    EXPECT_TRUE(has_option(argv, "--nodes", "2")) << joined(argv);
    EXPECT_TRUE(has_option(argv, "--ntasks", "4")) << joined(argv);
    EXPECT_TRUE(has_option(argv, "--ntasks-per-node", "2")) << joined(argv);
    EXPECT_TRUE(has_option(argv, "--cpu-bind", "none")) << joined(argv);

    // The same allocation with --launcher openmpi: Open MPI's mpirun, no srun.
    std::filesystem::remove(m_log);
    auto dry = gpurun({"--launcher", "openmpi", "--cpu-only", "-np", "2", "--dry-run", RANK_PROBE_PATH}, slurm);
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_NE(dry.out.find("launcher: Open MPI mpirun"), std::string::npos) << dry.out;
    EXPECT_EQ(dry.out.find("srun"), std::string::npos) << dry.out;
    // A real run: gpurun puts the ranks on the allocation's first node, which must be this one.
    char host[256] = {};
    ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
    std::filesystem::remove(m_dir / "rank-0.txt");
    auto o = gpurun({"--launcher", "openmpi", "--cpu-only", "-np", "2", RANK_PROBE_PATH},
        {{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_NODELIST", host}});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_TRUE(invocations().empty()) << "a fake ran: " << joined(invocations().front());
    auto v = read_rank(m_dir, 0);
    EXPECT_EQ(one(v, "RANK"), "0");
    EXPECT_EQ(one(v, "SLURM_PROCID"), "<unset>");
    EXPECT_EQ(one(v, "LOCAL_WORLD_SIZE"), "2");
}

TEST_F(GpurunLaunchers, ExitStatusThroughHydra)
{
    fake({"mpiexec", "mpirun"});
    auto r = gpurun({"--launcher", "mpich", "--cpu-only", "-np", "2", RANK_PROBE_PATH},
        {{"PROBE_EXIT_RANK", "1"}, {"PROBE_EXIT", "3"}});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_EQ(basename(launch().at(0)), "mpiexec");
}

TEST_F(GpurunLaunchers, SigintThroughHydraLeavesNoRankBehind)
{
    fake({"mpiexec", "mpirun"});
    EnvChanges env = m_env;
    env["PROBE_SLEEP"] = "60";
    pid_t pid = test_support::start(
        {GPURUN_PATH, "--launcher", "mpich", "--cpu-only", "-np", "2", "--grace", "3", RANK_PROBE_PATH}, env,
        (m_dir / "gpurun.log").string());
    std::vector<pid_t> ranks = test_support::wait_for_rank_pids(m_dir, 2, std::chrono::milliseconds(15000));
    if (ranks.size() < 2) {
        FAIL() << "the ranks did not start; gpurun said:\n" << test_support::kill_and_read(pid, m_dir / "gpurun.log");
    }
    const auto stopped = test_support::interrupt(pid, std::chrono::seconds(10));
    EXPECT_EQ(stopped.code, 128 + SIGINT);
    EXPECT_LT(stopped.took, std::chrono::seconds(8));
    for (pid_t p : ranks) {
        for (int i = 0; i < 50 && test_support::alive(p); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        EXPECT_FALSE(test_support::alive(p)) << "rank process " << p << " survived gpurun";
        if (test_support::alive(p)) {
            kill(p, SIGKILL);
        }
    }
    EXPECT_EQ(one(read_rank(m_dir, 0), "PMI_RANK"), "0") << "the ranks were started by the fake mpiexec";
}
