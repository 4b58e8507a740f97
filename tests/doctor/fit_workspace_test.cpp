// gpudoctor fit's workspaces per GPU: cuBLAS by compute capability, NCCL by interconnect and
// parallel groups, TensorFlow's reserve; and the GPUs' traits from the table and from NVML.
#include "base/error.hpp"
#include "doctor/fit/catalog.hpp"
#include "doctor/fit/model.hpp"
#include "doctor/fit/report.hpp"
#include "doctor/fit/workspace.hpp"
#include "tests/support/fake_nvml_fixture.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace doctor::fit;

namespace {

constexpr std::uint64_t MiB = std::uint64_t{1} << 20;
// NCCL's three protocols' buffers per connection: 4,194,304 + 4,915,200 + 524,288.
constexpr std::uint64_t connection = 9633792;

TrainingSetup over(Framework framework, unsigned dp, unsigned tp = 1, unsigned pp = 1)
{
    TrainingSetup s;
    s.framework = framework;
    s.dp = dp;
    s.tp = tp;
    s.pp = pp;
    return s;
}

GpuTraits gpu(unsigned major, unsigned minor, std::optional<bool> nvlink)
{
    return {ComputeCapability{major, minor}, nvlink};
}

} // namespace

TEST(FitWorkspace, ComputeCapabilityIsMajorDotMinor)
{
    EXPECT_EQ(parse_compute_capability("8.6"), (ComputeCapability{8, 6}));
    EXPECT_EQ(parse_compute_capability("10.0"), (ComputeCapability{10, 0}));
    for (const char* bad : {"", "8", "8.", ".6", "8.6.1", "x.y", "0.5", "8.10", " 8.6", "8.6 ", "-8.6", "100.0"}) {
        EXPECT_FALSE(parse_compute_capability(bad)) << bad;
    }
    EXPECT_EQ(to_string(ComputeCapability{9, 0}), "9.0");
}

TEST(FitWorkspace, PyTorchsCublasWorkspacesFollowTheArchitecture)
{
    // Two handles (forward, autograd's backward thread), each 4096 KiB × 2 + 16 KiB × 8 =
    // 8,519,680 B and cuBLASLt's 1 MiB before Hopper: 19,136,512; 2 × (32 + 1) MiB from 9.0 on.
    const Workspaces v100 = workspaces_for(over(Framework::pytorch, 1), gpu(7, 0, true));
    EXPECT_EQ(v100.cublas, 19136512u);
    EXPECT_EQ(v100.nccl, 0u);
    EXPECT_EQ(v100.total(), 19136512u);
    EXPECT_EQ(v100.allocated(), 19136512u); // PyTorch's caching allocator holds them
    EXPECT_FALSE(v100.assumed);
    EXPECT_EQ(workspaces_for(over(Framework::pytorch, 1), gpu(9, 0, true)).cublas, 66 * MiB);
    EXPECT_EQ(workspaces_for(over(Framework::pytorch, 1), gpu(10, 0, true)).cublas, 66 * MiB);
    EXPECT_EQ(workspaces_for(over(Framework::pytorch, 1), gpu(8, 9, false)).cublas, 19136512u);
}

