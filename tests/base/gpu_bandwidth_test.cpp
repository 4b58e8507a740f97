// The deep tier's measuring code in this process, against the fake libcuda and libnccl: the
// arithmetic, the order of the work, and that every allocation is freed on every path.
#include "base/error.hpp"
#include "base/gpu_bandwidth.hpp"
#include "base/nccl_allreduce.hpp"

#include <cstdlib>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace {

const char* const fake_variables[] = {"FAKE_CUDA_DEVICE_COUNT", "FAKE_CUDA_ALLOC_FAIL", "FAKE_CUDA_FAIL_IN",
    "FAKE_CUDA_H2D_GBPS", "FAKE_CUDA_SLOW_SAMPLE", "FAKE_NCCL_FAIL_IN", "FAKE_NCCL_ALGBW_GBPS", "GPUKIT_CUDA_LIBRARY"};

/// The fake driver's own bookkeeping, reached through the same loaded copy the loader uses.
class FakeDriver : public ::testing::Test {
protected:
    FakeDriver() : m_handle(dlopen(FAKE_CUDA_PATH, RTLD_NOW))
    {
        setenv("GPUKIT_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
        reset();
    }
    ~FakeDriver() override
    {
        for (const char* name : fake_variables) {
            unsetenv(name);
        }
        reset();
        dlclose(m_handle);
    }
    static void set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }
    int live_allocations() const
    {
        auto fn = reinterpret_cast<int (*)()>(dlsym(m_handle, "fake_cuda_live_allocations"));
        return fn != nullptr ? fn() : -1;
    }
    void reset() const
    {
        if (auto fn = reinterpret_cast<void (*)()>(dlsym(m_handle, "fake_cuda_reset"))) {
            fn();
        }
    }
    static base::CopySettings small()
    {
        base::CopySettings s;
        s.bytes = std::size_t{16} << 20;
        s.copies = 2;
        s.samples = 3;
        s.latency_copies = 10;
        return s;
    }

    void* m_handle;
};

