// gpurun with the real Open MPI mpirun: real ranks, real binding on this machine, checked from
// inside each rank.
#include "base/cpu_set.hpp"
#include "base/topology.hpp"
#include "launcher/node_handoff.hpp"
#include "tests/support/fake_nvml_fixture.hpp"
#include "tests/support/process.hpp"
#include "tests/support/rank_files.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

using test_support::EnvChanges;
using test_support::TempDir;

namespace {

using Values = test_support::RankValues;
using test_support::one;
using test_support::read_rank;

std::vector<pid_t> survivors(const std::vector<pid_t>& pids, std::chrono::milliseconds limit);
pid_t read_pid(const std::filesystem::path& file);

class GpurunMpirun : public ::testing::Test {
protected:
    void SetUp() override
    {
        auto topology = base::Topology::load_live(false);
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

    /// Starts gpurun --grace 1 with 2 CPU-only ranks that sleep, `extra` in their environment;
    /// returns gpurun's pid and, once they are running, the ranks' (fewer if they did not start).
    std::pair<pid_t, std::vector<pid_t>> start_sleeping_ranks(
        const EnvChanges& extra, const std::vector<std::string>& options = {})
    {
        EnvChanges env = m_env;
        env["PROBE_SLEEP"] = "120";
        for (const auto& [k, v] : extra) {
            env[k] = v;
        }
        std::vector<std::string> argv = {GPURUN_PATH, "--cpu-only", "-np", "2", "--grace", "1"};
        argv.insert(argv.end(), options.begin(), options.end());
        argv.emplace_back(RANK_PROBE_PATH);
        const pid_t pid = test_support::start(argv, env, (m_dir / "gpurun.log").string());
        return {pid, test_support::wait_for_rank_pids(m_dir, 2, std::chrono::milliseconds(15000))};
    }

    /// PATH with MPICH's Hydra found as "mpiexec" first, as on a machine with only MPICH; empty
    /// when MPICH is not installed.
    std::string hydra_path()
    {
        const std::filesystem::path hydra = "/usr/bin/mpiexec.hydra";
        if (!std::filesystem::exists(hydra)) {
            return "";
        }
        const auto bin = m_dir / "mpich-bin";
        if (!std::filesystem::exists(bin)) {
            std::filesystem::create_directories(bin);
            std::filesystem::create_symlink(hydra, bin / "mpiexec");
            // Hydra starts its proxy from the directory it was run from.
            std::filesystem::create_symlink("/usr/bin/hydra_pmi_proxy", bin / "hydra_pmi_proxy");
        }
        return bin.string() + ":/usr/bin:/bin";
    }

    /// A program whose rank 1 writes "bad input" to stderr and exits 3 at once, while every other
    /// rank writes its pid to PROBE_DIR/sleeper-<RANK> and sleeps for two minutes.
    std::string failing_program()
    {
        const auto script = m_dir / "fail.sh";
        std::ofstream(script) << "#!/bin/sh\nif [ \"$RANK\" = 1 ]; then echo 'bad input' >&2; exit 3; fi\n"
                                 "echo $$ > \"$PROBE_DIR/sleeper-$RANK\"\nexec sleep 120\n";
        std::filesystem::permissions(script, std::filesystem::perms::owner_all);
        return script.string();
    }

    /// Runs failing_program() on 2 ranks with `options`, and checks that the job stopped early,
    /// with rank 1's status, named it as the first to fail, and left no rank: what --json-summary
    /// wrote is returned.
    nlohmann::json expect_fail_fast(const std::vector<std::string>& options, const EnvChanges& extra = {})
    {
        const auto summary = m_dir / "summary.json";
        std::vector<std::string> args = {"--cpu-only", "-np", "2", "--grace", "1", "--json-summary", summary.string()};
        args.insert(args.end(), options.begin(), options.end());
        args.push_back(failing_program());
        const auto started = std::chrono::steady_clock::now();
        auto r = gpurun(args, extra);
        EXPECT_EQ(r.exit_code, 3) << r.err;
        EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20)) << "the job ran on";
        EXPECT_NE(r.err.find(", local rank 1) failed first: exit status 3 after "), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(" s; last lines of its stderr:\n  | bad input\n"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find(") failed: "), std::string::npos) << "the helper's own report is taken out: " << r.err;
        const pid_t sleeper = read_pid(m_dir / "sleeper-0");
        EXPECT_TRUE(sleeper <= 0 || survivors({sleeper}, std::chrono::seconds(1)).empty()) << "rank 0 ran on";
        std::ifstream in(summary);
        EXPECT_TRUE(in.good()) << "no " << summary;
        return in.good() ? nlohmann::json::parse(in) : nlohmann::json();
    }

