// Golden tests of the real gpurun binary: exit code, stdout and stderr for --help, --dry-run and
// every usage error. UPDATE_GOLDEN=1 rewrites the golden files from the current output.
#include "base/process.hpp"
#include "tests/support/golden.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/topology_xml.hpp"

#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <unistd.h>

using test_support::EnvChanges;
using test_support::TempDir;

namespace {

struct Case {
    const char* name;
    std::vector<std::string> args;
    EnvChanges env;
    bool root_only = false;
};

// Test names in ctest's output, instead of the struct's bytes.
[[maybe_unused]] void PrintTo(const Case& c, std::ostream* os)
{
    *os << c.name;
}

const std::string demo = "@SOURCE@/share/gpukit/topologies/dgx-a100-like.xml";

// PATH with a stand-in nsys first (written by SetUp), so that --profile nsys finds one everywhere.
std::string path_with_nsys()
{
    const char* path = std::getenv("PATH");
    return "@TMP@/nsys-bin:" + std::string(path != nullptr ? path : "/usr/bin:/bin");
}

std::vector<Case> cases()
{
    return {
        {"help", {"--help"}, {}},
        {"version", {"--version"}, {{"GPUKIT_NCCL_LIBRARY", "/nonexistent/libnccl.so.2"}}},
        {"dry_run_text",
            {"--dry-run", "--topology", demo, "--master-port", "29500", "--", "python", "train.py", "--lr", "0.1"}, {}},
        {"dry_run_json", {"--dry-run", "--json", "--topology", demo, "--master-port", "29500", "python", "train.py"},
            {}},
        {"dry_run_two_hosts",
            {"-H", "n01:8,n02:4", "--dry-run", "--topology", demo, "--master-port", "29500", "python"}, {}},
        {"dry_run_shared_gpus",
            {"-np", "4", "--ranks-per-gpu", "2", "--gpu-visibility", "isolate", "--bind", "cores", "--cpus-per-rank",
                "2", "--sysroot", "@TMP@", "--dry-run", "--topology", demo, "--master-port", "29500", "./app", "a b"},
            {}},
        {"dry_run_visible_devices", {"--dry-run", "--topology", demo, "--master-port", "29500", "prog"},
            {{"CUDA_VISIBLE_DEVICES", "6,1"}}},
        {"dry_run_nccl_check",
            {"--dry-run", "--topology", demo, "--master-port", "29500", "--nccl-check", "python", "train.py"}, {}},
        {"dry_run_nccl_check_user_env",
            {"--dry-run", "-H", "n01:2,n02:2", "--topology", demo, "--master-port", "29500", "--nccl-check=init",
                "--nccl-log-dir", "@TMP@/nccl-logs/", "-x", "NCCL_DEBUG_SUBSYS=COLL", "python"},
            {{"NCCL_DEBUG", "WARN"}, {"NCCL_DEBUG_FILE", "/home/me/nccl.log"}}},
        {"dry_run_global_batch",
            {"--dry-run", "--topology", demo, "--master-port", "29500", "--global-batch", "96", "--speeds", "1,2,2",
                "-np", "3", "python", "train.py"},
            {}},
        {"dry_run_global_batch_json",
            {"--dry-run", "--json", "--topology", demo, "--master-port", "29500", "--global-batch", "96", "--speeds",
                "1,2,2", "-np", "3", "python", "train.py"},
            {}},
        {"dry_run_global_batch_equal",
            {"--dry-run", "--topology", demo, "--master-port", "29500", "--global-batch", "10", "-np", "4", "python"},
            {}},
        {"dry_run_monitor",
            {"--dry-run", "--topology", demo, "--master-port", "29500", "--monitor=0.5", "--monitor-json",
                "@TMP@/mon.json", "--enforce", "kill", "python", "train.py"},
            {}},
        {"dry_run_monitor_two_hosts_json",
            {"--dry-run", "--json", "-H", "n01:1,n02:1", "--topology", demo, "--master-port", "29500", "--monitor",
                "--monitor-json", "@TMP@/mon.json", "python"},
            {}},
        {"error_monitor_zero", {"--monitor=0", "prog"}, {}},
        {"error_enforce_stop", {"--monitor", "--enforce=stop", "prog"}, {}},
        {"error_monitor_json_alone", {"--monitor-json", "m.json", "prog"}, {}},
        {"error_unknown_flag", {"--bnid", "numa", "prog"}, {}},
        {"error_bad_nccl_check", {"--nccl-check=ends", "prog"}, {}},
        {"error_nccl_log_dir_alone", {"--nccl-log-dir", "logs", "prog"}, {}},
        {"error_bad_bind", {"--bind", "sockets", "prog"}, {}},
        {"error_np_zero", {"-np", "0", "prog"}, {}},
        {"error_no_program", {"-np", "2"}, {}},
        {"error_too_many_ranks", {"--topology", demo, "-np", "9", "--dry-run", "prog"}, {}},
        {"error_no_gpus_in_topology", {"--topology", "@TMP@/cpu-only.xml", "--dry-run", "prog"}, {}},
        {"error_no_visible_gpus", {"--topology", demo, "--dry-run", "prog"}, {{"CUDA_VISIBLE_DEVICES", ""}}},
        {"error_bad_visible_devices", {"--topology", demo, "--dry-run", "prog"}, {{"CUDA_VISIBLE_DEVICES", "0,9"}}},
        {"error_unreadable_topology", {"--topology", "@TMP@/missing.xml", "--dry-run", "prog"}, {}},
        {"error_not_a_topology", {"--topology", "@TMP@/hosts", "--dry-run", "prog"}, {}},
        // Input read whole has a ceiling; a directory says so.
        {"error_endless_topology", {"--topology", "/dev/zero", "--dry-run", "prog"}, {}},
        {"error_missing_sysroot", {"--topology", demo, "--sysroot", "@TMP@/missing", "--dry-run", "prog"}, {}},
        // A job's size has a ceiling: a plan of a billion ranks would run out of memory.
        {"error_np_too_many", {"--cpu-only", "-np", "4294967295", "--dry-run", "prog"}, {}},
        {"error_slots_too_many", {"--cpu-only", "-H", "n[1-1000]:1000000", "--dry-run", "prog"}, {}},
        {"error_ranks_per_gpu_too_many", {"--topology", demo, "--ranks-per-gpu", "65", "--dry-run", "prog"}, {}},
        {"error_directory_hostfile", {"--hostfile", "@TMP@", "--topology", demo, "--dry-run", "prog"}, {}},
        {"error_bad_hostfile", {"--hostfile", "@TMP@/hosts", "--topology", demo, "--dry-run", "prog"}, {}},
        {"error_speeds_without_global_batch", {"--speeds", "1,2", "prog"}, {}},
        {"error_global_batch_zero", {"--global-batch", "0", "prog"}, {}},
        {"error_bad_speeds", {"--global-batch", "8", "--speeds", "1,-2", "prog"}, {}},
        {"error_speeds_for_other_ranks",
            {"--topology", demo, "-np", "3", "--global-batch", "96", "--speeds", "1,2", "--dry-run", "prog"}, {}},
        {"error_global_batch_too_small", {"--topology", demo, "-np", "3", "--global-batch", "2", "--dry-run", "prog"},
            {}},
        {"error_missing_mpirun", {"--cpu-only", "-H", "n01:1,n02:1", "/bin/true"}, {{"PATH", "@TMP@/empty-bin"}}},
        {"run_without_mpirun_is_local", {"--cpu-only", "-np", "1", "/bin/true"}, {{"PATH", "@TMP@/empty-bin"}}},
        {"error_program_not_found", {"--cpu-only", "-np", "1", "no-such-program-xyz"}, {}},
        {"error_root_without_consent", {"--cpu-only", "-np", "1", "/bin/true"},
            {{"OMPI_ALLOW_RUN_AS_ROOT", test_support::unset_var}}, true},
        {"dry_run_profile",
            {"--dry-run", "--topology", demo, "--master-port", "29500", "--profile", "nsys", "--profile-ranks", "0,3",
                "--profile-dir", "@TMP@/prof/", "python", "train.py"},
            {{"PATH", path_with_nsys()}}},
        {"dry_run_profile_json",
            {"--dry-run", "--json", "--topology", demo, "--master-port", "29500", "-np", "2", "--profile", "nsys",
                "--profile-ranks", "all", "--profile-dir", "@TMP@/prof", "python"},
            {{"PATH", path_with_nsys()}}},
        {"dry_run_profile_no_nsys",
            {"--dry-run", "--topology", demo, "--master-port", "29500", "-np", "2", "--profile", "nsys",
                "--profile-dir", "@TMP@/prof", "/bin/true"},
            {{"PATH", "@TMP@/empty-bin"}}},
        {"error_profile_unknown", {"--profile", "nsy", "prog"}, {}},
        {"error_profile_ranks_bad", {"--profile", "nsys", "--profile-ranks", "0,x", "prog"}, {}},
        {"error_profile_ranks_alone", {"--profile-ranks", "0", "prog"}, {}},
        {"error_profile_rank_beyond",
            {"--topology", demo, "-np", "2", "--profile", "nsys", "--profile-ranks", "1-3", "--dry-run", "prog"},
            {{"PATH", path_with_nsys()}}},
        {"error_profile_no_nsys", {"--cpu-only", "-np", "1", "--profile", "nsys", "/bin/true"},
            {{"PATH", "@TMP@/empty-bin"}}},
        {"dry_run_hydra",
            {"--dry-run", "--launcher", "mpich", "-H", "n01:4,n02:4", "--topology", demo, "--master-port", "29500",
                "-x", "NCCL_DEBUG=INFO", "python"},
            {{"PATH", "@TMP@/hydra-bin"}}},
        {"dry_run_hydra_uneven",
            {"--dry-run", "-H", "n01:3,n02:1", "--topology", demo, "--master-addr", "10.0.0.1", "--master-port",
                "29500", "python"},
            {{"PATH", "@TMP@/hydra-bin"}, {"FAKE_FLAVOUR", "Intel(R) MPI Library for Linux* OS, Version 2021.10"}}},
        {"dry_run_srun_allocation",
            {"--dry-run", "--topology", demo, "--master-port", "29500", "-x", "A=b c", "python"},
            {{"PATH", "@TMP@/slurm-bin"}, {"SLURM_JOB_ID", "77"}, {"SLURM_JOB_NODELIST", "gpu[01-02]"}}},
        {"error_srun_uneven", {"--dry-run", "--topology", demo, "-np", "12", "python"},
            {{"PATH", "@TMP@/slurm-bin"}, {"SLURM_JOB_ID", "77"}, {"SLURM_JOB_NODELIST", "gpu[01-02]"}}},
        {"dry_run_launcher_args",
            {"--dry-run", "--cpu-only", "-np", "2", "--launcher-args", "--mca btl '^openib' -x 'A=b c'", "--topology",
                demo, "--master-port", "29500", "prog"},
            {}},
        {"error_launcher_args_expansion", {"--launcher-args", "--mca btl $BTL", "prog"}, {}},
        {"error_bad_launcher", {"--launcher", "mpch", "prog"}, {}},
        {"dry_run_pack",
            {"--dry-run", "--hostfile", "@TMP@/pack-hosts", "-np", "12", "--pack", "--topology", demo, "--master-port",
                "29500", "python"},
            {}},
        {"dry_run_pack_free_gpus_json",
            {"--dry-run", "--json", "-H", "n01,n02,n03", "--free-gpus", "n01:2,n02:0,n03:6", "-np", "6", "--pack",
                "--topology", demo, "--master-port", "29500", "python"},
            {}},
        {"dry_run_spread",
            {"--dry-run", "-H", "n01:2,n02:8", "-np", "8", "--topology", demo, "--master-port", "29500",
                "--nic-binding", "nccl", "python"},
            {}},
        {"error_pack_without_np", {"--pack", "-H", "n01,n02", "prog"}, {}},
        {"error_pack_too_few", {"--dry-run", "--pack", "-H", "n01:2,n02:2", "-np", "5", "--topology", demo, "prog"},
            {}},
        {"error_free_gpus_without_pack", {"--free-gpus", "n01:2", "prog"}, {}},
        {"dry_run_host_topologies",
            {"--dry-run", "-H", "n01,n02", "--topology", demo, "--topology", "n02=@TMP@/two-gpus.xml", "--master-port",
                "29500", "python"},
            {}},
        {"error_host_topology_real_run", {"-H", "n01,n02", "--topology", "n02=@TMP@/two-gpus.xml", "prog"}, {}},
        {"error_host_topology_unknown_host",
            {"--dry-run", "-H", "n01,n02", "--topology", demo, "--topology", "n03=@TMP@/two-gpus.xml", "prog"}, {}},
        {"error_bad_nic_binding", {"--nic-binding", "rdma", "prog"}, {}},
        {"dry_run_json_not_utf8",
            {"--dry-run", "--json", "--cpu-only", "-np", "1", "--topology", demo, "--master-port", "29500", "prog",
                "caf\xe9"},
            {}},
    };
}

class GpurunCli : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override
    {
        test_support::TopologyXml t("cpunode");
        t.package();
        t.numa(0, 0, 4);
        t.write(m_dir / "cpu-only.xml");
        std::ofstream(m_dir / "hosts") << "n01 slots=8\nn02 slots=eight\n";
        std::filesystem::create_directory(m_dir / "empty-bin");
        std::filesystem::create_directory(m_dir / "nsys-bin");
        std::ofstream(m_dir / "nsys-bin/nsys") << "#!/bin/sh\nexit 0\n";
        std::filesystem::permissions(m_dir / "nsys-bin/nsys", std::filesystem::perms::owner_all);
        // Stand-ins that answer --version like MPICH's Hydra (or $FAKE_FLAVOUR) and like srun.
        std::filesystem::create_directory(m_dir / "hydra-bin");
        for (const char* name : {"mpirun", "mpiexec"}) {
            std::ofstream(m_dir / "hydra-bin" / name) << "#!/bin/sh\necho \"${FAKE_FLAVOUR:-HYDRA build details:}\"\n";
            std::filesystem::permissions(m_dir / "hydra-bin" / name, std::filesystem::perms::owner_all);
        }
        std::filesystem::create_directory(m_dir / "slurm-bin");
        std::ofstream(m_dir / "slurm-bin/srun") << "#!/bin/sh\necho 'slurm 23.02.7'\n";
        std::filesystem::permissions(m_dir / "slurm-bin/srun", std::filesystem::perms::owner_all);
        std::ofstream(m_dir / "pack-hosts") << "# four nodes\nn01 slots=4\nn02 slots=8\nn03 slots=2\nn04:8\n";
        // Another kind of node: two NUMA nodes of 4 cores, a GPU and an HCA on each.
        test_support::TopologyXml two("small");
        two.package();
        two.numa(0, 0, 4);
        two.numa(0, 1, 4);
        two.gpu(test_support::TopologyXml::at_numa(0), "0000:65:00.0");
        two.hca(test_support::TopologyXml::at_numa(0), "0000:66:00.0", "mlx5_0");
        two.gpu(test_support::TopologyXml::at_numa(1), "0000:b3:00.0");
        two.hca(test_support::TopologyXml::at_numa(1), "0000:b4:00.0", "mlx5_1");
        two.write(m_dir / "two-gpus.xml");
    }