TEST(FitWorkspace, NcclBuffersPerChannelAndParallelGroup)
{
    // DDP over 8 GPUs on NVLink: one communicator, 24 channels, 3 peers each: 693,633,024 B, the
    // 688 MB NVIDIA/nccl#964 measured per communicator of 4 A100.
    const Workspaces nvlink = workspaces_for(over(Framework::pytorch, 8), gpu(8, 0, true));
    EXPECT_EQ(nvlink.nccl_communicators, 1u);
    EXPECT_EQ(nvlink.nccl_channels, 24u);
    EXPECT_EQ(nvlink.nccl, 24 * 3 * connection);
    EXPECT_EQ(nvlink.nccl, 693633024u);
    EXPECT_EQ(nvlink.total(), 19136512u + 693633024u);
    EXPECT_EQ(nvlink.allocated(), 19136512u); // NCCL allocates its own
    // Over PCIe, 4 channels.
    const Workspaces pcie = workspaces_for(over(Framework::pytorch, 2), gpu(8, 9, false));
    EXPECT_EQ(pcie.nccl_channels, 4u);
    EXPECT_EQ(pcie.nccl, 4 * 3 * connection);
    // Megatron's data, tensor and pipeline groups are a communicator each; a degree of 1 is none.
    EXPECT_EQ(workspaces_for(over(Framework::pytorch, 2, 2, 2), gpu(9, 0, true)).nccl_communicators, 3u);
    EXPECT_EQ(workspaces_for(over(Framework::pytorch, 1, 8, 1), gpu(9, 0, true)).nccl, 24 * 3 * connection);
    EXPECT_EQ(workspaces_for(over(Framework::pytorch, 1, 1, 4), gpu(9, 0, true)).nccl_communicators, 1u);
}

TEST(FitWorkspace, TensorFlowKeepsItsReserveByComputeCapability)
{
    // MinSystemMemory (TF ≥ 2.5): 500 MiB up to 6.x, 1050 MiB for 7.x, 1536 MiB for 8.x, and in
    // today's source 1800 MiB from 9.0.
    EXPECT_EQ(workspaces_for(over(Framework::tensorflow, 1), gpu(6, 1, false)).total(), 500 * MiB);
    EXPECT_EQ(workspaces_for(over(Framework::tensorflow, 1), gpu(7, 0, true)).total(), 1050 * MiB);
    EXPECT_EQ(workspaces_for(over(Framework::tensorflow, 1), gpu(8, 0, true)).total(), 1536 * MiB);
    EXPECT_EQ(workspaces_for(over(Framework::tensorflow, 1), gpu(8, 9, false)).total(), 1536 * MiB);
    EXPECT_EQ(workspaces_for(over(Framework::tensorflow, 1), gpu(9, 0, true)).total(), 1800 * MiB);
    // Its allocator takes cuBLAS's workspaces during the step: none counted apart, none in the
    // allocator's count.
    const Workspaces v100 = workspaces_for(over(Framework::tensorflow, 8), gpu(7, 0, true));
    EXPECT_EQ(v100.cublas, 0u);
    EXPECT_EQ(v100.allocated(), 0u);
    // NCCL's buffers come out of the reserve, unless they are more: three groups over NVLink,
    // 3 × 693,633,024 = 2,080,899,072 > 1536 MiB.
    EXPECT_EQ(v100.total(), 1050 * MiB);
    EXPECT_EQ(workspaces_for(over(Framework::tensorflow, 2, 2, 2), gpu(8, 0, true)).total(), 3 * 693633024u);
}

TEST(FitWorkspace, AnUnknownGpuTakesTheLargerChoice)
{
    // No compute capability: Hopper's cuBLAS workspaces; no word on NVLink: its 24 channels.
    const Workspaces w = workspaces_for(over(Framework::pytorch, 4), GpuTraits{});
    EXPECT_TRUE(w.assumed);
    EXPECT_EQ(w.cublas, 66 * MiB);
    EXPECT_EQ(w.nccl_channels, 24u);
    EXPECT_EQ(workspaces_for(over(Framework::tensorflow, 1), GpuTraits{}).total(), 1800 * MiB);
    // The interconnect matters only with NCCL.
    const GpuTraits a100{ComputeCapability{8, 0}, std::nullopt};
    EXPECT_FALSE(workspaces_for(over(Framework::pytorch, 1), a100).assumed);
    EXPECT_TRUE(workspaces_for(over(Framework::pytorch, 2), a100).assumed);
    const std::string words = describe(w, GpuTraits{});
    EXPECT_NE(words.find("compute capability not known, Hopper's assumed"), std::string::npos) << words;
    EXPECT_NE(words.find("1 communicator × 24 channels, NVLink assumed"), std::string::npos) << words;
}

