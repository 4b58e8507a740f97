#include "base/cpu_set.hpp"
#include "base/usage/summary.hpp"

#include <gtest/gtest.h>

using base::usage::GpuSample;
using base::usage::MonitorVerdict;

namespace {

using namespace std::string_literals;

constexpr std::uint64_t gib = 1ULL << 30;

// One GPU's samples every `interval` seconds: kernel-active values, with memory and power.
std::vector<GpuSample> series(unsigned gpu, const std::vector<unsigned>& kernel_active, double interval = 1.0,
    std::uint64_t memory_used = 70 * gib, double power = 300)
{
    std::vector<GpuSample> out;
    for (std::size_t i = 0; i < kernel_active.size(); ++i) {
        GpuSample s;
        s.t = double(i) * interval;
        s.gpu = gpu;
        s.kernel_active = kernel_active[i];
        s.memory_used = memory_used;
        s.memory_total = 80 * gib;
        s.power_w = power;
        out.push_back(s);
    }
    return out;
}

base::usage::GpuSummary one(const std::vector<GpuSample>& samples, double interval = 1.0)
{
    auto summaries = base::usage::summarise(samples, interval);
    EXPECT_EQ(summaries.size(), 1U);
    return summaries.at(0);
}

} // namespace

TEST(GpuMonitor, SteadyTrainingIsHealthy)
{
    // 20 samples at 95%: mean 95, p10 95, all busy, no dip.
    auto s = one(series(3, std::vector<unsigned>(20, 95)));
    EXPECT_EQ(s.gpu, 3U);
    EXPECT_EQ(s.samples, 20U);
    EXPECT_EQ(s.judged, 20U);
    EXPECT_DOUBLE_EQ(s.mean, 95.0);
    EXPECT_EQ(s.p10, 95U);
    EXPECT_DOUBLE_EQ(s.busy_share, 1.0);
    EXPECT_EQ(s.dips, 0U);
    EXPECT_EQ(s.dip_samples, 0U);
    EXPECT_EQ(s.peak_memory, 70 * gib);
    EXPECT_EQ(s.memory_total, 80 * gib);
    EXPECT_DOUBLE_EQ(s.mean_power_w.value(), 300.0);
    EXPECT_EQ(s.verdict, MonitorVerdict::healthy);
    EXPECT_EQ(s.verdict_text, "healthy: kernel-active 95.0% with rare dips (0 of 20 samples below 25%)");
    EXPECT_TRUE(s.notes.empty()) << s.notes.front();
}

TEST(GpuMonitor, RareDipsAreHealthyAndTheirNumbersAreExact)
{
    // 40 samples: 38 at 100%, one dip of 1 sample at 10%, so 1 of 40 (2.5%) is below 25%... and one
    // more at 20%: 2 of 40 = 5%, the most that still counts as rare. Mean (38*100 + 10 + 20)/40.
    std::vector<unsigned> v(40, 100);
    v[10] = 10;
    v[25] = 20;
    auto s = one(series(0, v, 0.5), 0.5);
    EXPECT_DOUBLE_EQ(s.mean, (38 * 100 + 10 + 20) / 40.0);
    EXPECT_EQ(s.p10, 100U) << "the 4th smallest of 40";
    EXPECT_DOUBLE_EQ(s.busy_share, 38 / 40.0);
    EXPECT_EQ(s.dips, 2U);
    EXPECT_EQ(s.dip_samples, 2U);
    EXPECT_DOUBLE_EQ(s.longest_dip_s, 0.5);
    EXPECT_EQ(s.verdict, MonitorVerdict::healthy);

    v[26] = 20; // 3 of 40 below 25%: no longer rare, though the mean stays above 90
    auto frequent = one(series(0, v, 0.5), 0.5);
    EXPECT_DOUBLE_EQ(frequent.mean, (37 * 100 + 10 + 20 + 20) / 40.0);
    EXPECT_EQ(frequent.dips, 2U);
    EXPECT_EQ(frequent.dip_samples, 3U);
    EXPECT_DOUBLE_EQ(frequent.longest_dip_s, 1.0) << "samples 25 and 26 in a row";
    EXPECT_EQ(frequent.verdict, MonitorVerdict::frequent_dips);
    EXPECT_NE(frequent.verdict_text.find("3 of 40 samples below 25%, longest 1.0s"), std::string::npos)
        << frequent.verdict_text;
}