    std::string expand(const std::string& s) const
    {
        return test_support::replace_all(
            test_support::replace_all(s, "@SOURCE@", GPUKIT_SOURCE_DIR), "@TMP@", m_dir.path().string());
    }

    std::string normalise(std::string s) const
    {
        s = test_support::replace_all(s, m_dir.path().string(), "@TMP@");
        s = test_support::replace_all(s, GPUKIT_BUILD_DIR, "@BUILD@");
        s = test_support::replace_all(s, GPUKIT_SOURCE_DIR, "@SOURCE@");
        if (auto mpirun = base::find_executable("mpirun", std::getenv("PATH"))) {
            s = test_support::replace_all(s, *mpirun + " ", "@MPIRUN@ ");
            s = test_support::replace_all(s, "\"" + *mpirun + "\"", "\"@MPIRUN@\"");
        }
        return s;
    }

    TempDir m_dir;
};

} // namespace

TEST_P(GpurunCli, MatchesGolden)
{
    const Case& c = GetParam();
    if (c.root_only && geteuid() != 0) {
        GTEST_SKIP() << "only meaningful as root";
    }
    std::vector<std::string> argv{GPURUN_PATH};
    for (const auto& a : c.args) {
        argv.push_back(expand(a));
    }
    EnvChanges env{{"CUDA_VISIBLE_DEVICES", test_support::unset_var},
        {"CUDA_MPS_PIPE_DIRECTORY", test_support::unset_var}, {"MASTER_ADDR", test_support::unset_var},
        {"MASTER_PORT", test_support::unset_var}, {"GPUKIT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"},
        {"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
        {"LD_LIBRARY_PATH", test_support::unset_var}, {"COLUMNS", "100"}, {"NCCL_DEBUG", test_support::unset_var},
        {"NCCL_DEBUG_SUBSYS", test_support::unset_var}, {"NCCL_DEBUG_FILE", test_support::unset_var}};
    // The variables gpurun passes to other hosts are listed in the plan: none of the caller's.
    const std::string passed_prefixes[] = {"NCCL_", "UCX_", "CUDA_", "PYTHON", "TORCH", "HF_", "OMP_", "GPUKIT_"};
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string name(*e, std::strcspn(*e, "="));
        for (const auto& prefix : passed_prefixes) {
            if (name.rfind(prefix, 0) == 0 && env.count(name) == 0) {
                env[name] = test_support::unset_var;
            }
        }
    }
    for (const auto& [k, v] : c.env) {
        env[k] = v == test_support::unset_var ? v : expand(v);
    }
    auto r = test_support::run(argv, env, std::chrono::seconds(30));
    ASSERT_FALSE(r.timed_out) << c.name;
    const std::string actual = normalise(test_support::golden_text(r));
    test_support::expect_golden(std::filesystem::path(GPUKIT_SOURCE_DIR) / "tests/cli/golden", c.name, actual);
}