TEST(FitWorkspace, AGivenSizeIsUsedAsItIs)
{
    const Workspaces w = workspaces_for(over(Framework::pytorch, 8), gpu(9, 0, true), 2048 * MiB);
    EXPECT_EQ(w.total(), 2048 * MiB);
    EXPECT_EQ(w.allocated(), 0u);
    EXPECT_EQ(w.nccl, 0u);
    EXPECT_EQ(describe(w, gpu(9, 0, true)), "--workspace");
}

TEST(FitWorkspace, EachGpuLosesItsOwnWorkspaces)
{
    // The same model on an H100 has 2 × 23.875 MiB less than on a V100 of the same memory.
    ModelSpec m;
    m.name = "m";
    m.params = 1000000;
    m.activation_bytes = MiB;
    const MemoryPlan plan = plan_memory(m, over(Framework::pytorch, 1));
    Overheads v100;
    v100.gpu = gpu(7, 0, true);
    Overheads h100;
    h100.gpu = gpu(9, 0, true);
    const GpuFit a = fit_gpu(plan, 16 * 1024 * MiB, v100);
    const GpuFit b = fit_gpu(plan, 16 * 1024 * MiB, h100);
    EXPECT_EQ(a.available - b.available, static_cast<std::int64_t>(66 * MiB - 19136512u));
    const PeakMemory peak = peak_at(plan, 2, h100);
    EXPECT_EQ(peak.total() - peak.allocated(), peak.cuda_context);
}