TEST(GpuMonitor, DippingPipelineIsLowWithTheAdvice)
{
    // A GPU waiting on its input: 80, 10, 80, 10, ... (10 samples). Mean 45, p10 (1st of 10) 10,
    // half busy, 5 dips of one sample each.
    std::vector<unsigned> v;
    for (int i = 0; i < 5; ++i) {
        v.insert(v.end(), {80, 10});
    }
    auto s = one(series(1, v, 2.0), 2.0);
    EXPECT_DOUBLE_EQ(s.mean, 45.0);
    EXPECT_EQ(s.p10, 10U);
    EXPECT_DOUBLE_EQ(s.busy_share, 0.5);
    EXPECT_EQ(s.dips, 5U);
    EXPECT_EQ(s.dip_samples, 5U);
    EXPECT_DOUBLE_EQ(s.longest_dip_s, 2.0);
    EXPECT_EQ(s.verdict, MonitorVerdict::low);
    EXPECT_EQ(s.verdict_text,
        "kernel-active time is low (45.0%, below 90%): the GPU waits; look at the input pipeline (DataLoader workers, "
        "pinned memory) or communication: run with gpurun --profile nsys and --nccl-check");
}

TEST(GpuMonitor, IdleGpuAsksWhetherTheProgramUsedIt)
{
    // A blip of 30% in 20 idle samples: mean 1.5 is idle, judged on every sample (no window).
    std::vector<unsigned> v(20, 0);
    v[7] = 30;
    auto s = one(series(0, v, 1.0, 300ULL << 20, 60));
    EXPECT_DOUBLE_EQ(s.mean, 1.5);
    EXPECT_EQ(s.judged, 20U);
    EXPECT_EQ(s.startup_s, 0.0);
    EXPECT_EQ(s.verdict, MonitorVerdict::idle);
    EXPECT_EQ(s.verdict_text, "the GPU was idle (kernel-active 1.5%): did the program use it?");
    EXPECT_TRUE(s.notes.empty()) << "no memory advice for an idle GPU: " << s.notes.front();
}

TEST(GpuMonitor, StartupAndShutdownAreLeftOut)
{
    // 3 s of start-up at 0-4%, 6 busy samples with one dip to 20%, 2 s of shutdown at 0.
    auto samples = series(0, {0, 4, 0, 90, 100, 20, 100, 100, 100, 0, 0}, 1.0);
    samples[0].power_w = 50; // outside the window: not in the mean power
    samples[5].power_w = 150;
    auto s = one(samples);
    EXPECT_EQ(s.samples, 11U);
    EXPECT_EQ(s.judged, 6U);
    EXPECT_DOUBLE_EQ(s.startup_s, 3.0);
    EXPECT_DOUBLE_EQ(s.shutdown_s, 2.0);
    EXPECT_DOUBLE_EQ(s.mean, 510 / 6.0);
    EXPECT_EQ(s.p10, 20U);
    EXPECT_EQ(s.dips, 1U);
    EXPECT_DOUBLE_EQ(s.mean_power_w.value(), (5 * 300 + 150) / 6.0);
    EXPECT_EQ(s.verdict, MonitorVerdict::low);
    ASSERT_FALSE(s.notes.empty());
    EXPECT_EQ(s.notes[0], "left out, below 5%: start-up 3.0s and shutdown 2.0s");
}

TEST(GpuMonitor, PercentileIsTheNearestRank)
{
    // 1..10: p10 is the ceil(0.1 * 10) = 1st smallest; 1..11: the 2nd.
    std::vector<unsigned> ten;
    for (unsigned i = 1; i <= 10; ++i) {
        ten.push_back(i * 10);
    }
    EXPECT_EQ(one(series(0, ten)).p10, 10U);
    ten.push_back(5);
    EXPECT_EQ(one(series(0, ten)).p10, 10U) << "5 is the smallest, 10 the 2nd of 11";
}

TEST(GpuMonitor, TooFewSamplesAndNoReadings)
{
    auto short_run = one(series(0, {99, 99}));
    EXPECT_EQ(short_run.verdict, MonitorVerdict::too_short);
    EXPECT_EQ(short_run.verdict_text, "only 2 samples to judge: too few; sample longer or more often");
    auto late_start = one(series(0, {0, 0, 0, 0, 60, 60}));
    EXPECT_EQ(late_start.verdict, MonitorVerdict::too_short) << "mean 20% is no idle GPU, but 2 samples say little";
    EXPECT_EQ(late_start.verdict_text,
        "only 2 samples to judge (4 more at start-up or shutdown): too few; sample longer or more often");

    GpuSample mig;
    mig.gpu = 2;
    mig.memory_used = 10 * gib;
    auto none = one({mig, mig, mig});
    EXPECT_EQ(none.samples, 0U);
    EXPECT_EQ(none.verdict, MonitorVerdict::no_data);
    EXPECT_EQ(none.peak_memory, 10 * gib);
    EXPECT_FALSE(none.mean_power_w);
}