INSTANTIATE_TEST_SUITE_P(Golden, GpurunCli, ::testing::ValuesIn(cases()),
    [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });

TEST(GpurunOutput, AWriteErrorOnStandardOutputIsExitThree)
{
    if (!std::filesystem::exists("/dev/full")) {
        GTEST_SKIP() << "no /dev/full here";
    }
    // The plan cannot be written (a full disk): exit 3 with a message, not 0 with nothing.
    auto r =
        test_support::run({"/bin/sh", "-c", "exec \"$0\" --cpu-only --dry-run -np 2 true > /dev/full", GPURUN_PATH}, {},
            std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("gpurun: cannot write the output: No space left on device"), std::string::npos) << r.err;
}

// hwloc's time to load a topology grows faster than its objects (a 14 MB XML ran for minutes in
// gpurun, gpudoctor check and topo): loading has a deadline, GPUKIT_TOPOLOGY_TIMEOUT seconds.
TEST(GpurunTopology, LoadingAHugeTopologyHasADeadline)
{
    test_support::TempDir dir;
    const auto xml = dir / "huge.xml";
    {
        // 100,000 PCI devices on a two-PU machine (14 MB): hwloc inserts each among the others, so
        // its time grows with their square: 2.2 s for 30,000 on a 2-core EPYC VM, 10.5 s for
        // 60,000. Far past the 1 s deadline on any machine, and far under the 64 MiB ceiling.
        constexpr unsigned devices = 100000;
        std::ofstream out(xml);
        out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
               "<topology version=\"2.0\">\n"
               "<object type=\"Machine\" os_index=\"0\" cpuset=\"0x00000003\" complete_cpuset=\"0x00000003\" "
               "allowed_cpuset=\"0x00000003\" nodeset=\"0x1\" complete_nodeset=\"0x1\" allowed_nodeset=\"0x1\" "
               "gp_index=\"1\">\n<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00000003\" "
               "complete_cpuset=\"0x00000003\" nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"2\" "
               "local_memory=\"1000000\"/>\n";
        for (unsigned pu = 0; pu < 2; ++pu) {
            out << fmt::format(
                "<object type=\"PU\" os_index=\"{0}\" cpuset=\"0x{1:08x}\" complete_cpuset=\"0x{1:08x}\" "
                "nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"{2}\"/>\n",
                pu, 1U << pu, pu + 3);
        }
        for (unsigned d = 0; d < devices; ++d) {
            out << fmt::format("<object type=\"PCIDev\" gp_index=\"{}\" pci_busid=\"{:04x}:{:02x}:{:02x}.0\" "
                               "pci_type=\"0000 [0000:0000] [0000:0000] 00\" pci_link_speed=\"0.000000\"/>\n",
                d + 5, d >> 13, (d >> 5) & 0xff, d & 0x1f);
        }
        out << "</object>\n</topology>\n";
    }
    const auto start = std::chrono::steady_clock::now();
    auto r = test_support::run({GPURUN_PATH, "--topology", xml.string(), "--cpu-only", "-np", "1", "--dry-run", "true"},
        {{"GPUKIT_TOPOLOGY_TIMEOUT", "1"}}, std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(r.err,
        "gpurun: loading the topology " + xml.string() +
            " took over 1 s; hwloc's time grows fast with the number of objects: is it the right file? Set "
            "GPUKIT_TOPOLOGY_TIMEOUT=SECONDS to wait longer\n");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
    r = test_support::run({GPURUN_PATH, "--cpu-only", "-np", "1", "--dry-run", "true"},
        {{"GPUKIT_TOPOLOGY_TIMEOUT", "0x10"}}, std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "gpurun: GPUKIT_TOPOLOGY_TIMEOUT='0x10': expected whole seconds from 1 to 86400\n");
}