TEST(FitWorkspace, TheGpuTableGivesEachModelItsComputeCapability)
{
    const GpuTable table = GpuTable::builtin();
    for (const auto& g : table.models()) {
        EXPECT_TRUE(g.traits.compute_capability) << g.name;
    }
    EXPECT_EQ(table.find("V100").traits.compute_capability, (ComputeCapability{7, 0}));
    EXPECT_EQ(table.find("H100").traits.compute_capability, (ComputeCapability{9, 0}));
    EXPECT_EQ(table.find("H100").traits.nvlink, true);
    EXPECT_EQ(table.find("T4").traits.nvlink, false);
    EXPECT_FALSE(table.find("A100-80GB").traits.nvlink); // SXM4 or PCIe
    EXPECT_EQ(table.find("TITAN X (Pascal)").traits.compute_capability, (ComputeCapability{6, 1}));

    auto error_of = [](const std::string& toml) {
        try {
            GpuTable::from_toml(toml, "g.toml");
        } catch (const base::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(
        error_of("[X]\nmemory_gib = 16\n").find("compute_capability must be given as major.minor"), std::string::npos);
    EXPECT_NE(error_of("[X]\nmemory_gib = 16\ncompute_capability = \"eight\"\n").find("compute_capability must be"),
        std::string::npos);
    EXPECT_NE(error_of("[X]\nmemory_gib = 16\ncompute_capability = \"8.0\"\nnvlink = 1\n")
                  .find("nvlink must be true or false"),
        std::string::npos);
}

TEST(FitWorkspace, NvmlGivesTheComputeCapabilityAndTheLinks)
{
    // Two H100s joined by NVLink, and the same without the links: gpudoctor fit reads both from
    // NVML and counts NCCL's channels accordingly.
    test_support::TempDir dir;
    auto run = [&](bool links, std::vector<std::string> more = {}) {
        nlohmann::json gpus = nlohmann::json::array();
        for (int i = 0; i < 2; ++i) {
            nlohmann::json g = {{"bus_id", fmt::format("00000000:{:02X}:00.0", 7 + i)},
                {"name", "NVIDIA H100 80GB HBM3"}, {"uuid", fmt::format("GPU-{}", i)}, {"memory_total", 85899345920ULL},
                {"compute_capability", "9.0"}};
            if (links) {
                g["nvlinks"] = {fmt::format("00000000:{:02X}:00.0", 8 - i)};
            }
            gpus.push_back(g);
        }
        const test_support::FakeNvmlFixture fixture(dir, nlohmann::json{{"gpus", gpus}}.dump());
        std::vector<std::string> args = {
            GPUDOCTOR_PATH, "fit", "--model", "gpt2", "--precision", "amp", "--optimizer", "adamw", "--json"};
        args.insert(args.end(), more.begin(), more.end());
        return test_support::run(
            args, {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", fixture.path()}});
    };
    const auto linked = run(true);
    ASSERT_EQ(linked.exit_code, 0) << linked.err;
    const auto doc = nlohmann::json::parse(linked.out);
    const auto& g = doc["gpus"][1];
    EXPECT_EQ(g["compute_capability"], "9.0");
    EXPECT_EQ(g["nvlink"], true);
    EXPECT_EQ(g["workspace"]["cublas_bytes"], 66 * MiB);
    EXPECT_EQ(g["workspace"]["nccl_channels"], 24);
    EXPECT_EQ(g["workspace"]["nccl_bytes"], 24 * 3 * connection);
    EXPECT_EQ(g["workspace"]["assumed"], false);
    EXPECT_EQ(doc["breakdown"]["workspace_bytes"], 66 * MiB + 24 * 3 * connection);

    const auto apart = run(false);
    ASSERT_EQ(apart.exit_code, 0) << apart.err;
    const auto pcie = nlohmann::json::parse(apart.out);
    EXPECT_EQ(pcie["gpus"][0]["nvlink"], false);
    EXPECT_EQ(pcie["gpus"][0]["workspace"]["nccl_channels"], 4);
    // 20 channels fewer, 3 peers each, leave that much more room.
    EXPECT_EQ(
        pcie["gpus"][0]["available_bytes"].get<std::int64_t>() - doc["gpus"][0]["available_bytes"].get<std::int64_t>(),
        static_cast<std::int64_t>(20 * 3 * connection));

    // --gpus with --gpu-mem keeps what NVML says of the GPU; --gpu-count copies it to the GPUs
    // it counts.
    const auto sized = run(true, {"--gpus", "1", "--gpu-mem", "40GiB", "--dp", "2"});
    ASSERT_EQ(sized.exit_code, 0) << sized.err;
    const auto one = nlohmann::json::parse(sized.out)["gpus"][0];
    EXPECT_EQ(one["memory_bytes"], 40 * 1024 * MiB);
    EXPECT_EQ(one["compute_capability"], "9.0");
    EXPECT_EQ(one["nvlink"], true);
    EXPECT_EQ(one["workspace"]["nccl_channels"], 24);
    EXPECT_EQ(one["workspace"]["assumed"], false);
    const auto counted = run(false, {"--gpu-count", "8"});
    ASSERT_EQ(counted.exit_code, 0) << counted.err;
    const auto eight = nlohmann::json::parse(counted.out)["gpus"];
    ASSERT_EQ(eight.size(), 8u);
    EXPECT_EQ(eight[7]["compute_capability"], "9.0");
    EXPECT_EQ(eight[7]["nvlink"], false);
    EXPECT_EQ(eight[7]["workspace"]["nccl_channels"], 4);
}

TEST(FitWorkspace, TheWorkspaceOption)
{
    auto fit = [](std::vector<std::string> more) {
        std::vector<std::string> args = {
            GPUDOCTOR_PATH, "fit", "--model", "gpt2", "--precision", "amp", "--optimizer", "adamw", "--batch", "1"};
        if (std::find(more.begin(), more.end(), "--gpu-model") == more.end()) {
            args.insert(args.end(), {"--gpu-model", "V100"});
        }
        args.insert(args.end(), more.begin(), more.end());
        return test_support::run(args, {{"GPUKIT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
    };
    const auto counted = fit({"--json"});
    ASSERT_EQ(counted.exit_code, 0) << counted.err;
    EXPECT_EQ(nlohmann::json::parse(counted.out)["at_batch"]["workspace_bytes"], 19136512u);
    const auto given = fit({"--workspace", "2GiB", "--json"});
    ASSERT_EQ(given.exit_code, 0) << given.err;
    const auto doc = nlohmann::json::parse(given.out);
    const auto& at = doc["at_batch"];
    EXPECT_EQ(at["workspace_bytes"], 2048 * MiB);
    // Given as a whole: none of it is known to be inside the allocator.
    EXPECT_EQ(
        at["allocated_bytes"], at["states_bytes"].get<std::uint64_t>() + at["activations_bytes"].get<std::uint64_t>());
    EXPECT_EQ(doc["gpus"][0]["workspace"]["given"], true);
    EXPECT_EQ(doc["gpus"][0]["workspace"]["cublas_bytes"], 0);
    EXPECT_EQ(doc["gpus"][0]["workspace"]["nccl_bytes"], 0);
    // One row for every GPU, whatever their models.
    const auto text = fit({"--workspace", "2GiB", "--gpu-model", "K80,V100"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    const std::string row = "workspaces          2 GiB  --workspace";
    const auto first = text.out.find(row);
    EXPECT_NE(first, std::string::npos) << text.out;
    EXPECT_EQ(text.out.find(row, first + 1), std::string::npos) << text.out;
    const auto bad = fit({"--workspace", "lots"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--workspace"), std::string::npos) << bad.err;
    const auto search_only =
        test_support::run({GPUDOCTOR_PATH, "fit", "--workspace", "1GiB", "--search", "--", "true", "{batch}"});
    EXPECT_EQ(search_only.exit_code, 2);
    EXPECT_NE(search_only.err.find("--workspace is for the analytic fit"), std::string::npos) << search_only.err;
}

TEST(FitWorkspace, NcclRunsTheJobsChannels)
{
    // NCCL's channels are the job's: NVLink's only where every GPU has it.
    ModelSpec m;
    m.name = "m";
    m.params = 1000000;
    m.activation_bytes = MiB;
    auto nccl_channels = [&](const std::vector<std::optional<bool>>& links) {
        FitRequest q;
        q.model = m;
        q.setup.dp = static_cast<unsigned>(links.size());
        for (const auto& l : links) {
            q.gpus.push_back({"g", 16 * 1024 * MiB, "--gpu-mem", 1, std::nullopt, gpu(9, 0, l)});
        }
        const FitReport r = analyse_fit(q);
        std::vector<std::pair<unsigned, bool>> out;
        for (const auto& f : r.fits) {
            out.emplace_back(f.workspaces.nccl_channels, f.workspaces.assumed);
        }
        return out;
    };
    using V = std::vector<std::pair<unsigned, bool>>;
    EXPECT_EQ(nccl_channels({true, true}), (V{{24, false}, {24, false}}));
    EXPECT_EQ(nccl_channels({true, false}), (V{{4, false}, {4, false}}));
    EXPECT_EQ(nccl_channels({std::nullopt, false}), (V{{4, false}, {4, false}}));
    EXPECT_EQ(nccl_channels({true, std::nullopt}), (V{{24, true}, {24, true}}));
}

TEST(FitWorkspace, ThePeakAtABatchIsTheGpuWithTheMostWorkspaces)
{
    // A V100 and an H100 of the same memory: the batch's peak shown is the H100's (66 MiB of
    // cuBLAS workspaces against 18.25), and each GPU's room is against its own.
    ModelSpec m;
    m.name = "m";
    m.params = 1000000;
    m.activation_bytes = MiB;
    const FitGpu v100{"V100", 16 * 1024 * MiB, "--gpu-mem", 1, std::nullopt, gpu(7, 0, true)};
    const FitGpu h100{"H100", 16 * 1024 * MiB, "--gpu-mem", 1, std::nullopt, gpu(9, 0, true)};
    for (const bool h100_first : {false, true}) {
        FitRequest q;
        q.model = m;
        q.batch = 4;
        q.gpus = h100_first ? std::vector{h100, v100} : std::vector{v100, h100};
        const FitReport r = analyse_fit(q);
        ASSERT_TRUE(r.at_batch);
        EXPECT_EQ(r.at_batch->workspaces.total(), 66 * MiB) << h100_first;
        ASSERT_EQ(r.spare_at_batch.size(), 2u);
        const std::int64_t v100_more = r.spare_at_batch[h100_first ? 1 : 0] - r.spare_at_batch[h100_first ? 0 : 1];
        EXPECT_EQ(v100_more, static_cast<std::int64_t>(66 * MiB - 19136512u)) << h100_first;
    }
}

TEST(FitWorkspace, TensorFlowsNcclBuffersAboveItsReserve)
{
    // Two P100s (compute capability 6.0, NVLink on SXM2): TensorFlow keeps 500 MiB, and NCCL's 24
    // channels want 661.5 MiB: the workspaces are NCCL's. On V100s the reserve, 1050 MiB, holds them.
    const std::pair<const char*, const char*> cases[] = {
        {"P100,P100",
            "workspaces     661.50 MiB  TensorFlow's reserve 500 MiB (compute capability 6.0), NCCL 661.50 "
            "MiB (1 communicator × 24 channels, NVLink assumed), more than the reserve"},
        {"V100,V100",
            "workspaces       1.03 GiB  TensorFlow's reserve 1.03 GiB (compute capability 7.0), NCCL 661.50 "
            "MiB (1 communicator × 24 channels, NVLink assumed), within the reserve"},
    };
    for (const auto& [gpus, row] : cases) {
        const auto r = test_support::run({GPUDOCTOR_PATH, "fit", "--framework", "tensorflow", "--model", "bert-base",
                                             "--precision", "fp32", "--optimizer", "adam", "--gpu-model", gpus},
            {{"GPUKIT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.out.find(row), std::string::npos) << r.out;
    }
}

TEST(FitWorkspace, AGpusOwnLinksAndTheJobs)
{
    // GPU 0 has an NVLink up, GPU 1 none: the JSON gives each GPU's own, NCCL runs PCIe's channels
    // for both. An NVML that fails on the first link says nothing: NVLink is assumed.
    test_support::TempDir dir;
    auto run = [&](const nlohmann::json& second) {
        nlohmann::json gpus = {
            {{"bus_id", "00000000:07:00.0"}, {"name", "NVIDIA H100 80GB HBM3"}, {"memory_total", 85899345920ULL},
                {"compute_capability", "9.0"}, {"nvlinks", {"00000000:08:00.0"}}},
            second};
        const test_support::FakeNvmlFixture fixture(dir, nlohmann::json{{"gpus", gpus}}.dump());
        return test_support::run(
            {GPUDOCTOR_PATH, "fit", "--model", "gpt2", "--precision", "amp", "--optimizer", "adamw", "--json"},
            {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", fixture.path()}});
    };
    nlohmann::json second = {{"bus_id", "00000000:08:00.0"}, {"name", "NVIDIA H100 80GB HBM3"},
        {"memory_total", 85899345920ULL}, {"compute_capability", "9.0"}};
    const auto mixed = run(second);
    ASSERT_EQ(mixed.exit_code, 0) << mixed.err;
    const auto doc = nlohmann::json::parse(mixed.out);
    EXPECT_EQ(doc["gpus"][0]["nvlink"], true);
    EXPECT_EQ(doc["gpus"][1]["nvlink"], false);
    EXPECT_EQ(doc["breakdown"]["nccl_nvlink"], false);
    EXPECT_EQ(doc["gpus"][0]["workspace"]["nccl_channels"], 4);
    EXPECT_EQ(doc["gpus"][0]["workspace"]["assumed"], false);

    second["nvlink_error"] = 999; // NVML_ERROR_UNKNOWN
    const auto unknown = run(second);
    ASSERT_EQ(unknown.exit_code, 0) << unknown.err;
    const auto u = nlohmann::json::parse(unknown.out);
    EXPECT_EQ(u["gpus"][1]["nvlink"], nullptr);
    EXPECT_EQ(u["breakdown"]["nccl_nvlink"], nullptr);
    EXPECT_EQ(u["gpus"][1]["workspace"]["nccl_channels"], 24);
    EXPECT_EQ(u["gpus"][1]["workspace"]["assumed"], true);
}