TEST(GpuMonitor, MemoryFarFromFullAndSlowedClocksAreNoted)
{
    auto samples = series(0, std::vector<unsigned>(10, 97), 1.0, 20 * gib);
    for (std::size_t i = 0; i < 4; ++i) {
        samples[i].clock_events = 0x4 | 0x40; // power cap (policy) and HW thermal slowdown (a fault)
    }
    samples[9].clock_events = 0x1; // idle: never listed
    auto s = one(samples);
    EXPECT_EQ(s.verdict, MonitorVerdict::healthy);
    ASSERT_EQ(s.clock_events.size(), 2U);
    EXPECT_EQ(s.clock_events[0], (std::pair<std::string, double>{"sw_power_cap", 0.4}));
    EXPECT_EQ(s.clock_events[1], (std::pair<std::string, double>{"hw_thermal_slowdown", 0.4}));
    EXPECT_EQ(s.notes,
        (std::vector<std::string>{
            "memory peaked at 20 GiB (25% of the card): a larger batch may fit; see gpudoctor fit",
            "clocks slowed by hw_thermal_slowdown in 40% of the samples: check cooling and power (gpudoctor check)"}));
}

TEST(GpuMonitor, SeveralGpusInOrderOfFirstSample)
{
    std::vector<GpuSample> samples;
    auto a = series(5, {95, 95, 95});
    auto b = series(2, {10, 60, 90});
    for (std::size_t i = 0; i < 3; ++i) {
        samples.push_back(a[i]);
        samples.push_back(b[i]);
    }
    auto summaries = base::usage::summarise(samples, 1.0);
    ASSERT_EQ(summaries.size(), 2U);
    EXPECT_EQ(summaries[0].gpu, 5U);
    EXPECT_EQ(summaries[1].gpu, 2U);
    EXPECT_DOUBLE_EQ(summaries[1].mean, 160 / 3.0);
}

TEST(GpuMonitor, SummaryTextForPeople)
{
    std::vector<base::usage::MonitoredGpu> gpus = {{0, *base::PciAddress::parse("0000:07:00.0"), "A100", "GPU-a"}};
    auto text = base::usage::render_summary_text(gpus, base::usage::summarise(series(0, {95, 95, 10, 95, 95}), 1.0));
    EXPECT_EQ(text,
        "GPU  SAMPLES  ACTIVE  P10  >=80%  DIPS<25%  LONGEST  PEAK MEMORY   POWER\n"
        "0    5        78.0%   10%  80%    1         1.0s     70 GiB (88%)  300 W\n"
        "WARN  gpu 0 (0000:07:00.0): kernel-active time is low (78.0%, below 90%): the GPU waits  [monitor.low]\n"
        "      fix: look at the input pipeline (DataLoader workers, pinned memory) or communication: run with gpurun "
        "--profile nsys and --nccl-check\n");
}

TEST(GpuMonitor, VerdictsAndNotesAreFindingsWithCodesOfTheTable)
{
    auto summaries = base::usage::summarise(series(0, {0, 0, 95, 95, 95, 95, 95}), 1.0);
    ASSERT_EQ(summaries.size(), 1U);
    const auto& findings = summaries[0].findings;
    ASSERT_EQ(findings.size(), 2U);
    EXPECT_EQ(findings[0].code, "monitor.healthy");
    EXPECT_EQ(findings[0].severity, base::Severity::pass);
    EXPECT_EQ(findings[0].subject, "gpu 0");
    EXPECT_EQ(findings[1].code, "monitor.startup_left_out");
    EXPECT_EQ(findings[1].severity, base::Severity::info);
    for (const auto& c : base::usage::monitor_codes()) {
        EXPECT_EQ(std::string(c.code).rfind("monitor.", 0), 0U) << c.code;
        EXPECT_NE(std::string(c.explanation), "") << c.code;
    }
    // Two GPUs with the same verdict: one fix.
    auto two = base::usage::summarise(series(0, {0, 0, 0, 0}), 1.0);
    auto other = base::usage::summarise(series(1, {0, 0, 0, 0}), 1.0);
    two.insert(two.end(), other.begin(), other.end());
    std::vector<base::usage::MonitoredGpu> gpus = {{0, *base::PciAddress::parse("0000:07:00.0"), "A100", "GPU-a"},
        {1, *base::PciAddress::parse("0000:0f:00.0"), "A100", "GPU-b"}};
    const auto text = base::usage::render_summary_text(gpus, two);
    EXPECT_NE(text.find("WARN  gpus 0-1: the GPU was idle (kernel-active 0.0%)  [monitor.idle]\n"), std::string::npos)
        << text;
    EXPECT_EQ(text.find("fix: "), text.rfind("fix: ")) << "the fix once: " << text;
}

