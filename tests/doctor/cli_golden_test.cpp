// Golden tests of the real gpudoctor binary: exit code, stdout and stderr. Every run is made
// deterministic: a fake NVML (or none), hwloc XML topologies and a sysroot written here.
// UPDATE_GOLDEN=1 rewrites the golden files from the current output (review the diff).
#include "tests/support/fake_gpu_node.hpp"
#include "tests/support/golden.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/topology_xml.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>
#include <unistd.h>

using test_support::EnvChanges;
using test_support::TempDir;

namespace {

struct Case {
    const char* name;
    std::vector<std::string> args;
    EnvChanges env;
};

[[maybe_unused]] void PrintTo(const Case& c, std::ostream* os)
{
    *os << c.name;
}

const std::string demo = "@SOURCE@/share/gpukit/topologies/dgx-a100-like.xml";
const std::string fake_nvml = "@FAKE_NVML@";
const std::vector<std::string> host_free = {
    "--only", "driver,gpus,topology,p2p,network,nccl-env", "--sysroot", "@TMP@/root"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b)
{
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

const std::vector<std::string> deep = {"check", "--no-color", "--deep", "--only", "bandwidth,allreduce", "--sysroot",
    "@TMP@/deeproot", "--policy", "@TMP@/deep.toml"};
const EnvChanges deep_env = {{"GPUKIT_CUDA_LIBRARY", "@FAKE_CUDA@"}, {"GPUKIT_NCCL_LIBRARY", "@FAKE_NCCL@"},
    {"FAKE_CUDA_DEVICE_COUNT", "2"}, {"FAKE_CUDA_NAMES", "NVIDIA RTX A6000"}, {"FAKE_CUDA_H2D_GBPS", "24.5,11"},
    {"FAKE_CUDA_D2H_GBPS", "26"}, {"FAKE_CUDA_D2D_GBPS", "700"}, {"FAKE_CUDA_P2P_GBPS", "40"},
    {"FAKE_NCCL_ALGBW_GBPS", "20"}, {"FAKE_NCCL_TRANSPORT", "SHM/direct/direct"}, {"FAKE_NCCL_HOSTNAME", "gpu-node"},
    {"TMPDIR", "@TMP@/deeptmp"}};

std::vector<Case> cases()
{
    return {
        {"help", {"--help"}, {}},
        // --version: hwloc, and the NVIDIA driver and NCCL through the loaders (missing, then the fakes).
        {"version", {"--version"}, {{"GPUKIT_NCCL_LIBRARY", "/nonexistent/libnccl.so.2"}}},
        {"version_fakes", {"--version"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/healthy.json"},
                {"GPUKIT_NCCL_LIBRARY", "@FAKE_NCCL@"}, {"FAKE_NCCL_VERSION", "22105"}}},
        // --fail-summary: the one line the Slurm scripts use as the drain reason.
        {"fail_summary", with({"check", "--fail-summary", "--topology", demo}, host_free),
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/node.json"}}},
        {"fail_summary_fit",
            {"check", "--fail-summary", "--only", "driver,gpus", "--topology", demo, "--sysroot", "@TMP@/root"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/healthy.json"}}},
        {"list", {"list"}, {}},
        // Each subcommand's help ends with its own exit statuses, not check's.
        {"snapshot_help", {"snapshot", "--help"}, {}},
        {"fleet_help", {"fleet", "--help"}, {}},
        {"topo_help", {"topo", "--help"}, {}},
        {"explain", {"explain", "gpus.throttled"}, {}},
        {"explain_typo", {"explain", "gpus.throtled"}, {}},
        {"only_typo", {"check", "--only", "gpu,netwrk"}, {}},
        // Every subcommand speaks alike: a typo of a subcommand or an option gets the closest
        // name and the subcommand's own --help; --no-color is taken by every one of them.
        {"subcommand_typo", {"chek"}, {}},
        {"option_typo", {"check", "--onl", "gpus"}, {}},
        {"nccl_log_option_typo", {"nccl-log", "--jsn", "@TMP@/job.log"}, {}},
        {"explain_lists_the_codes", {"explain", "--no-color"}, {}},
        {"list_no_color", {"list", "--no-color"}, {}},
        {"topo_no_color", {"topo", "--no-color", "--topology", "@TMP@/cpu.xml"}, {}},
        {"fit_no_color",
            {"fit", "--no-color", "--model", "resnet50", "--gpu-mem", "16GiB", "--precision", "fp32", "--optimizer",
                "sgd"},
            {}},
        {"bad_timeout", {"check", "--timeout", "0"}, {}},
        {"missing_sysroot", {"check", "--sysroot", "@TMP@/missing"}, {}},
        {"skip_everything", {"check", "--only", "driver,gpus", "--skip", "driver,gpus"}, {}},
        {"empty_only", {"check", "--only", ""}, {}},
        {"bad_policy", {"check", "--policy", "@TMP@/bad.toml"}, {}},
        {"no_driver_text", with({"check", "--no-color", "--topology", "@TMP@/cpu.xml"}, host_free), {}},
        {"cpu_node_expected",
            with({"check", "--no-color", "--expect-gpus", "0", "--topology", "@TMP@/cpu.xml"}, host_free), {}},
        {"fake_node_text", with({"check", "--no-color", "--topology", demo}, host_free),
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/node.json"}}},
        {"grouped_findings",
            {"check", "--no-color", "--only", "driver,gpus", "--topology", demo, "--sysroot", "@TMP@/root"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/persistence_off.json"}}},
        // Only the job's GPUs are judged: --gpus, or CUDA_VISIBLE_DEVICES when it is set.
        {"check_gpus_chosen",
            {"check", "--no-color", "--only", "driver,gpus,p2p", "--topology", demo, "--sysroot", "@TMP@/root",
                "--gpus", "1,0000:4e:00.0"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/node.json"}}},
        {"check_gpus_from_environment",
            {"check", "--json", "--only", "gpus,p2p", "--topology", demo, "--sysroot", "@TMP@/root"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/node.json"},
                {"CUDA_VISIBLE_DEVICES", "5"}}},
        {"check_gpus_not_here", {"check", "--only", "gpus", "--topology", demo, "--gpus", "8"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/node.json"}}},
        {"fit_gpus_chosen",
            {"fit", "--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw", "--gpus", "1", "--global-batch",
                "8"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/fit_nvml.json"}}},
        {"fit_gpus_model_name",
            {"fit", "--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw", "--gpus", "V100"}, {}},
        {"fake_node_quiet_strict", with({"check", "--quiet", "--strict", "--topology", demo}, host_free),
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/healthy.json"}}},
        {"fake_node_json", with({"check", "--json", "--expect-gpus", "8", "--topology", demo}, host_free),
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/node.json"}}},
        {"nccl_log_text", {"nccl-log", "--no-color", "@TMP@/job.log"}, {}},
        {"nccl_log_json", {"nccl-log", "--json", "@TMP@/job.log"}, {}},
        {"nccl_log_fail_on_warn", {"nccl-log", "--fail-on", "warn", "@TMP@/job.log", "@TMP@/app.log"}, {}},
        {"nccl_log_fail_on_fail", {"nccl-log", "--fail-on", "fail", "@TMP@/job.log"}, {}},
        {"nccl_log_failing_finding", {"nccl-log", "--no-color", "@TMP@/hang.log"}, {}},
        {"nccl_log_quiet", {"nccl-log", "--quiet", "--no-color", "@TMP@/job.log", "@TMP@/hang.log"}, {}},
        {"nccl_log_no_records", {"nccl-log", "--no-color", "@TMP@/app.log"}, {}},
        {"nccl_log_missing", {"nccl-log", "@TMP@/job.log", "@TMP@/missing.log"}, {}},
        {"nccl_log_bad_fail_on", {"nccl-log", "--fail-on", "wran", "@TMP@/job.log"}, {}},
        {"nccl_log_no_file", {"nccl-log"}, {}},
        {"nccl_log_directory", {"nccl-log", "--no-color", "@TMP@/logs"}, {}},
        {"nccl_log_empty_directory", {"nccl-log", "@TMP@/logs/empty"}, {}},
        {"nccl_log_example", {"nccl-log", "--no-color", "@SOURCE@/share/gpukit/examples/nccl-two-nodes.log"}, {}},
        {"explain_nccl", {"explain", "nccl.ib_without_gdr"}, {}},
        // gpudoctor fit, analytic.
        {"fit_help", {"fit", "--help"}, {}},
        {"fit_list", {"fit", "--list"}, {}},
        {"fit_bert_large_amp_16gib",
            {"fit", "--model", "bert-large", "--precision", "amp", "--optimizer", "adam", "--gpu-mem", "16GiB"}, {}},
        {"fit_llama7b_nothing_fits",
            {"fit", "--model", "llama-7b", "--precision", "bf16", "--optimizer", "adamw", "--gpu-mem", "24GB"}, {}},
        // Nothing fits is a fail finding: exit 1; --quiet prints only the problems.
        {"fit_quiet_nothing_fits",
            {"fit", "--model", "llama-7b", "--precision", "bf16", "--optimizer", "adamw", "--gpu-mem", "24GB",
                "--quiet"},
            {}},
        // ZeRO over one GPU is a warning: exit 0, and 1 with --fail-on warn.
        {"fit_zero_one_gpu",
            {"fit", "--model", "resnet50", "--precision", "amp", "--optimizer", "sgd", "--gpu-mem", "16GiB", "--zero",
                "1"},
            {}},
        {"fit_zero_one_gpu_fail_on_warn",
            {"fit", "--model", "resnet50", "--precision", "amp", "--optimizer", "sgd", "--gpu-mem", "16GiB", "--zero",
                "1", "--fail-on", "warn", "--quiet"},
            {}},
        {"fit_junit_with_search", {"fit", "--search", "--junit", "@TMP@/fit.xml", "--", "true", "{batch}"}, {}},
        {"fit_llama7b_zero3_json",
            {"fit", "--model", "llama-7b", "--precision", "bf16", "--optimizer", "adamw", "--zero", "3", "--gpu-count",
                "8", "--recompute", "full", "--gpu-mem", "80GB", "--base-lr", "3e-4", "--base-batch", "64", "--json"},
            {}},
        {"fit_resnet50_k80_v100",
            {"fit", "--model", "resnet50", "--precision", "fp32", "--optimizer", "momentum", "--gpu-model", "K80,V100",
                "--global-batch", "96", "--base-lr", "0.1", "--base-batch", "256"},
            {}},
        {"fit_huge_base_lr",
            {"fit", "--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw", "--gpu-mem", "16GiB", "--base-lr",
                "1e308", "--base-batch", "1", "--global-batch", "4294967295"},
            {}},
        {"fit_resnet50_k80_v100_v100_json",
            {"fit", "--model", "resnet50", "--precision", "fp32", "--optimizer", "momentum", "--gpu-model",
                "K80,V100,V100", "--global-batch", "96", "--json"},
            {}},
        {"fit_layers_k80_v100",
            {"fit", "--params", "1.5B", "--layers", "48", "--hidden", "1600", "--heads", "25", "--seq", "1024",
                "--precision", "fp16", "--optimizer", "adam", "--gpu-model", "K80,V100"},
            {}},
        {"fit_speeds_sgd",
            {"fit", "--model", "densenet121", "--precision", "amp", "--optimizer", "sgd", "--gpu-count", "3",
                "--gpu-mem", "16GiB", "--speeds", "1,2,2"},
            {}},
        {"fit_gpu_mem_auto", {"fit", "--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/fit_nvml.json"}}},
        {"fit_gpu_mem_auto_count",
            {"fit", "--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw", "--gpu-count", "4", "--json"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/fit_nvml.json"}}},
        {"fit_no_nvml", {"fit", "--model", "gpt2", "--precision", "bf16", "--optimizer", "adamw"}, {}},
        {"fit_models_file",
            {"fit", "--models", "@TMP@/models.toml", "--model", "my-vit", "--precision", "bf16", "--optimizer", "adamw",
                "--gpu-mem", "40000MiB"},
            {}},
        {"fit_bad_model", {"fit", "--model", "bert-lage", "--precision", "amp", "--optimizer", "adam"}, {}},
        {"fit_bad_gpu",
            {"fit", "--model", "resnet50", "--precision", "amp", "--optimizer", "sgd", "--gpu-model", "K80,V10O"}, {}},
        {"fit_ambiguous_gpu",
            {"fit", "--model", "resnet50", "--precision", "amp", "--optimizer", "sgd", "--gpu-model", "A100"}, {}},
        {"fit_bad_precision",
            {"fit", "--model", "gpt2", "--precision", "fp61", "--optimizer", "adam", "--gpu-mem", "16GiB"}, {}},
        {"fit_bad_size", {"fit", "--model", "gpt2", "--precision", "amp", "--optimizer", "adam", "--gpu-mem", "16GX"},
            {}},
        {"fit_bad_params", {"fit", "--params", "7Q", "--precision", "amp", "--optimizer", "adam"}, {}},
        {"fit_partial_shape", {"fit", "--params", "7B", "--layers", "32", "--precision", "amp", "--optimizer", "adam"},
            {}},
        {"fit_unknown_option", {"fit", "--model", "gpt2", "--zeor", "1"}, {}},
        {"fit_speeds_mismatch",
            {"fit", "--model", "gpt2", "--precision", "amp", "--optimizer", "adam", "--gpu-count", "2", "--gpu-mem",
                "16GiB", "--speeds", "1,2,2"},
            {}},
        {"fit_no_model", {"fit", "--precision", "amp"}, {}},
        // The deep tier against the fake libcuda and libnccl: two PCIe GPUs, one with a slow
        // host link, NCCL on SHM; then one GPU, which has no pairs and no all-reduce.
        {"deep_fake_text", deep, deep_env},
        {"deep_fake_json", with(deep, {"--json"}), deep_env},
        {"deep_single_gpu",
            {"check", "--no-color", "--deep", "--only", "bandwidth,allreduce", "--sysroot", "@TMP@/deeproot",
                "--policy", "@TMP@/deep.toml"},
            {{"GPUKIT_CUDA_LIBRARY", "@FAKE_CUDA@"}, {"GPUKIT_NCCL_LIBRARY", "@FAKE_NCCL@"},
                {"FAKE_CUDA_DEVICE_COUNT", "1"}, {"FAKE_CUDA_NAMES", "NVIDIA H200"}, {"FAKE_CUDA_H2D_GBPS", "55"},
                {"FAKE_CUDA_D2H_GBPS", "55"}, {"FAKE_CUDA_D2D_GBPS", "3000"}}},
        {"deep_and_quick", {"check", "--quick", "--deep"}, {}},
        {"deep_bad_timeout", {"check", "--deep", "--deep-timeout", "-1"}, {}},
        {"explain_deep", {"explain", "bandwidth.h2d_low"}, {}},
        // gpudoctor monitor against the fake NVML's sampling sequences: a steady GPU, one that waits
        // on its input, an idle one. Samples follow the schedule, not the clock: the output is exact.
        {"monitor_help", {"monitor", "--help"}, {}},
        {"monitor_duration", {"monitor", "--interval", "0.1", "--duration", "0.5"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/monitor_nvml.json"}}},
        {"monitor_json", {"monitor", "--interval", "0.1", "--duration", "0.3", "--json", "--gpus", "1"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/monitor_nvml.json"}}},
        {"monitor_bad_gpu", {"monitor", "--duration", "1", "--gpus", "0,5"},
            {{"GPUKIT_NVML_LIBRARY", fake_nvml}, {"FAKE_NVML_FIXTURE", "@TMP@/monitor_nvml.json"}}},
        {"monitor_no_nvml", {"monitor", "--duration", "1"}, {}},
        {"monitor_bad_interval", {"monitor", "--interval", "0.05", "--duration", "1"}, {}},
        {"monitor_unknown_option", {"monitor", "--intervall", "1"}, {}},
        {"monitor_duration_and_command", {"monitor", "--duration", "1", "--", "true"}, {}},
    };
}

class GpudoctorCli : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override
    {
        test_support::TopologyXml cpu("cpunode");
        cpu.package();
        cpu.numa(0, 0, 4);
        cpu.write(m_dir / "cpu.xml");
        // An InfiniBand port that is up but slow, another that is down; no GPUDirect module.
        for (auto [port, state, phys, rate] : {std::tuple{"mlx5_0", "4: ACTIVE", "5: LinkUp", "56 Gb/sec (4X FDR)"},
                 std::tuple{"mlx5_1", "1: DOWN", "3: Disabled", "10 Gb/sec (4X SDR)"}}) {
            auto dir = m_dir / "root/sys/class/infiniband" / port / "ports/1";
            std::filesystem::create_directories(dir);
            std::ofstream(dir / "state") << state << '\n';
            std::ofstream(dir / "phys_state") << phys << '\n';
            std::ofstream(dir / "rate") << rate << '\n';
            std::ofstream(dir / "link_layer") << "InfiniBand\n";
        }
        std::filesystem::create_directories(m_dir / "root/sys/class/net/ib0");
        std::filesystem::create_directories(m_dir / "root/proc");
        std::ofstream(m_dir / "root/proc/cmdline") << "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro\n";
        auto node = test_support::healthy_gpu_node();
        std::ofstream(m_dir / "healthy.json") << node.dump();
        // Persistence off on every GPU but one: one warning line for seven GPUs, its fix once.
        for (unsigned gpu = 0; gpu < 8; ++gpu) {
            node["gpus"][gpu]["persistence"] = gpu == 4 ? 1 : 0;
        }
        std::ofstream(m_dir / "persistence_off.json") << node.dump();
        node = test_support::healthy_gpu_node();
        node["gpus"][1]["ecc"]["uncorrected"] = 4;
        node["gpus"][1]["ecc"]["uncorrected_volatile"] = 4;
        node["gpus"][3]["clock_event_reasons"] = 0x40;
        node["gpus"][5]["pcie"]["width"] = 8;
        node["gpus"][6]["persistence"] = 0;
        node["p2p"] = {{"0-7", {{"read", 0}, {"write", 2}}}};
        std::ofstream(m_dir / "node.json") << node.dump();
        std::ofstream(m_dir / "bad.toml") << "[gpus]\nexpected = \"eight\"\n";
        // The deep tier: small sizes (the fake does no real work, but the numbers stay short), and
        // both GPUs' PCIe links, Gen4 x16 (the second trained down to Gen3 x8).
        std::ofstream(m_dir / "deep.toml") << "[deep]\ncopy_mib = 64\ncopies = 4\nsamples = 3\nallreduce_mib = 256\n";
        for (auto [bus, speed, width] :
            {std::tuple{"0000:07:00.0", "16.0 GT/s PCIe", 16}, std::tuple{"0000:0f:00.0", "8.0 GT/s PCIe", 8}}) {
            auto dir = m_dir / "deeproot/sys/bus/pci/devices" / bus;
            std::filesystem::create_directories(dir);
            std::ofstream(dir / "max_link_speed") << "16.0 GT/s PCIe\n";
            std::ofstream(dir / "max_link_width") << "16\n";
            std::ofstream(dir / "current_link_speed") << speed << "\n";
            std::ofstream(dir / "current_link_width") << width << "\n";
        }
        std::filesystem::create_directories(m_dir / "deeptmp");
        // gpudoctor fit: two 80 GiB A100s joined by NVLink, the second with 32 GiB in use; a
        // user's model file.
        std::ofstream(m_dir / "fit_nvml.json") << R"({"gpus": [
  {"bus_id": "00000000:07:00.0", "name": "NVIDIA A100-SXM4-80GB", "memory_total": 85899345920,
   "compute_capability": "8.0", "nvlinks": ["00000000:0F:00.0"]},
  {"bus_id": "00000000:0F:00.0", "name": "NVIDIA A100-SXM4-80GB", "memory_total": 85899345920,
   "memory_used": 34359738368, "compute_capability": "8.0", "nvlinks": ["00000000:07:00.0"]}]})";
        std::ofstream(m_dir / "monitor_nvml.json") << R"({"gpus": [
  {"bus_id": "00000000:07:00.0", "name": "NVIDIA H100 80GB HBM3", "memory_total": 85899345920,
   "utilization": [0, 96, 97, 95, 96], "memory_used": [1073741824, 75161927680], "power_mw": 612000,
   "clock_event_reasons": 4, "temperature_c": [41, 63, 67], "sm_clock_mhz": [345, 1980], "processes": 1},
  {"bus_id": "00000000:0F:00.0", "name": "NVIDIA H100 80GB HBM3", "memory_total": 85899345920,
   "utilization": [80, 10, 80, 10, 80], "memory_used": 21474836480, "power_mw": [350000, 120000]},
  {"bus_id": "00000000:47:00.0", "name": "NVIDIA H100 80GB HBM3", "memory_total": 85899345920,
   "utilization": 0, "memory_used": 314572800, "power_mw": 70000}]})";
        std::ofstream(m_dir / "models.toml") << "[my-vit]\ndescription = \"ViT-B/16 at 224, measured\"\n"
                                                "params = \"86M\"\nactivation_bytes_per_sample = \"310MiB\"\n";
        // Two nodes of two GPUs behind Open MPI's --tag-output: P2P on one node, SHM on the
        // other, IB between them without GPUDirect RDMA, and a WARN.
        std::ofstream(m_dir / "job.log")
            << R"([1,0]<stdout>:gpu-a01:3100:3100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
[1,0]<stdout>:gpu-a01:3100:3100 [0] NCCL INFO ncclCommInitRank comm 0x55810c0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x7f3ab2c41d9e0c55 - Init START
[1,1]<stdout>:gpu-a01:3101:3101 [1] NCCL INFO ncclCommInitRank comm 0x55811c0 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 1c000 commId 0x7f3ab2c41d9e0c55 - Init START
[1,2]<stdout>:gpu-a02:4200:4200 [0] NCCL INFO ncclCommInitRank comm 0x55812c0 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x7f3ab2c41d9e0c55 - Init START
[1,3]<stdout>:gpu-a02:4201:4201 [1] NCCL INFO ncclCommInitRank comm 0x55813c0 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 1c000 commId 0x7f3ab2c41d9e0c55 - Init START
[1,0]<stdout>:gpu-a01:3100:3100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.1.0.11<0>
[1,0]<stdout>:gpu-a01:3100:3100 [0] NCCL INFO Using network IB
epoch 0 step 0 loss 6.913
[1,0]<stdout>:gpu-a01:3100:3100 [0] NCCL INFO Channel 00/02 :    0   1   2   3
[1,0]<stdout>:gpu-a01:3100:3100 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
[1,1]<stdout>:gpu-a01:3101:3101 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0
[1,2]<stdout>:gpu-a02:4200:4200 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0
[1,2]<stdout>:gpu-a02:4200:4200 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via SHM/direct/direct
[1,3]<stdout>:gpu-a02:4201:4201 [1] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0
[1,0]<stdout>:gpu-a01:3100:3100 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0
[1,0]<stdout>:gpu-a01:3100:3100 [0] NCCL INFO ncclCommInitRank comm 0x55810c0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x7f3ab2c41d9e0c55 - Init COMPLETE
[1,1]<stdout>:gpu-a01:3101:3101 [1] NCCL INFO ncclCommInitRank comm 0x55811c0 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 1c000 commId 0x7f3ab2c41d9e0c55 - Init COMPLETE
[1,2]<stdout>:gpu-a02:4200:4200 [0] NCCL INFO ncclCommInitRank comm 0x55812c0 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x7f3ab2c41d9e0c55 - Init COMPLETE
[1,3]<stdout>:gpu-a02:4201:4201 [1] NCCL INFO ncclCommInitRank comm 0x55813c0 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 1c000 commId 0x7f3ab2c41d9e0c55 - Init COMPLETE
epoch 0 step 100 loss 5.102
[1,3]<stderr>:
[1,3]<stderr>:gpu-a02:4201:4305 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.0.11<40112> with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_0
)";
        std::ofstream(m_dir / "app.log") << "epoch 0 step 0 loss 6.913\nepoch 0 step 100 loss 5.102\n";
        // A job whose collective timed out (PyTorch 2.x watchdog line): a failing finding, exit 1
        // without --fail-on, as check exits 1 on a failing check.
        std::ofstream(m_dir / "hang.log") << R"(n1:7001:7001 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
n1:7001:7001 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5555666677778888 - Init COMPLETE
[rank0]:[E1105 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.
)";
        // A directory of per-process logs, as NCCL_DEBUG_FILE=dir/nccl.%h.%p.log writes them.
        std::filesystem::create_directories(m_dir / "logs");
        std::filesystem::create_directories(m_dir / "logs/empty"); // a subdirectory is not read
        std::ofstream(m_dir / "logs/nccl.n1.20.log")
            << "n1:20:20 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 1c000 - Init COMPLETE\n";
        std::ofstream(m_dir / "logs/nccl.n1.10.log")
            << "n1:10:10 [0] NCCL INFO NCCL version 2.10.3+cuda11.4\n"
               "n1:10:10 [0] NCCL INFO Channel 00 : 0[1b000] -> 1[1c000] via P2P/IPC/read\n"
               "n1:10:10 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE\n";
        // Beside the logs, files that quote NCCL lines without being logs: they are not read.
        std::ofstream(m_dir / "logs/README.md") << "Seen on n1:\n\n    n1:10:10 [0] transport/net_ib.cc:1 NCCL WARN "
                                                   "NET/IB : Got completion with error 12\n";
        std::ofstream(m_dir / "logs/report.json")
            << R"({"line": "n9:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"})" << '\n';
        std::ofstream(m_dir / "logs/notes") << "rerun after the driver update\n";
    }

    std::string expand(const std::string& s) const
    {
        std::string out = test_support::replace_all(
            test_support::replace_all(
                test_support::replace_all(s, "@SOURCE@", GPUKIT_SOURCE_DIR), "@TMP@", m_dir.path().string()),
            "@FAKE_NVML@", FAKE_NVML_PATH);
        out = test_support::replace_all(out, "@FAKE_CUDA@", FAKE_CUDA_PATH);
        return test_support::replace_all(out, "@FAKE_NCCL@", FAKE_NCCL_PATH);
    }

    std::string normalise(std::string s) const
    {
        s = test_support::replace_all(s, FAKE_NVML_PATH, "@FAKE_NVML@");
        s = test_support::replace_all(s, FAKE_CUDA_PATH, "@FAKE_CUDA@");
        s = test_support::replace_all(s, FAKE_NCCL_PATH, "@FAKE_NCCL@");
        s = test_support::replace_all(s, m_dir.path().string(), "@TMP@");
        s = test_support::replace_all(s, GPUKIT_BUILD_DIR, "@BUILD@");
        s = test_support::replace_all(s, GPUKIT_SOURCE_DIR, "@SOURCE@");
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        s = test_support::replace_all(s, " on " + std::string(host) + "\n", " on @HOST@\n");
        s = test_support::replace_all(s, "\"host\": \"" + std::string(host) + "\"", "\"host\": \"@HOST@\"");
        // How long collectors took differs from run to run: the keys stay, the numbers go.
        static const std::regex probe_seconds(R"(("seconds": )[0-9.e+-]+)");
        s = std::regex_replace(s, probe_seconds, "$1@SECONDS@");
        static const std::regex block(R"("collect_seconds": \{[^}]*\})");
        static const std::regex number(R"((: )[0-9.e+-]+)");
        std::smatch m;
        if (std::regex_search(s, m, block)) {
            s = m.prefix().str() + std::regex_replace(m.str(), number, "$1@SECONDS@") + m.suffix().str();
        }
        return s;
    }

    TempDir m_dir;
};

} // namespace

TEST_P(GpudoctorCli, MatchesGolden)
{
    const Case& c = GetParam();
    std::vector<std::string> argv{GPUDOCTOR_PATH};
    for (const auto& a : c.args) {
        argv.push_back(expand(a));
    }
    EnvChanges env{{"GPUKIT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"},
        {"CUDA_VISIBLE_DEVICES", test_support::unset_var}, {"CUDA_DEVICE_ORDER", test_support::unset_var},
        {"GPURUN_GPU_BUS_ID", test_support::unset_var}, {"NO_COLOR", test_support::unset_var}, {"COLUMNS", "100"}};
    for (const char* name : {"NCCL_DEBUG", "NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME",
             "NCCL_SHM_DISABLE", "NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL", "NCCL_IB_HCA"}) {
        env[name] = test_support::unset_var;
    }
    for (const auto& [k, v] : c.env) {
        env[k] = expand(v);
    }
    auto r = test_support::run(argv, env, std::chrono::seconds(60));
    ASSERT_FALSE(r.timed_out) << c.name;
    const std::string actual = normalise(test_support::golden_text(r));
    test_support::expect_golden(std::filesystem::path(GPUKIT_SOURCE_DIR) / "tests/doctor/golden", c.name, actual);
}

INSTANTIATE_TEST_SUITE_P(Golden, GpudoctorCli, ::testing::ValuesIn(cases()),
    [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });
