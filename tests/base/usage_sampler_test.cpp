#include "base/error.hpp"
#include "base/usage/sampler.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/fake_nvml_fixture.hpp"

#include <gtest/gtest.h>
#include <thread>

using test_support::FakeNvmlFixture;
using test_support::TempDir;

namespace {

// Two GPUs with sampling sequences: the n-th utilisation call gives the n-th entry (the last one
// repeats), and memory and power answer for the same sample.
const char* sequences = R"({"gpus": [
  {"bus_id": "00000000:07:00.0", "uuid": "GPU-aaaa", "memory_total": 1000,
   "utilization": [10, 95, 96], "memory_used": [100, 900, 800], "power_mw": [50000, 300500], "clock_event_reasons": 4},
  {"bus_id": "00000000:0F:00.0", "uuid": "GPU-bbbb", "memory_total": 2000, "utilization": 0}]})";

} // namespace

TEST(GpuSampler, ReadsTheFakesSequencesSampleBySample)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, sequences);
    auto nvml = base::Nvml::load(FAKE_NVML_PATH);
    base::usage::GpuSampler sampler(nvml, base::usage::select_gpus(nvml.gpus(), {}));
    std::vector<base::usage::GpuSample> got;
    for (int i = 0; i < 4; ++i) {
        for (const auto& s : sampler.sample(i * 0.5)) {
            if (s.gpu == 0) {
                got.push_back(s);
            }
        }
    }
    ASSERT_EQ(got.size(), 4U);
    EXPECT_EQ(got[0].kernel_active, 10U);
    EXPECT_EQ(got[0].memory_used, 100U);
    EXPECT_EQ(got[0].memory_total, 1000U);
    EXPECT_DOUBLE_EQ(got[0].power_w.value(), 50.0);
    EXPECT_EQ(got[0].clock_events, 4U);
    EXPECT_EQ(got[1].kernel_active, 95U);
    EXPECT_EQ(got[1].memory_used, 900U);
    EXPECT_DOUBLE_EQ(got[1].power_w.value(), 300.5);
    EXPECT_EQ(got[3].kernel_active, 96U) << "the last entry repeats";
    EXPECT_EQ(got[3].memory_used, 800U);
    EXPECT_DOUBLE_EQ(got[3].t, 1.5);
}

TEST(GpuSampler, MissingReadingsStayEmpty)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, sequences);
    auto nvml = base::Nvml::load(FAKE_NVML_MINIMAL_PATH);
    base::usage::GpuSampler sampler(nvml, base::usage::select_gpus(nvml.gpus(), {"1"}));
    auto samples = sampler.sample(0);
    ASSERT_EQ(samples.size(), 1U);
    EXPECT_EQ(samples[0].gpu, 1U);
    EXPECT_FALSE(samples[0].kernel_active);
    EXPECT_FALSE(samples[0].memory_used);
    EXPECT_FALSE(samples[0].power_w);
    EXPECT_FALSE(samples[0].clock_events);
}

TEST(GpuSampler, GpusAreChosenByIndexBusIdOrUuid)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, sequences);
    auto nvml = base::Nvml::load(FAKE_NVML_PATH);
    const auto all = nvml.gpus();
    auto chosen = base::usage::select_gpus(all, {"0f:00.0", "GPU-aaaa"});
    ASSERT_EQ(chosen.size(), 2U);
    EXPECT_EQ(chosen[0].index, 1U);
    EXPECT_EQ(chosen[1].index, 0U);
    EXPECT_EQ(base::usage::select_gpus(all, {"00000000:07:00.0"}).at(0).uuid, "GPU-aaaa");
    EXPECT_EQ(test_support::error_of([&] { base::usage::select_gpus(all, {"2"}); }),
        "--gpus 2: no such GPU; NVML lists 0 (0000:07:00.0), 1 (0000:0f:00.0) (an index, a bus id or a UUID)");
    EXPECT_EQ(test_support::error_of([&] {
        base::usage::select_gpus(all, {"1", "0000:0f:00.0"});
    }),
        "--gpus 0000:0f:00.0: GPU 1 is named twice");
    EXPECT_EQ(base::usage::gpus_at(all, {*base::PciAddress::parse("0000:0f:00.0")}).at(0).index, 1U);
    EXPECT_EQ(test_support::error_of([&] { base::usage::gpus_at(all, {*base::PciAddress::parse("0000:99:00.0")}); }),
        "NVML does not list the GPU at 0000:99:00.0; it lists 0 (0000:07:00.0), 1 (0000:0f:00.0)");
}