TEST(GpuMonitor, SampleRowsAndJson)
{
    GpuSample s;
    s.t = 1.5;
    s.gpu = 1;
    s.kernel_active = 93;
    s.memory_used = 3 * gib;
    s.memory_total = 16 * gib;
    s.power_w = 212.4;
    s.clock_events = 0x4 | 0x1000;
    s.temperature_c = 67;
    s.sm_clock_mhz = 1980;
    s.processes = 2;
    EXPECT_EQ(base::usage::render_sample_header(), "    TIME GPU ACTIVE  MEMORY MEM% TEMP SMCLK POWER PROC EVENTS\n");
    EXPECT_EQ(
        base::usage::render_sample_row(s), "    1.5s   1    93%    3.0G  19%  67C  1980  212W    2 pcap,0x1000\n");
    EXPECT_EQ(base::usage::to_json(s).dump(),
        R"({"clock_events":["sw_power_cap","0x1000"],"gpu":1,"kernel_active":93,"memory_total":17179869184,)"
        R"("memory_used":3221225472,"power_w":212.4,"processes":2,"sm_clock_mhz":1980,"t":1.5,"temperature_c":67})");
    GpuSample empty;
    EXPECT_EQ(base::usage::render_sample_row(empty), "    0.0s   0      -       -    -    -     -     -    - -\n");
    // The widest row fits 80 columns: every clock event at once is cut with "+".
    GpuSample wide = s;
    wide.t = 86399.9;
    wide.gpu = 15;
    wide.kernel_active = 100;
    wide.memory_used = 141ULL * gib;
    wide.memory_total = 141ULL * gib;
    wide.power_w = 1000;
    wide.clock_events = 0x1ff | 0x10000;
    const std::string row = base::usage::render_sample_row(wide);
    EXPECT_LE(row.size(), 80U) << row;
    EXPECT_EQ(row.substr(row.size() - 2), "+\n"s) << row;
}

TEST(GpuMonitor, TheRunningLineFitsTheTerminal)
{
    std::vector<base::usage::GpuSummary> summaries;
    for (unsigned g = 0; g < 8; ++g) {
        auto one = base::usage::summarise(series(g, {95, 95, g == 3 ? 10U : 95U, 95}), 1.0);
        summaries.insert(summaries.end(), one.begin(), one.end());
    }
    const std::string line = base::usage::render_running_line(summaries, 79);
    EXPECT_EQ(line, "so far: 8 GPUs kernel-active 92% on average, lowest gpu 3 74%, 1 dip");
    EXPECT_EQ(base::usage::render_running_line(summaries, 20).size(), 20U) << "cut, never wrapped";
}

TEST(GpuMonitor, GpusWithOneFindingShareOneFixEachWithItsMessage)
{
    auto summaries = base::usage::summarise(series(0, {60, 60, 60, 60}), 1.0);
    auto other = base::usage::summarise(series(1, {40, 40, 40, 40}), 1.0);
    summaries.insert(summaries.end(), other.begin(), other.end());
    std::vector<base::usage::MonitoredGpu> gpus = {{0, *base::PciAddress::parse("0000:07:00.0"), "A100", "GPU-a"},
        {1, *base::PciAddress::parse("0000:0f:00.0"), "A100", "GPU-b"}};
    const auto text = base::usage::render_summary_text(gpus, summaries);
    EXPECT_NE(text.find("WARN  gpus 0-1: kernel-active time is low  [monitor.low]\n"
                        "      gpu 0: kernel-active time is low (60.0%, below 90%): the GPU waits\n"
                        "      gpu 1: kernel-active time is low (40.0%, below 90%): the GPU waits\n"
                        "      fix: "),
        std::string::npos)
        << text;
    EXPECT_EQ(text.find("fix: "), text.rfind("fix: ")) << text;
    for (std::size_t at = 0, end = 0; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
        if (text.compare(at, 4, "GPU ") == 0 || (text[at] >= '0' && text[at] <= '9')) {
            EXPECT_LE(end - at, 80U) << "table rows fit 80 columns: " << text.substr(at, end - at);
        }
    }
}

TEST(GpuMonitor, RanksAsRanges)
{
    EXPECT_EQ(base::format_ranges({7, 0, 1, 2, 3, 5}), "0-3,5,7");
    EXPECT_EQ(base::format_ranges({4}), "4");
}