std::string error_of(const std::function<void()>& fn)
{
    try {
        fn();
    } catch (const base::Error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(RateOf, MedianMinMaxOfTheSamples)
{
    // 1000 MB in 10, 20, 40 ms: 100, 50, 25 GB/s.
    auto r = base::rate_of({10, 40, 20}, 1000000000);
    EXPECT_DOUBLE_EQ(r.median_gbps, 50);
    EXPECT_DOUBLE_EQ(r.min_gbps, 25);
    EXPECT_DOUBLE_EQ(r.max_gbps, 100);
    EXPECT_EQ(r.samples_gbps, (std::vector<double>{100, 25, 50}));
    // An even count takes the mean of the middle two; a sample with no time is dropped.
    r = base::rate_of({10, 20, 0, 40, 50}, 1000000000);
    EXPECT_DOUBLE_EQ(r.median_gbps, (50 + 25) / 2.0);
    EXPECT_EQ(r.samples_gbps.size(), 4U);
    EXPECT_EQ(error_of([] {
        base::rate_of({0, 0}, 100);
    }),
        "the copies took no measurable time (the events report 0 ms)");
}

TEST(PcieLink, RatesAfterLineEncoding)
{
    EXPECT_NEAR(*base::pcie_link_gbps(2.5, 1), 0.25, 1e-9);
    EXPECT_NEAR(*base::pcie_link_gbps(5, 16), 8.0, 1e-9);
    EXPECT_NEAR(*base::pcie_link_gbps(8, 16), 15.754, 1e-3);
    EXPECT_NEAR(*base::pcie_link_gbps(16, 16), 31.508, 1e-3);
    EXPECT_NEAR(*base::pcie_link_gbps(32, 16), 63.015, 1e-3);
    EXPECT_NEAR(*base::pcie_link_gbps(32, 8), 31.508, 1e-3);
    EXPECT_NEAR(*base::pcie_link_gbps(64, 16), 121.0, 1e-3);
    EXPECT_FALSE(base::pcie_link_gbps(7, 16).has_value());
    EXPECT_FALSE(base::pcie_link_gbps(16, 0).has_value());
}

TEST(AllReduceArithmetic, BusFactorAndRatesAsNcclTests)
{
    EXPECT_DOUBLE_EQ(base::allreduce_bus_factor(1), 0);
    EXPECT_DOUBLE_EQ(base::allreduce_bus_factor(2), 1);
    EXPECT_DOUBLE_EQ(base::allreduce_bus_factor(8), 1.75);
    double algbw = 0;
    double busbw = 0;
    // 1 GiB in 4000 µs over 8 ranks.
    base::allreduce_rates(std::size_t{1} << 30, 4000, 8, algbw, busbw);
    EXPECT_NEAR(algbw, 268.435, 1e-3);
    EXPECT_NEAR(busbw, 469.762, 1e-3);
    base::allreduce_rates(100, 0, 8, algbw, busbw);
    EXPECT_EQ(algbw, 0);
    EXPECT_EQ(busbw, 0);
    EXPECT_EQ(base::nccl_version_text(21803), "2.18.3");
    EXPECT_EQ(base::nccl_version_text(2804), "2.8.4");
}

TEST_F(FakeDriver, MeasuresEveryGpuAndPairInOrderAndFreesEverything)
{
    set("FAKE_CUDA_DEVICE_COUNT", "3");
    auto cuda = base::Cuda::load();
    std::vector<std::string> steps;
    std::vector<int> placed;
    const auto report = base::measure_bandwidth(
        cuda, small(), [&](const std::string& s) { steps.push_back(s); },
        [&](const base::GpuCopies& g) {
            placed.push_back(g.index);
            return "near GPU " + std::to_string(g.index);
        });
    ASSERT_EQ(report.gpus.size(), 3U);
    EXPECT_EQ(placed, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(report.gpus[2].placement, "near GPU 2");
    EXPECT_EQ(report.cuda_driver_version, 12040);
    ASSERT_GE(steps.size(), 3U);
    EXPECT_EQ(steps[0], "GPU 1/3 (NVIDIA H100 80GB HBM3): host→device");
    EXPECT_EQ(steps.back(), "peer copies 6/6: GPU 2→GPU 1");
    ASSERT_EQ(report.peers.size(), 6U);
    EXPECT_EQ(report.peers[0].src, 0);
    EXPECT_EQ(report.peers[0].dst, 1);
    for (const auto& g : report.gpus) {
        EXPECT_TRUE(g.h2d && g.d2h && g.d2d) << g.index;
        EXPECT_EQ(g.error, "");
    }
    EXPECT_EQ(live_allocations(), 0);
    const auto json = base::to_json(report);
    EXPECT_EQ(json["gpus"][1]["bus_id"], "0000:0f:00.0");
    EXPECT_EQ(json["settings"]["copies"], 2);
}

TEST_F(FakeDriver, AFailingCopyKeepsTheOtherDirectionsAndFreesEverything)
{
    set("FAKE_CUDA_FAIL_IN", "cuMemcpyDtoHAsync_v2");
    auto cuda = base::Cuda::load();
    const auto report = base::measure_bandwidth(cuda, small());
    ASSERT_EQ(report.gpus.size(), 1U);
    const auto& g = report.gpus[0];
    EXPECT_TRUE(g.h2d.has_value());
    EXPECT_FALSE(g.d2h.has_value());
    EXPECT_TRUE(g.d2d.has_value());
    EXPECT_EQ(g.error, "cuMemcpyDtoHAsync failed: CUDA_ERROR_UNKNOWN: unknown error (CUDA error 999)");
    EXPECT_EQ(live_allocations(), 0);
}

TEST_F(FakeDriver, AFailingAllocationFreesWhatWasAllocated)
{
    set("FAKE_CUDA_DEVICE_COUNT", "2");
    set("FAKE_CUDA_ALLOC_FAIL", "host");
    auto cuda = base::Cuda::load();
    const auto report = base::measure_bandwidth(cuda, small());
    for (const auto& g : report.gpus) {
        EXPECT_FALSE(g.h2d.has_value());
        EXPECT_TRUE(g.d2d.has_value()); // device memory was fine
        EXPECT_NE(g.error.find("cuMemHostAlloc of 16 MiB of pinned host memory failed: CUDA_ERROR_OUT_OF_MEMORY"),
            std::string::npos)
            << g.error;
    }
    EXPECT_EQ(live_allocations(), 0);
}

TEST_F(FakeDriver, TheMedianIgnoresOneSlowSample)
{
    // Every third copy takes twice as long: with one copy per sample, samples 3 and 6 of the
    // warm-up plus five are slow, and the median is the fast rate.
    set("FAKE_CUDA_SLOW_SAMPLE", "3");
    set("FAKE_CUDA_H2D_GBPS", "20");
    auto cuda = base::Cuda::load();
    base::CopySettings s = small();
    s.copies = 1;
    s.samples = 5;
    const auto report = base::measure_bandwidth(cuda, s);
    const auto& h2d = *report.gpus[0].h2d;
    const double fast = (16.0 * 1024 * 1024) / (2e-6 + 16.0 * 1024 * 1024 / 20e9) / 1e9;
    EXPECT_NEAR(h2d.median_gbps, fast, 0.01);
    EXPECT_LT(h2d.min_gbps, fast * 0.6);
}

TEST_F(FakeDriver, AllReduceTimesTheSlowestGpuAndFreesEverything)
{
    set("FAKE_CUDA_DEVICE_COUNT", "4");
    set("FAKE_NCCL_ALGBW_GBPS", "100,100,50,100");
    auto cuda = base::Cuda::load();
    auto nccl = base::Nccl::load(FAKE_NCCL_PATH);
    base::AllReduceSettings settings;
    settings.bytes = (std::size_t{64} << 20) + 3; // not a multiple of 4: rounded down to whole floats
    settings.iterations = 4;
    const auto r = base::measure_allreduce(cuda, nccl, {0, 1, 2, 3}, settings);
    EXPECT_EQ(r.settings.bytes, std::size_t{64} << 20);
    EXPECT_EQ(r.nccl_version, "2.18.3");
    EXPECT_NEAR(r.time_us, 64.0 * 1024 * 1024 / 50e9 * 1e6, 0.1);
    EXPECT_NEAR(r.algbw_gbps, 50, 0.01);
    EXPECT_NEAR(r.busbw_gbps, 75, 0.01);
    EXPECT_EQ(live_allocations(), 0);
    EXPECT_EQ(base::to_json(r)["bus_factor"], 1.5);
}

TEST_F(FakeDriver, AJoinedCommunicatorCountsEveryRankOfEveryProcess)
{
    // This process's two GPUs are ranks 2 and 3 of four (another node holds 0 and 1).
    set("FAKE_CUDA_DEVICE_COUNT", "2");
    set("FAKE_NCCL_ALGBW_GBPS", "100,100,40,100");
    auto cuda = base::Cuda::load();
    auto nccl = base::Nccl::load(FAKE_NCCL_PATH);
    base::JoinedComm joined;
    joined.ranks = 4;
    joined.first_rank = 2;
    nccl.check(nccl.api().get_unique_id(&joined.id), "ncclGetUniqueId");
    base::AllReduceSettings settings;
    settings.bytes = std::size_t{64} << 20;
    settings.iterations = 2;
    const auto r = base::measure_allreduce(cuda, nccl, {0, 1}, settings, &joined);
    EXPECT_EQ(r.ranks, 4);
    EXPECT_NEAR(r.algbw_gbps, 40, 0.01) << "rank 2, this process's first GPU, is the slowest";
    EXPECT_NEAR(r.busbw_gbps, 60, 0.01) << "2(n-1)/n with n = 4";
    EXPECT_EQ(base::to_json(r)["ranks"], 4);
    EXPECT_EQ(live_allocations(), 0);
    // Ranks past the communicator's end, and an id NCCL did not make, are refused.
    joined.first_rank = 3;
    EXPECT_EQ(error_of([&] {
        base::measure_allreduce(cuda, nccl, {0, 1}, settings, &joined);
    }),
        "ranks 3 to 4 do not fit a communicator of 4");
    joined.first_rank = 0;
    joined.id = {};
    EXPECT_NE(error_of([&] {
        base::measure_allreduce(cuda, nccl, {0, 1}, settings, &joined);
    }).find("ncclCommInitRank (ranks 0 of 4) failed"),
        std::string::npos);
    EXPECT_EQ(live_allocations(), 0);
}

TEST_F(FakeDriver, AnAllReduceErrorNamesTheCallAndFreesEverything)
{
    set("FAKE_CUDA_DEVICE_COUNT", "2");
    set("FAKE_NCCL_FAIL_IN", "ncclAllReduce");
    auto cuda = base::Cuda::load();
    auto nccl = base::Nccl::load(FAKE_NCCL_PATH);
    EXPECT_EQ(error_of([&] {
        base::measure_allreduce(cuda, nccl, {0, 1}, base::AllReduceSettings{});
    }),
        "ncclAllReduce failed: internal error - please report this issue to the NCCL developers (ncclResult 3)");
    EXPECT_EQ(live_allocations(), 0);
}

TEST_F(FakeDriver, LibrariesWithoutTheNeededSymbolsAreRefusedByName)
{
    EXPECT_EQ(error_of([] { base::Nccl::load(FAKE_CUDA_PATH); }),
        std::string(FAKE_CUDA_PATH) +
            " is not a usable NCCL library: it lacks ncclGetVersion; point GPUKIT_NCCL_LIBRARY at libnccl.so.2");
    auto no_copies = base::Cuda::load(FAKE_CUDA_NO_COPIES_PATH);
    EXPECT_STREQ(no_copies.missing_copy_symbol(), "cuMemcpyPeerAsync");
    EXPECT_NE(error_of([&] { base::measure_bandwidth(no_copies, small()); }).find("lacks cuMemcpyPeerAsync"),
        std::string::npos);
    EXPECT_EQ(base::Cuda::load().missing_copy_symbol(), nullptr);
}
