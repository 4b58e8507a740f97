// Tests on a real NVIDIA GPU (ctest label `gpu`): the deep tier's copy and all-reduce
// measurements through the real libcuda (GPUKIT_CUDA_LIBRARY, else libcuda.so.1) and libnccl
// (GPUKIT_NCCL_LIBRARY, else libnccl.so.2), and the real gpudoctor binary. Where there is no GPU,
// no driver or no NCCL, each test is skipped with the reason (ctest reports it as Skipped).
// tests/gpu/run.sh runs them; a packed copy (run.sh --pack) finds gpudoctor through
// GPUKIT_TEST_GPUDOCTOR instead of the build tree's path.
#include "base/cuda.hpp"
#include "base/error.hpp"
#include "base/gpu_bandwidth.hpp"
#include "base/nccl_allreduce.hpp"
#include "base/usage/sampler.hpp"
#include "tests/support/process.hpp"

#include <chrono>
#include <cstdlib>
#include <gtest/gtest.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

/// The real driver, initialised, with its device count; or why there is none.
struct RealGpu {
    std::optional<base::Cuda> cuda;
    int devices = 0;
    std::string skip_reason;
};

const RealGpu& real_gpu()
{
    static const RealGpu gpu = [] {
        RealGpu g;
        try {
            base::Cuda cuda = base::Cuda::load();
            cuda.init();
            g.devices = cuda.device_count();
            if (g.devices <= 0) {
                g.skip_reason = "no GPU: CUDA sees 0 devices (check CUDA_VISIBLE_DEVICES and nvidia-smi)";
                return g;
            }
            g.cuda.emplace(std::move(cuda));
        } catch (const base::Error& e) {
            g.skip_reason = std::string("no GPU: ") + e.what() + " (GPUKIT_CUDA_LIBRARY names the driver library)";
        }
        return g;
    }();
    return gpu;
}

std::vector<int> all_devices(int n)
{
    std::vector<int> devices(static_cast<std::size_t>(n));
    std::iota(devices.begin(), devices.end(), 0);
    return devices;
}

std::string gpudoctor_path()
{
    const char* packed = std::getenv("GPUKIT_TEST_GPUDOCTOR");
    return packed != nullptr && *packed != '\0' ? packed : GPUDOCTOR_PATH;
}

/// A rate the measurement returned: plausible for any GPU and ordered (min ≤ median ≤ max).
void expect_rate(const std::optional<base::Rate>& rate, const std::string& what)
{
    ASSERT_TRUE(rate.has_value()) << what << " was not measured";
    EXPECT_GT(rate->median_gbps, 1.0) << what;
    EXPECT_LT(rate->median_gbps, 10000.0) << what;
    EXPECT_LE(rate->min_gbps, rate->median_gbps) << what;
    EXPECT_LE(rate->median_gbps, rate->max_gbps) << what;
    EXPECT_FALSE(rate->samples_gbps.empty()) << what;
}

} // namespace

TEST(GpuBandwidth, MeasuresHostAndDeviceCopiesOnEveryGpu)
{
    const RealGpu& gpu = real_gpu();
    if (!gpu.cuda) {
        GTEST_SKIP() << gpu.skip_reason;
    }
    base::CopySettings settings;
    settings.bytes = std::size_t{64} << 20;
    settings.copies = 4;
    settings.samples = 3;
    settings.latency_copies = 20;
    const base::BandwidthReport report = base::measure_bandwidth(*gpu.cuda, settings);

    EXPECT_GT(report.cuda_driver_version, 0);
    ASSERT_EQ(report.gpus.size(), static_cast<std::size_t>(gpu.devices));
    const std::regex bus_id("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");
    for (const auto& g : report.gpus) {
        SCOPED_TRACE("GPU " + std::to_string(g.index) + " " + g.bus_id + " " + g.name);
        EXPECT_EQ(g.error, "");
        EXPECT_FALSE(g.name.empty());
        EXPECT_TRUE(std::regex_match(g.bus_id, bus_id)) << "bus id '" << g.bus_id << "'";
        ASSERT_NO_FATAL_FAILURE(expect_rate(g.h2d, "host→device"));
        ASSERT_NO_FATAL_FAILURE(expect_rate(g.d2h, "device→host"));
        ASSERT_NO_FATAL_FAILURE(expect_rate(g.d2d, "device→device"));
        EXPECT_GT(g.d2d->median_gbps, g.h2d->median_gbps) << "a copy in device memory is faster than one over PCIe";
    }

    const auto n = report.gpus.size();
    ASSERT_EQ(report.peers.size(), n > 1 ? n * (n - 1) : 0);
    for (const auto& p : report.peers) {
        SCOPED_TRACE("GPU " + std::to_string(p.src) + " → GPU " + std::to_string(p.dst));
        EXPECT_NE(p.src, p.dst);
        if (!p.access) {
            EXPECT_FALSE(p.bandwidth.has_value());
            continue;
        }
        EXPECT_EQ(p.error, "");
        ASSERT_NO_FATAL_FAILURE(expect_rate(p.bandwidth, "peer copy"));
        ASSERT_TRUE(p.latency_us.has_value());
        EXPECT_GT(*p.latency_us, 0.1);
        EXPECT_LT(*p.latency_us, 1000.0);
    }

    const nlohmann::json json = base::to_json(report);
    EXPECT_EQ(json["gpus"].size(), n);
    EXPECT_EQ(json["settings"]["bytes"], settings.bytes);
}