    TempDir m_dir;
    EnvChanges m_env;
    base::CpuSet m_cpus;
};

} // namespace

TEST_F(GpurunMpirun, MpirunFoundThroughBinOfAMergedUsrRunsAsTheUsersWould)
{
    // Open MPI takes an absolute argv[0] for --prefix: run as /bin/mpirun, it gets the prefix "/"
    // and aborts ("A prefix was supplied to mpirun that only contained slashes"); typed as mpirun
    // with the same PATH, it runs.
    std::error_code ec;
    if (!std::filesystem::is_symlink("/bin", ec) || !std::filesystem::exists("/bin/mpirun", ec)) {
        GTEST_SKIP() << "needs a merged /usr (/bin a link to usr/bin) with Open MPI's mpirun";
    }
    auto r =
        gpurun({"--cpu-only", "-np", "2", "--launcher", "openmpi", RANK_PROBE_PATH}, {{"PATH", "/usr/local/bin:/bin"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(one(read_rank(m_dir, 1), "WORLD_SIZE"), "2");
    auto dry = gpurun({"--cpu-only", "-np", "2", "--launcher", "openmpi", "--dry-run", "--json", "true"},
        {{"PATH", "/usr/local/bin:/bin"}});
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    const auto plan = nlohmann::json::parse(dry.out);
    EXPECT_EQ(plan["command"][0], "mpirun") << "run by the name PATH found it by";
    EXPECT_EQ(plan["launcher"]["path"], "/bin/mpirun") << "the plan still says which file that is";
}

TEST_F(GpurunMpirun, CpuOnlyRanksGetDisjointCoresAndTheirVariables)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "--master-port", "29411", RANK_PROBE_PATH});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    base::CpuSet seen;
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
        auto cpus = base::CpuSet::parse(one(v, "Cpus_allowed_list"));
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

TEST_F(GpurunMpirun, HelpersBindFromThePlanHandedForThisNodeAndNeverFromAnotherOrAStaleOne)
{
    // One rank, planned by hand onto the last allowed CPU only: the helper's own plan would give
    // it every allowed CPU.
    const std::string last = std::to_string(m_cpus.cpus().back());
    launcher::NodePlan plan;
    plan.ranks.resize(1);
    plan.ranks[0].cpus = base::CpuSet::parse(last);
    plan.ranks[0].cores = 1;
    const std::string helper = (std::filesystem::path(GPURUN_PATH).parent_path() / "gpurun-rank").string();
    EnvChanges by_hand = {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
        {launcher::node_plan_variable, launcher::write_node_plan(launcher::this_node_key(nullptr), plan)}};
    auto r = test_support::run_with(helper, {"--cpu-only", "--", RANK_PROBE_PATH}, m_env, by_hand);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto v = read_rank(m_dir, 0);
    EXPECT_EQ(one(v, "GPURUN_CPUS"), last) << "the handed plan, not the helper's own";
    EXPECT_EQ(one(v, "Cpus_allowed_list"), last) << "and bound so";
    EXPECT_EQ(one(v, "GPURUN_NODE_PLAN"), "<unset>") << "the program does not see it";

    launcher::NodeKey elsewhere = launcher::this_node_key(nullptr);
    elsewhere.host += "-other";
    by_hand[launcher::node_plan_variable] = launcher::write_node_plan(elsewhere, plan);
    r = test_support::run_with(helper, {"--cpu-only", "--", RANK_PROBE_PATH}, m_env, by_hand);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    v = read_rank(m_dir, 0);
    EXPECT_EQ(one(v, "GPURUN_CPUS"), m_cpus.to_list()) << "a plan for another host is not used";
    EXPECT_EQ(one(v, "GPURUN_NODE_PLAN"), "<unset>");

    // A value left in gpurun's environment (both ranks on one CPU) is replaced by the job's own.
    plan.ranks.resize(2, plan.ranks[0]);
    plan.ranks[1].local_rank = 1;
    r = gpurun({"--cpu-only", "-np", "2", RANK_PROBE_PATH},
        {{launcher::node_plan_variable, launcher::write_node_plan(launcher::this_node_key(nullptr), plan)}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto cpus0 = base::CpuSet::parse(one(read_rank(m_dir, 0), "Cpus_allowed_list"));
    const auto cpus1 = base::CpuSet::parse(one(read_rank(m_dir, 1), "Cpus_allowed_list"));
    EXPECT_FALSE(cpus0.intersects(cpus1)) << cpus0.to_list() << " and " << cpus1.to_list();
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

// --- The rank helper stays as the rank's parent: output, failures, and nothing left behind ------

namespace {

/// Waits up to `limit` for every pid to be gone; returns those still alive (and SIGKILLs them).
std::vector<pid_t> survivors(const std::vector<pid_t>& pids, std::chrono::milliseconds limit)
{
    const auto until = std::chrono::steady_clock::now() + limit;
    std::vector<pid_t> left;
    do {
        left.clear();
        for (pid_t p : pids) {
            if (test_support::alive(p)) {
                left.push_back(p);
            }
        }
        if (left.empty()) {
            return left;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (std::chrono::steady_clock::now() < until);
    for (pid_t p : left) {
        std::ifstream cmdline("/proc/" + std::to_string(p) + "/cmdline");
        std::string words((std::istreambuf_iterator<char>(cmdline)), {});
        std::replace(words.begin(), words.end(), '\0', ' ');
        ADD_FAILURE() << "still running: " << p << ' ' << words;
        kill(p, SIGKILL);
    }
    return left;
}

pid_t read_pid(const std::filesystem::path& file)
{
    pid_t p = 0;
    for (int i = 0; i < 300 && p == 0; ++i) {
        std::ifstream(file) >> p;
        if (p == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    return p;
}

/// The direct children of `parent`, from /proc.
std::vector<pid_t> children_of(pid_t parent)
{
    std::vector<pid_t> out;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const std::string name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        std::ifstream stat(entry.path() / "stat");
        std::string text((std::istreambuf_iterator<char>(stat)), {});
        const auto close = text.rfind(')');
        char state = 0;
        long ppid = 0;
        if (close != std::string::npos && std::sscanf(text.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 &&
            ppid == parent) {
            out.push_back(static_cast<pid_t>(std::stol(name)));
        }
    }
    return out;
}

std::vector<std::string> lines_of(const std::string& text)
{
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    return lines;
}

} // namespace

TEST_F(GpurunMpirun, TagOutputPutsTheRankBeforeEveryLineOfBothStreams)
{
    auto r = gpurun({"--cpu-only", "-np", "2", "--tag-output", RANK_PROBE_PATH}, {{"PROBE_PRINT", "3"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* rank : {"0", "1"}) {
        for (int i = 1; i <= 3; ++i) {
            const std::string n = std::to_string(i);
            EXPECT_NE(r.out.find(std::string("[") + rank + "] out " + n + " of " + rank + "\n"), std::string::npos)
                << r.out;
            EXPECT_NE(r.err.find(std::string("[") + rank + "] err " + n + " of " + rank + "\n"), std::string::npos)
                << r.err;
        }
    }
    for (const auto& line : lines_of(r.out)) {
        EXPECT_TRUE(line.rfind("[0] ", 0) == 0 || line.rfind("[1] ", 0) == 0) << line;
    }
}

TEST_F(GpurunMpirun, TagOutputPassesBinaryAndLongLinesWithOnePrefixEach)
{
    constexpr std::size_t long_line = (1U << 20) + 4096; // over 1 MiB
    auto r = gpurun(
        {"--cpu-only", "-np", "1", "--tag-output", RANK_PROBE_PATH}, {{"PROBE_LONG_LINE", std::to_string(long_line)}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string expected = "[0] " + std::string(long_line, 'x') + "\n[0] ";
    for (int b = 0; b < 256; ++b) {
        expected += static_cast<char>(b);
        if (b == '\n') {
            expected += "[0] ";
        }
    }
    EXPECT_EQ(r.out.size(), expected.size());
    EXPECT_TRUE(r.out == expected) << "the bytes differ (sizes " << r.out.size() << " and " << expected.size() << ")";
}

TEST_F(GpurunMpirun, LogDirKeepsEachRanksStreamsAndTheTerminalStillGetsThem)
{
    const auto logs = m_dir / "logs" / "run1"; // made, with its parent
    auto r = gpurun({"--cpu-only", "-np", "2", "--log-dir", logs.string(), RANK_PROBE_PATH}, {{"PROBE_PRINT", "2"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto read = [&](const std::string& name) {
        std::ifstream in(logs / name);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    EXPECT_EQ(read("rank0.out"), "out 1 of 0\nout 2 of 0\n");
    EXPECT_EQ(read("rank1.err"), "err 1 of 1\nerr 2 of 1\n");
    EXPECT_NE(r.out.find("out 2 of 1\n"), std::string::npos) << r.out;
    EXPECT_EQ(
        std::filesystem::status(logs).permissions() & std::filesystem::perms::others_all, std::filesystem::perms::none);
}

TEST_F(GpurunMpirun, ALogDirThatIsAFileOrAnotherUsersIsExitTwoBeforeAnythingStarts)
{
    const auto file = m_dir / "afile";
    std::ofstream(file) << "x";
    auto r = gpurun({"--cpu-only", "-np", "1", "--log-dir", file.string(), RANK_PROBE_PATH});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--log-dir"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(m_dir / "rank-0.txt")) << "a rank ran";
    r = gpurun({"--cpu-only", "-np", "1", "--log-dir", "", RANK_PROBE_PATH});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "gpurun: --log-dir '': expected a directory\n");
    if (geteuid() == 0) {
        const auto theirs = m_dir / "theirs";
        std::filesystem::create_directory(theirs);
        ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
        r = gpurun({"--cpu-only", "-np", "1", "--log-dir", theirs.string(), RANK_PROBE_PATH});
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_FALSE(std::filesystem::exists(theirs / "rank0.out"));
    }
}

TEST_F(GpurunMpirun, AFailedRankIsNamedWithItsStatusAndTheLastLinesOfItsStderr)
{
    auto r = gpurun({"--cpu-only", "-np", "2", RANK_PROBE_PATH},
        {{"PROBE_EXIT_RANK", "1"}, {"PROBE_EXIT", "3"}, {"PROBE_PRINT", "25"}});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    const auto at = r.err.find("gpurun: rank 1 (");
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string report = r.err.substr(at);
    EXPECT_NE(report.find(", local rank 1) failed first: exit status 3 after "), std::string::npos) << report;
    EXPECT_NE(report.find(" s; last lines of its stderr:\n  | err 6 of 1\n"), std::string::npos) << report;
    EXPECT_NE(report.find("  | err 25 of 1\n"), std::string::npos) << report;
    EXPECT_EQ(report.find("  | err 5 of 1\n"), std::string::npos) << "20 lines, not more: " << report;
    EXPECT_EQ(r.err.find("gpurun: rank 0 ("), std::string::npos) << "rank 0 did not fail: " << r.err;
}

TEST_F(GpurunMpirun, ADaemonARankStartedDoesNotOutliveTheJob)
{
    auto r = gpurun({"--cpu-only", "-np", "2", RANK_PROBE_PATH}, {{"PROBE_DAEMON", "1"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const pid_t d0 = read_pid(m_dir / "daemon-0");
    const pid_t d1 = read_pid(m_dir / "daemon-1");
    ASSERT_GT(d0, 0);
    ASSERT_GT(d1, 0);
    EXPECT_TRUE(survivors({d0, d1}, std::chrono::seconds(3)).empty()) << "a rank's daemon is still running";
}

TEST_F(GpurunMpirun, KillNineOfGpurunLeavesNoProcessOfTheJob)
{
    auto [pid, job] = start_sleeping_ranks({{"PROBE_DAEMON", "1"}});
    ASSERT_EQ(job.size(), 2U) << "ranks did not start";
    for (const char* daemon : {"daemon-0", "daemon-1"}) {
        job.push_back(read_pid(m_dir / daemon));
    }
    for (pid_t launcher : children_of(pid)) {
        job.push_back(launcher);
    }
    kill(pid, SIGKILL);
    test_support::wait_for(pid, std::chrono::seconds(5));
    EXPECT_TRUE(survivors(job, std::chrono::seconds(1 + 2 + 2)).empty())
        << "a process of the job outlived gpurun by more than --grace + 2 s";
}

TEST_F(GpurunMpirun, KillNineOfTheLauncherLeavesNoRank)
{
    auto [pid, ranks] = start_sleeping_ranks({{"PROBE_DAEMON", "1"}});
    ASSERT_EQ(ranks.size(), 2U) << "ranks did not start";
    for (const char* daemon : {"daemon-0", "daemon-1"}) {
        ranks.push_back(read_pid(m_dir / daemon));
    }
    const auto launchers = children_of(pid);
    ASSERT_EQ(launchers.size(), 1U);
    kill(launchers[0], SIGKILL);
    EXPECT_NE(test_support::wait_for(pid, std::chrono::seconds(10)), -1) << "gpurun did not end with its launcher";
    EXPECT_TRUE(survivors(ranks, std::chrono::seconds(1 + 2)).empty()) << "a rank outlived mpirun";
    kill(pid, SIGKILL);
}

TEST_F(GpurunMpirun, ARankThatIgnoresSigtermIsKilledAfterTheGrace)
{
    const auto [pid, ranks] = start_sleeping_ranks({{"PROBE_IGNORE_TERM", "1"}});
    ASSERT_EQ(ranks.size(), 2U) << "ranks did not start";
    const auto done = test_support::interrupt(pid, std::chrono::seconds(10));
    EXPECT_EQ(done.code, 128 + SIGINT);
    EXPECT_TRUE(survivors(ranks, std::chrono::seconds(2)).empty()) << "a rank ignoring SIGTERM survived";
}

// --- gpurun's own launcher: no MPI ---------------------------------------------------------------

TEST_F(GpurunMpirun, WithoutMpiTheLocalLauncherStartsTheRanksWithTheirVariablesAndBinding)
{
    // No mpirun in PATH: auto takes gpurun's own launcher for a job on this node.
    auto r = gpurun({"--cpu-only", "-np", "2", "--report-bindings", RANK_PROBE_PATH}, {{"PATH", "/nonexistent"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    base::CpuSet seen;
    for (unsigned rank = 0; rank < 2; ++rank) {
        auto v = read_rank(m_dir, rank);
        EXPECT_EQ(one(v, "RANK"), std::to_string(rank));
        EXPECT_EQ(one(v, "LOCAL_RANK"), std::to_string(rank));
        EXPECT_EQ(one(v, "WORLD_SIZE"), "2");
        const auto cpus = base::CpuSet::parse(one(v, "Cpus_allowed_list"));
        EXPECT_TRUE(cpus.intersect(seen).empty()) << "ranks share CPUs";
        seen = seen.unite(cpus);
    }
    EXPECT_NE(r.err.find("local rank 1): no gpu; cpus"), std::string::npos) << r.err;
    auto dry = gpurun({"--cpu-only", "-np", "2", "--dry-run", RANK_PROBE_PATH}, {{"PATH", "/nonexistent"}});
    EXPECT_NE(dry.out.find("launcher: gpurun's own (no MPI) (no mpirun in PATH, and every rank is on this node)"),
        std::string::npos)
        << dry.out;
    auto remote = gpurun({"--launcher", "local", "--cpu-only", "-H", "n01:1,n02:1", RANK_PROBE_PATH});
    EXPECT_EQ(remote.exit_code, 2);
    EXPECT_NE(remote.err.find("--launcher local starts ranks on this node only"), std::string::npos) << remote.err;
}

TEST_F(GpurunMpirun, TheLocalLauncherStopsTheJobWhenTheFirstRankFails)
{
    const auto summary = expect_fail_fast({"--launcher", "local"});
    ASSERT_TRUE(summary.is_object());
    EXPECT_EQ(summary["exit_status"], 3) << summary;
    const std::string launcher = summary["launcher"]["command"][0];
    EXPECT_EQ(std::filesystem::path(launcher).filename(), "gpurun-rank") << summary;
}

TEST_F(GpurunMpirun, KillNineOfGpurunWithTheLocalLauncherLeavesNoRank)
{
    auto [pid, job] = start_sleeping_ranks({{"PROBE_DAEMON", "1"}}, {"--launcher", "local"});
    ASSERT_EQ(job.size(), 2U) << "ranks did not start";
    for (const char* daemon : {"daemon-0", "daemon-1"}) {
        job.push_back(read_pid(m_dir / daemon));
    }
    kill(pid, SIGKILL);
    test_support::wait_for(pid, std::chrono::seconds(5));
    EXPECT_TRUE(survivors(job, std::chrono::seconds(1 + 2)).empty());
}

// --- every launcher: the first failing rank stops the job and is named ------------------------

TEST_F(GpurunMpirun, TheFirstFailingRankStopsAnOpenMpiJobAndTheSummarySaysWhoAndHow)
{
    const auto summary = expect_fail_fast({});
    ASSERT_TRUE(summary.is_object());
    EXPECT_EQ(summary["exit_status"], 3);
    EXPECT_EQ(summary["ranks"], 2);
    EXPECT_TRUE(summary["signal"].is_null());
    const auto& first = summary["first_failure"];
    EXPECT_EQ(first["rank"], 1) << summary;
    EXPECT_EQ(first["local_rank"], 1);
    EXPECT_EQ(first["ending"], "exit status 3");
    EXPECT_EQ(first["exit_status"], 3);
    EXPECT_GE(first["seconds"].get<double>(), 0.0);
    EXPECT_LT(first["seconds"].get<double>(), 20.0);
    EXPECT_EQ(first["stderr_tail"], nlohmann::json::array({"bad input"}));
    EXPECT_FALSE(first["host"].get<std::string>().empty());
    EXPECT_EQ(summary["failures"].size(), 1U) << "rank 0 was stopped, it did not fail: " << summary;
    const std::string launcher = summary["launcher"]["command"][0];
    EXPECT_EQ(std::filesystem::path(launcher).filename(), "mpirun") << summary;
}

TEST_F(GpurunMpirun, TheFirstFailingRankStopsAnMpichHydraJob)
{
    // MPICH's Hydra waits for every rank when one exits non-zero without MPI_Abort: gpurun stops it.
    const std::string path = hydra_path();
    if (path.empty()) {
        GTEST_SKIP() << "MPICH is not installed (/usr/bin/mpiexec.hydra; Debian package mpich)";
    }
    const auto summary = expect_fail_fast({"--launcher", "mpich"}, {{"PATH", path}});
    ASSERT_TRUE(summary.is_object());
    EXPECT_EQ(summary["first_failure"]["rank"], 1) << summary;
    EXPECT_EQ(summary["launcher"]["command"][0], "mpiexec") << summary;
}

TEST_F(GpurunMpirun, ASummaryFileThatCannotBeWrittenIsExitTwoBeforeAnythingStarts)
{
    for (const std::string& file : {(m_dir / "no" / "such" / "dir.json").string(), std::string()}) {
        auto r = gpurun({"--cpu-only", "-np", "2", "--json-summary", file, RANK_PROBE_PATH});
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find("--json-summary"), std::string::npos) << r.err;
        EXPECT_FALSE(std::filesystem::exists(m_dir / "rank-0.txt")) << "a rank started";
    }
    // A job that succeeds writes its summary too.
    const auto file = m_dir / "ok.json";
    auto ok = gpurun({"--cpu-only", "-np", "2", "--json-summary", file.string(), RANK_PROBE_PATH});
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    std::ifstream in(file);
    const auto summary = nlohmann::json::parse(in);
    EXPECT_EQ(summary["exit_status"], 0);
    EXPECT_EQ(summary["launcher"]["exit_status"], 0);
    EXPECT_TRUE(summary["first_failure"].is_null());
    EXPECT_EQ(summary["failures"], nlohmann::json::array());
}

// --- real PyTorch (Debian's python3-torch): gloo all-reduce over env:// ------------------------

namespace {

constexpr const char* system_python = "/usr/bin/python3";

/// Whether the system Python has torch.distributed with gloo.
bool have_torch()
{
    const auto r =
        test_support::run({system_python, "-c", "import torch.distributed as d; assert d.is_gloo_available()"}, {},
            std::chrono::seconds(60));
    return r.exit_code == 0;
}

/// A training step as a user writes it for env:// without torchrun: every rank adds rank+1 in a
/// gloo all-reduce and prints what it found; with FAIL_RANK set, that rank raises after joining.
const char* const torch_program = R"(
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
if os.environ.get("FAIL_RANK") == str(rank):
    raise ValueError("bad batch in rank %d" % rank)
if os.environ.get("FAIL_RANK"):
    time.sleep(1)  # the others reach the all-reduce later, and fail on the closed connection
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print("rank %d/%d local %s/%s group %s/%s sum %g" % (rank, world, os.environ["LOCAL_RANK"],
      os.environ["LOCAL_WORLD_SIZE"], os.environ["GROUP_RANK"], os.environ["GROUP_WORLD_SIZE"], t.item()), flush=True)
dist.destroy_process_group()
)";

} // namespace

TEST_F(GpurunMpirun, RealPyTorchAllReducesOverEnvUnderEveryLauncher)
{
    if (!have_torch()) {
        GTEST_SKIP() << system_python << " has no torch.distributed with gloo (Debian package python3-torch)";
    }
    const auto script = m_dir / "train.py";
    std::ofstream(script) << torch_program;
    std::vector<std::pair<std::vector<std::string>, EnvChanges>> runs = {{{"--launcher", "local"}, {}}, {{}, {}}};
    if (const std::string path = hydra_path(); !path.empty()) {
        runs.push_back({{"--launcher", "mpich"}, {{"PATH", path}}});
    }
    for (const auto& [options, env] : runs) {
        std::vector<std::string> args = {"--cpu-only", "-np", "2", "--tag-output"};
        args.insert(args.end(), options.begin(), options.end());
        args.insert(args.end(), {system_python, script.string()});
        const auto r = gpurun(args, env);
        const std::string launcher = options.empty() ? "openmpi" : options[1];
        ASSERT_EQ(r.exit_code, 0) << launcher << ": " << r.err;
        EXPECT_NE(r.out.find("[0] rank 0/2 local 0/2 group 0/1 sum 3\n"), std::string::npos)
            << launcher << ": " << r.out;
        EXPECT_NE(r.out.find("[1] rank 1/2 local 1/2 group 0/1 sum 3\n"), std::string::npos)
            << launcher << ": " << r.out;
    }
}

TEST_F(GpurunMpirun, AFailingPyTorchRankIsNamedWithItsTraceback)
{
    if (!have_torch()) {
        GTEST_SKIP() << system_python << " has no torch.distributed with gloo (Debian package python3-torch)";
    }
    const auto script = m_dir / "train.py";
    std::ofstream(script) << torch_program;
    const auto summary = m_dir / "summary.json";
    const auto started = std::chrono::steady_clock::now();
    // Rank 0 waits in the all-reduce for rank 1, which is gone.
    const auto r = gpurun(
        {"--cpu-only", "-np", "2", "--grace", "2", "--json-summary", summary.string(), system_python, script.string()},
        {{"FAIL_RANK", "1"}});
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60)) << "the job ran on";
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(", local rank 1) failed first: exit status 1 after "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("  | ValueError: bad batch in rank 1\n"), std::string::npos) << r.err;
    std::ifstream in(summary);
    const auto json = nlohmann::json::parse(in);
    EXPECT_EQ(json["first_failure"]["rank"], 1) << json;
    EXPECT_GT(json["first_failure"]["failed_at"].get<double>(), 1.7e9) << json;
    EXPECT_EQ(json["first_failure"]["stderr_tail"].back(), "ValueError: bad batch in rank 1") << json;
}

// --- MPICH's Hydra: nothing outlives gpurun -----------------------------------------------------

TEST_F(GpurunMpirun, UnderHydraSigintAndKillNineLeaveNoRank)
{
    const std::string path = hydra_path();
    if (path.empty()) {
        GTEST_SKIP() << "MPICH is not installed (/usr/bin/mpiexec.hydra; Debian package mpich)";
    }
    {
        const auto [pid, ranks] = start_sleeping_ranks({{"PATH", path}}, {"--launcher", "mpich"});
        ASSERT_EQ(ranks.size(), 2U) << "ranks did not start";
        const auto done = test_support::interrupt(pid, std::chrono::seconds(10));
        EXPECT_EQ(done.code, 128 + SIGINT);
        EXPECT_TRUE(survivors(ranks, std::chrono::seconds(1 + 2)).empty()) << "a rank outlived SIGINT to gpurun";
    }
    for (const std::string victim : {"gpurun", "mpiexec"}) {
        std::filesystem::remove_all(m_dir / "pid-0");
        std::filesystem::remove_all(m_dir / "pid-1");
        // Killed, mpiexec leaves its proxies to SIGKILL the helpers: a daemon that left the
        // program's session is then stopped by the helper's watcher.
        auto [pid, job] = start_sleeping_ranks({{"PATH", path}, {"PROBE_DAEMON", "1"}}, {"--launcher", "mpich"});
        ASSERT_EQ(job.size(), 2U) << "ranks did not start";
        for (const char* daemon : {"daemon-0", "daemon-1"}) {
            job.push_back(read_pid(m_dir / daemon));
        }
        const auto launchers = children_of(pid);
        ASSERT_EQ(launchers.size(), 1U);
        kill(victim == "gpurun" ? pid : launchers[0], SIGKILL);
        test_support::wait_for(pid, std::chrono::seconds(10));
        EXPECT_TRUE(survivors(job, std::chrono::seconds(1 + 2 + 2)).empty())
            << "a process of the job outlived a SIGKILL of " << victim;
        kill(pid, SIGKILL);
    }
}