TEST(GpuSampler, ScheduleKeepsItsGridAndSkipsLongStalls)
{
    using namespace std::chrono;
    const auto start = steady_clock::now();
    base::usage::SampleSchedule schedule(0.25, start);
    EXPECT_DOUBLE_EQ(schedule.next_t(), 0.0);
    schedule.taken(start + milliseconds(40));
    EXPECT_DOUBLE_EQ(schedule.next_t(), 0.25) << "a late sample does not move the grid";
    EXPECT_EQ(schedule.next_at(), start + milliseconds(250));
    schedule.taken(start + milliseconds(600));
    EXPECT_DOUBLE_EQ(schedule.next_t(), 0.5) << "a short stall is caught up";
    schedule.taken(start + milliseconds(3100));
    EXPECT_DOUBLE_EQ(schedule.next_t(), 3.25) << "a long one skips the slots it missed";
}

TEST(GpuSampler, OneLoopSamplesEachSlotUntilTheDurationOrAStop)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, sequences);
    auto nvml = base::Nvml::load(FAKE_NVML_PATH);
    base::usage::GpuSampler sampler(nvml, base::usage::select_gpus(nvml.gpus(), {}));
    const base::usage::NvmlDeadline deadline{5, "test: NVML hung\n", 3, nullptr};
    std::vector<double> times;
    auto taken = [&](const std::vector<base::usage::GpuSample>& samples) {
        ASSERT_EQ(samples.size(), 2U) << "every GPU in each round";
        times.push_back(samples[0].t);
    };
    // A wait that never stops: the duration ends it, before the slot at 0.03 s.
    unsigned waits = 0;
    auto never = [&](base::usage::SampleSchedule::Clock::time_point until) {
        ++waits;
        std::this_thread::sleep_until(until);
        return false;
    };
    base::usage::SampleSchedule grid(0.01);
    EXPECT_EQ(base::usage::sample_on_schedule(&sampler, grid, 0.03, deadline, never, taken), 3U);
    ASSERT_EQ(times.size(), 3U);
    EXPECT_DOUBLE_EQ(times[0], 0.0);
    EXPECT_DOUBLE_EQ(times[2], 0.02);
    EXPECT_EQ(waits, 3U);

    // A wait that says stop before the third slot (the command ended): two rounds, no duration.
    times.clear();
    unsigned calls = 0;
    auto stop_third = [&](base::usage::SampleSchedule::Clock::time_point) { return ++calls == 3; };
    base::usage::SampleSchedule again(0.01);
    EXPECT_EQ(base::usage::sample_on_schedule(&sampler, again, 0, deadline, stop_third, taken), 2U);
    EXPECT_EQ(times.size(), 2U);

    // No sampler (NVML could not be loaded): only the wait runs, with no time limit, until it stops.
    calls = 0;
    base::usage::SampleSchedule none(0.01);
    auto until_seen = [&](base::usage::SampleSchedule::Clock::time_point until) {
        EXPECT_EQ(until, base::usage::SampleSchedule::Clock::time_point::max());
        return ++calls == 2;
    };
    EXPECT_EQ(base::usage::sample_on_schedule(nullptr, none, 0, deadline, until_seen, taken), 0U);
    EXPECT_EQ(calls, 2U);
}