TEST(GpuAllReduce, OneGpuHasNoBusTrafficButAnAlgorithmBandwidth)
{
    const RealGpu& gpu = real_gpu();
    if (!gpu.cuda) {
        GTEST_SKIP() << gpu.skip_reason;
    }
    std::optional<base::Nccl> nccl;
    try {
        nccl.emplace(base::Nccl::load());
    } catch (const base::Error& e) {
        GTEST_SKIP() << "no NCCL: " << e.what() << " (set GPUKIT_NCCL_LIBRARY to a libnccl.so.2)";
    }
    base::AllReduceSettings settings;
    settings.bytes = std::size_t{64} << 20;
    const base::AllReduceResult one = base::measure_allreduce(*gpu.cuda, *nccl, {0}, settings);
    EXPECT_FALSE(one.nccl_version.empty());
    EXPECT_EQ(one.devices, std::vector<int>{0});
    EXPECT_EQ(one.settings.bytes, settings.bytes);
    EXPECT_GT(one.time_us, 0.0);
    EXPECT_GT(one.algbw_gbps, 0.0);
    EXPECT_EQ(one.busbw_gbps, 0.0) << "one rank: the bus factor 2(n-1)/n is 0";

    if (gpu.devices < 2) {
        return;
    }
    const base::AllReduceResult all = base::measure_allreduce(*gpu.cuda, *nccl, all_devices(gpu.devices), settings);
    EXPECT_EQ(all.devices.size(), static_cast<std::size_t>(gpu.devices));
    EXPECT_GT(all.time_us, 0.0);
    EXPECT_GT(all.busbw_gbps, 1.0);
    EXPECT_NEAR(all.busbw_gbps, all.algbw_gbps * base::allreduce_bus_factor(gpu.devices), 1e-6 * all.busbw_gbps);
}

TEST(GpuDoctor, DeepBandwidthCheckRunsOnThisGpu)
{
    const RealGpu& gpu = real_gpu();
    if (!gpu.cuda) {
        GTEST_SKIP() << gpu.skip_reason;
    }
    const auto r = test_support::run(
        {gpudoctor_path(), "check", "--deep", "--only", "bandwidth", "--json"}, {}, std::chrono::seconds(280));
    ASSERT_FALSE(r.timed_out) << r.err;
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1)
        << "exit " << r.exit_code << " (0 fit, 1 a check failed; 2 and 3 mean gpudoctor could not run)\n"
        << r.err;
    nlohmann::json report;
    ASSERT_NO_THROW(report = nlohmann::json::parse(r.out)) << r.out;
    ASSERT_TRUE(report.contains("probes")) << r.out;
    const nlohmann::json* bandwidth = nullptr;
    for (const auto& p : report["probes"]) {
        if (p.value("name", "") == "bandwidth") {
            bandwidth = &p;
        }
    }
    ASSERT_NE(bandwidth, nullptr) << "no probe named bandwidth in\n" << r.out;
    ASSERT_TRUE(bandwidth->contains("findings")) << bandwidth->dump(2);
    EXPECT_FALSE((*bandwidth)["findings"].empty()) << bandwidth->dump(2);
    for (const auto& f : (*bandwidth)["findings"]) {
        EXPECT_NE(f.value("severity", ""), "error") << f.dump(2);
    }
}

TEST(GpuDoctor, FitMeasuresTheFrameworksContext)
{
    const RealGpu& gpu = real_gpu();
    if (!gpu.cuda) {
        GTEST_SKIP() << gpu.skip_reason;
    }
    // The interpreter gpudoctor runs: GPUKIT_PYTHON, else python3.
    const char* forced = std::getenv("GPUKIT_PYTHON");
    const std::string python = forced != nullptr && *forced != '\0' ? forced : "python3";
    const auto torch = test_support::run(
        {python, "-c", "import torch; assert torch.cuda.is_available()"}, {}, std::chrono::seconds(120));
    if (torch.exit_code != 0) {
        GTEST_SKIP() << python << " has no PyTorch with CUDA: " << torch.err;
    }
    const auto r = test_support::run({gpudoctor_path(), "fit", "--model", "gpt2", "--precision", "bf16", "--optimizer",
                                         "adamw", "--gpus", "0", "--cuda-context", "measure", "--json"},
        {}, std::chrono::seconds(280));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    ASSERT_EQ(doc["breakdown"]["cuda_context_measured"].size(), 1u) << r.out;
    // PyTorch's context with lazy loading is some 250 MiB to 1 GiB; without it, over 1 GiB.
    const auto bytes = doc["breakdown"]["cuda_context_bytes"].get<std::uint64_t>();
    EXPECT_GT(bytes, std::uint64_t{100} << 20) << r.out;
    EXPECT_LT(bytes, std::uint64_t{4} << 30) << r.out;
    std::cout << "PyTorch's CUDA context on GPU 0: " << bytes / (1 << 20) << " MiB\n";
}

TEST(GpuMonitor, OwnContextIsInNvmlsProcessListAndTheGpusAreSampled)
{
    // The process-list entry size the loader picks for this driver (32 bytes only on 535.43 to
    // 535.86) is right when our own pid comes back whole, with plausible memory, next to others.
    const RealGpu& gpu = real_gpu();
    if (!gpu.cuda) {
        GTEST_SKIP() << gpu.skip_reason;
    }
    base::Nvml nvml = base::Nvml::load();
    const auto& api = gpu.cuda->api();
    base::cuda_abi::Device device = 0;
    gpu.cuda->check(api.device_get(&device, 0), "cuDeviceGet");
    base::cuda_abi::Context context = nullptr;
    gpu.cuda->check(api.primary_ctx_retain(&context, device), "cuDevicePrimaryCtxRetain");
    gpu.cuda->check(api.ctx_set_current(context), "cuCtxSetCurrent");
    base::cuda_abi::DevicePtr block = 0;
    gpu.cuda->check(api.mem_alloc(&block, 64ULL << 20), "cuMemAlloc");

    bool ours = false;
    bool unknown_pids = false; // host pids seen from a container
    for (const auto& g : nvml.gpus()) {
        for (const auto& p : nvml.compute_processes(nvml.handle(g.index))) {
            EXPECT_GT(p.pid, 0U);
            if (p.used_memory && g.memory_total) {
                EXPECT_LE(*p.used_memory, *g.memory_total) << "pid " << p.pid << ": a wrong entry size reads garbage";
            }
            ours = ours || p.pid == static_cast<unsigned>(getpid());
            unknown_pids = unknown_pids || access(("/proc/" + std::to_string(p.pid)).c_str(), F_OK) != 0;
        }
    }
    const unsigned size = nvml.process_info_size();
    RecordProperty("process_list", std::string(nvml.api().running_processes_symbol) + " " + std::to_string(size));
    EXPECT_TRUE(size == 24 || size == 32) << size;
    EXPECT_TRUE(ours || unknown_pids) << "this process has a CUDA context but NVML does not list it";

    base::usage::GpuSampler sampler(nvml, base::usage::select_gpus(nvml.gpus(), {}));
    for (const auto& s : sampler.sample(0)) {
        if (s.kernel_active) {
            EXPECT_LE(*s.kernel_active, 100U);
        }
        ASSERT_TRUE(s.memory_total) << "GPU " << s.gpu;
        EXPECT_GT(*s.memory_total, 0U);
        EXPECT_LE(s.memory_used.value_or(0), *s.memory_total);
    }
    api.mem_free(block);
    api.primary_ctx_release(device);
}
