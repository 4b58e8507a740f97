#include "base/nsys/summary.hpp"

#include <gtest/gtest.h>

using namespace base::nsys;

namespace {

constexpr std::int64_t t0 = 5'000'000'000; // traces start anywhere on the session clock
constexpr std::int64_t ms = 1'000'000;
constexpr std::int64_t us = 1'000;

Trace trace_of(std::vector<Kernel> kernels, std::int64_t span_ms = 1000)
{
    Trace t;
    t.file = "rank0.sqlite";
    t.span_start = t0;
    t.span_end = t0 + span_ms * ms;
    t.kernel_names = {"gemm", "relu", "copy_kernel"};
    t.kernels = std::move(kernels);
    return t;
}

std::vector<std::string> codes(const Summary& s)
{
    std::vector<std::string> out;
    for (const auto& f : s.findings) {
        out.push_back(f.code);
    }
    return out;
}

} // namespace

TEST(NsysUnion, OverlapsCountOnceAndTouchingIntervalsJoin)
{
    std::vector<std::pair<std::int64_t, std::int64_t>> v = {{10, 20}, {0, 5}, {15, 30}, {30, 40}, {50, 50}, {60, 61}};
    EXPECT_EQ(union_length(v), 5 + 30 + 0 + 1);
    std::vector<std::pair<std::int64_t, std::int64_t>> none;
    EXPECT_EQ(union_length(none), 0);
    std::vector<std::pair<std::int64_t, std::int64_t>> nested = {{0, 100}, {10, 20}, {30, 40}};
    EXPECT_EQ(union_length(nested), 100);
}

TEST(NsysSummary, BusyShareIsTheUnionOfKernelsNotTheSumOfTheirDurations)
{
    // Two streams: 400 ms on stream 7 and 400 ms on stream 13 overlapping by 200 ms.
    const auto s = summarize({trace_of({{t0, t0 + 400 * ms, 0, 0, 7}, {t0 + 200 * ms, t0 + 600 * ms, 0, 0, 13}})});
    ASSERT_EQ(s.gpus.size(), 1U);
    const GpuSummary& g = s.gpus[0];
    EXPECT_EQ(g.busy_ns, 600 * ms);
    EXPECT_EQ(g.kernel_total_ns, 800 * ms);
    EXPECT_DOUBLE_EQ(g.busy_share(), 0.6);
    EXPECT_EQ(g.span_ns, 1000 * ms);
    ASSERT_EQ(g.streams.size(), 2U);
    EXPECT_EQ(g.streams[0].stream, 7);
    EXPECT_EQ(g.streams[1].stream, 13);
    EXPECT_EQ(g.streams[1].kernels, 1U);
    EXPECT_EQ(g.streams[1].total_ns, 400 * ms);
    EXPECT_TRUE(s.findings.empty()) << s.findings[0].message;
}

TEST(NsysSummary, BusyShareNeverExceedsOneWhenKernelsOutliveTheSpan)
{
    const auto s =
        summarize({trace_of({{t0 - 100 * ms, t0 + 300 * ms, 0, 0, 7}, {t0 + 900 * ms, t0 + 1500 * ms, 0, 0, 7}})});
    ASSERT_EQ(s.gpus.size(), 1U);
    EXPECT_EQ(s.gpus[0].busy_ns, 400 * ms);
    EXPECT_EQ(s.gpus[0].kernel_total_ns, 1000 * ms);
}

TEST(NsysSummary, TopKernelsHaveTotalCountMeanAndMedian)
{
    std::vector<Kernel> k;
    for (std::int64_t d : {10, 20, 30, 100}) { // relu: median of an even count is the mean of the middle two
        k.push_back({t0 + d * ms, t0 + 2 * d * ms, 0, 1, 7});
    }
    k.push_back({t0 + 300 * ms, t0 + 500 * ms, 0, 0, 7}); // gemm: 200 ms in one
    Options options;
    options.top = 1;
    const auto s = summarize({trace_of(k)}, options);
    const GpuSummary& g = s.gpus.at(0);
    EXPECT_EQ(g.kernels, 5U);
    EXPECT_EQ(g.distinct_kernels, 2U);
    ASSERT_EQ(g.top_kernels.size(), 1U);
    EXPECT_EQ(g.top_kernels[0].name, "gemm");
    options.top = 10;
    const auto all = summarize({trace_of(k)}, options).gpus.at(0).top_kernels;
    ASSERT_EQ(all.size(), 2U);
    EXPECT_EQ(all[1].name, "relu");
    EXPECT_EQ(all[1].count, 4U);
    EXPECT_EQ(all[1].total_ns, 160 * ms);
    EXPECT_DOUBLE_EQ(all[1].mean_ns, 40.0 * ms);
    EXPECT_DOUBLE_EQ(all[1].median_ns, 25.0 * ms);
    EXPECT_EQ(all[1].min_ns, 10 * ms);
    EXPECT_EQ(all[1].max_ns, 100 * ms);
    EXPECT_DOUBLE_EQ(all[0].share, 200.0 / 360.0);
}

TEST(NsysSummary, CopiesByKindWithFloatingPointBandwidthAndPeers)
{
    Trace t = trace_of({{t0, t0 + 900 * ms, 0, 0, 7}});
    // 1.5 s of copies for 3 GB: more than 1 s, where nsys's integer division would print 0.
    t.copies.push_back({t0 + 100 * ms, t0 + 1600 * ms, 0, CopyKind::htod, 3'000'000'000, 1, false});
    t.copies.push_back({t0 + 10 * ms, t0 + 11 * ms, 0, CopyKind::ptop, 1'000'000, 1, false, 0, 1});
    t.copies.push_back({t0 + 20 * ms, t0 + 22 * ms, 0, CopyKind::ptop, 1'000'000, 1, false, 0, 1});
    t.copies.push_back({t0 + 30 * ms, t0 + 31 * ms, 0, CopyKind::ptop, 500'000, 1, false, 0, 2});
    t.copies.push_back({t0 + 40 * ms, t0 + 41 * ms, 0, CopyKind::other, 7, 3, false});
    const auto s = summarize({t});
    const GpuSummary& g = s.gpus.at(0);
    EXPECT_EQ(g.copy(CopyKind::htod).count, 1U);
    EXPECT_DOUBLE_EQ(g.copy(CopyKind::htod).bandwidth_gbps(), 2.0);
    EXPECT_EQ(g.copy(CopyKind::ptop).count, 3U);
    EXPECT_EQ(g.copy(CopyKind::ptop).bytes, 2'500'000U);
    EXPECT_EQ(g.copy(CopyKind::other).count, 3U) << "a batched record counts as its copyCount";
    EXPECT_EQ(g.copy(CopyKind::dtoh).count, 0U);
    EXPECT_DOUBLE_EQ(g.copy(CopyKind::dtoh).bandwidth_gbps(), 0.0);
    ASSERT_EQ(g.peers.size(), 2U);
    EXPECT_EQ(g.peers[0].dst_device, 1);
    EXPECT_EQ(g.peers[0].copies.count, 2U);
    EXPECT_DOUBLE_EQ(g.peers[0].copies.bandwidth_gbps(), 2'000'000.0 / (3 * ms));
    EXPECT_EQ(g.peers[1].dst_device, 2);
    // Copies inside the span only: [100 ms, 1000 ms) of the HtoD, plus the small ones.
    EXPECT_EQ(g.copy_busy_ns, 900 * ms + 5 * ms);
    EXPECT_EQ(g.busy_with_copies_ns, 1000 * ms);
}

TEST(NsysSummary, PageableHostCopiesAreAFindingFromOneMebibyte)
{
    Trace t = trace_of({{t0, t0 + 900 * ms, 0, 0, 7}});
    t.copies.push_back({t0 + 910 * ms, t0 + 911 * ms, 0, CopyKind::dtoh, 4, 1, true}); // loss.item()
    t.copies.push_back({t0 + 912 * ms, t0 + 913 * ms, 0, CopyKind::dtod, 1 << 30, 1, true}); // not host memory
    t.copies.push_back({t0 + 920 * ms, t0 + 930 * ms, 0, CopyKind::htod, (1 << 20) - 5, 1, true});
    EXPECT_TRUE(summarize({t}).findings.empty());
    t.copies.back().bytes += 1;
    const auto s = summarize({t});
    ASSERT_EQ(codes(s), std::vector<std::string>{"profile.pageable_copies"});
    EXPECT_EQ(s.gpus[0].copy(CopyKind::htod).pageable_count, 1U);
    EXPECT_EQ(s.gpus[0].copy(CopyKind::dtoh).pageable_ns, 1 * ms);
    EXPECT_EQ(s.gpus[0].copy(CopyKind::dtod).pageable_count, 0U);
    EXPECT_EQ(s.findings[0].subject, "gpu 0 in rank0.sqlite");

    t.copies.back().bytes = 3 << 20;
    t.copies.push_back({t0 + 940 * ms, t0 + 950 * ms, 0, CopyKind::htod, 2 << 20, 1, false});
    EXPECT_EQ(summarize({t}).findings.at(0).message,
        "copies between the GPU and pageable host memory: HtoD 1 of 2 (3 MiB of 5 MiB, 10.0 ms); DtoH 1 of 1 (4 B of "
        "4 B, 1.0 ms)");
}

TEST(NsysSummary, LowBusyAndIdleGapsBetweenFirstAndLastOperation)
{
    Trace t = trace_of({{t0 + 100 * ms, t0 + 200 * ms, 0, 0, 7}, {t0 + 800 * ms, t0 + 900 * ms, 0, 0, 7}}, 2000);
    t.memsets.push_back({t0 + 1500 * ms, t0 + 1502 * ms, 0, 64});
    t.gpu_names[0] = "NVIDIA H200";
    const auto s = summarize({t});
    const GpuSummary& g = s.gpus.at(0);
    EXPECT_EQ(g.first_ns, 100 * ms);
    EXPECT_EQ(g.last_ns, 1502 * ms);
    EXPECT_EQ(g.gap_count, 2U); // 600 ms and 600 ms; the 100 ms lead-in and the end are not gaps
    EXPECT_EQ(g.gap_total_ns, 1200 * ms);
    ASSERT_EQ(g.longest_gaps.size(), 2U);
    EXPECT_EQ(g.longest_gaps[0].start_ns, 200 * ms);
    EXPECT_EQ(g.longest_gaps[1].start_ns, 900 * ms);
    ASSERT_EQ(codes(s), (std::vector<std::string>{"profile.low_busy", "profile.idle_gaps"}));
    EXPECT_EQ(s.findings[0].subject, "gpu 0 (NVIDIA H200) in rank0.sqlite");
    EXPECT_EQ(s.findings[0].message,
        "kernels ran 10.0% of the 2.000 s trace (200.0 ms); 14.3% between its first and last GPU operation (at "
        "0.100 s and 1.502 s); 10.1% with copies and memsets");
    EXPECT_EQ(s.findings[1].message, "2 idle gaps of 0.500 s or more, 1.200 s in all; the longest 600.0 ms at 0.200 s");

    Options options;
    options.gap_seconds = 0.7;
    options.min_busy = 0.05;
    EXPECT_TRUE(summarize({t}, options).findings.empty());
}

TEST(NsysSummary, OnlyTheLongestGapsAreListed)
{
    // 20 kernels of 1 ms with gaps of 600, 601, ..., 618 ms between them.
    std::vector<Kernel> k;
    std::int64_t start = t0;
    for (std::int64_t i = 0; i < 20; ++i) {
        k.push_back({start, start + 1 * ms, 0, 0, 7});
        start += 1 * ms + (600 + i) * ms;
    }
    const auto g = summarize({trace_of(k, 12000)}).gpus.at(0);
    EXPECT_EQ(g.gap_count, 19U);
    EXPECT_EQ(g.gap_total_ns, (19 * 600 + 171) * ms);
    ASSERT_EQ(g.longest_gaps.size(), gaps_listed);
    // The ten longest (609 to 618 ms), by start time.
    for (std::size_t i = 0; i < g.longest_gaps.size(); ++i) {
        EXPECT_EQ(g.longest_gaps[i].length_ns, static_cast<std::int64_t>(609 + i) * ms) << i;
    }
    EXPECT_EQ(g.longest_gaps[0].start_ns, 10 * ms + (600 + 601 + 602 + 603 + 604 + 605 + 606 + 607 + 608) * ms);
}

TEST(NsysSummary, CopiesThatDominate)
{
    Trace t = trace_of({{t0 + 900 * ms, t0 + 1000 * ms, 0, 0, 7}});
    t.copies.push_back({t0, t0 + 500 * ms, 0, CopyKind::htod, 1 << 30, 1, false});
    t.copies.push_back({t0 + 400 * ms, t0 + 800 * ms, 0, CopyKind::dtoh, 1 << 30, 1, false});
    const auto s = summarize({t});
    ASSERT_EQ(codes(s), (std::vector<std::string>{"profile.low_busy", "profile.copies_dominate"}));
    EXPECT_EQ(s.gpus[0].copy_busy_ns, 800 * ms);
    EXPECT_EQ(s.findings[1].message,
        "copies kept the GPU busy 800.0 ms (80.0% of the trace), kernels 100.0 ms: HtoD 500.0 ms, DtoH 400.0 ms");
}

TEST(NsysSummary, ManyTinyKernels)
{
    std::vector<Kernel> k;
    for (std::int64_t i = 0; i < 1000; ++i) {
        const std::int64_t start = t0 + i * 20 * us;
        k.push_back({start, start + (i % 4 == 0 ? 12 : 5) * us, 0, 2, 7});
    }
    const auto s = summarize({trace_of(k, 20)});
    const GpuSummary& g = s.gpus.at(0);
    EXPECT_EQ(g.tiny_kernels, 750U);
    EXPECT_DOUBLE_EQ(g.median_kernel_ns, 5.0 * us);
    ASSERT_EQ(codes(s), (std::vector<std::string>{"profile.low_busy", "profile.tiny_kernels"}));
    EXPECT_EQ(s.findings[1].message, "750 of 1000 kernels ran under 10 us (median 5.0 us)");
    k.pop_back();
    EXPECT_EQ(codes(summarize({trace_of(k, 20)})), std::vector<std::string>{"profile.low_busy"})
        << "999 kernels are not many";
}

TEST(NsysSummary, TwoDevicesAreSummarisedApartInDeviceOrder)
{
    Trace t = trace_of({{t0, t0 + 900 * ms, 3, 0, 7}, {t0, t0 + 100 * ms, 1, 0, 7}});
    t.gpu_names = {{1, "A"}, {3, "B"}, {5, "unused"}};
    const auto s = summarize({t});
    ASSERT_EQ(s.gpus.size(), 2U) << "a GPU without events is left out";
    EXPECT_EQ(s.gpus[0].device, 1U);
    EXPECT_EQ(s.gpus[0].name, "A");
    EXPECT_EQ(s.gpus[0].busy_ns, 100 * ms);
    EXPECT_EQ(s.gpus[1].device, 3U);
    EXPECT_EQ(s.gpus[1].busy_ns, 900 * ms);
    ASSERT_EQ(s.findings.size(), 1U);
    EXPECT_EQ(s.findings[0].facts["device_id"], 1);
}

TEST(NsysSummary, EventsWithoutTimestampsAreLeftOutAndTheSpanFallsBackToTheEvents)
{
    Trace t = trace_of({{0, 0, 0, 0, 7}, {t0 + 100 * ms, t0 + 300 * ms, 0, 0, 7}, {t0 + 50 * ms, t0, 0, 0, 7}});
    t.span_start = 0;
    t.span_end = 0;
    t.copies.push_back({t0 + 300 * ms, t0 + 500 * ms, 0, CopyKind::dtod, 10, 1, false});
    const auto s = summarize({t});
    ASSERT_EQ(s.reports.size(), 1U);
    EXPECT_EQ(s.reports[0].skipped, 2U);
    EXPECT_EQ(s.reports[0].kernels, 1U);
    EXPECT_EQ(s.reports[0].span_ns, 400 * ms);
    EXPECT_EQ(s.reports[0].notes.size(), 1U);
    EXPECT_DOUBLE_EQ(s.gpus.at(0).busy_share(), 0.5);
}

TEST(NsysSummary, AnExportWithoutKernelsSaysSo)
{
    Trace empty;
    empty.file = "empty.sqlite";
    const auto s = summarize({empty});
    EXPECT_TRUE(s.gpus.empty());
    ASSERT_EQ(codes(s), std::vector<std::string>{"profile.no_kernels"});
    EXPECT_EQ(s.findings[0].severity, Severity::info);
    EXPECT_EQ(s.findings[0].message, "no CUDA kernels, copies or memsets in empty.sqlite");
    EXPECT_TRUE(s.findings[0].facts["device_id"].is_null());
}

TEST(NsysSummary, FindingsAreOrderedBySeverity)
{
    Trace empty;
    empty.file = "a.sqlite";
    Trace idle = trace_of({{t0, t0 + 1 * ms, 0, 0, 7}});
    idle.file = "b.sqlite";
    const auto s = summarize({empty, idle});
    ASSERT_EQ(codes(s), (std::vector<std::string>{"profile.low_busy", "profile.no_kernels"}));
    EXPECT_EQ(s.gpus.at(0).file, "b.sqlite");
}

TEST(NsysCopyKind, NumbersAreCuptisNotCudaMemcpyKind)
{
    EXPECT_EQ(copy_kind_from_number(1), CopyKind::htod);
    EXPECT_EQ(copy_kind_from_number(2), CopyKind::dtoh);
    EXPECT_EQ(copy_kind_from_number(8), CopyKind::dtod);
    EXPECT_EQ(copy_kind_from_number(9), CopyKind::htoh);
    EXPECT_EQ(copy_kind_from_number(10), CopyKind::ptop);
    for (int n : {0, 3, 4, 5, 6, 7, 11, 12, 13, -1, 99}) {
        EXPECT_EQ(copy_kind_from_number(n), CopyKind::other) << n;
    }
}

TEST(NsysCopyKind, EnumRowsByNameOrLabel)
{
    EXPECT_EQ(copy_kind_from_enum("CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"), CopyKind::htod);
    EXPECT_EQ(copy_kind_from_enum("CUDA_MEMCPY_KIND_PTOP", ""), CopyKind::ptop);
    EXPECT_EQ(copy_kind_from_enum("CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"), CopyKind::other);
    EXPECT_EQ(copy_kind_from_enum("CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"), CopyKind::other);
    EXPECT_EQ(copy_kind_from_enum("", "Device-to-Host"), CopyKind::dtoh);
    EXPECT_EQ(copy_kind_from_enum("", "[CUDA memcpy DtoD]"), CopyKind::other);
    EXPECT_EQ(copy_kind_from_enum("", "DtoD"), CopyKind::dtod);
}

TEST(NsysFormat, DurationsAndTimes)
{
    EXPECT_EQ(format_duration(2.5e9), "2.500 s");
    EXPECT_EQ(format_duration(999.94e6), "999.9 ms");
    EXPECT_EQ(format_duration(12'345), "12.3 us");
    EXPECT_EQ(format_duration(850), "850 ns");
    EXPECT_EQ(format_duration(0), "0 ns");
    EXPECT_EQ(format_time(710 * ms), "0.710 s");
}

TEST(NsysCodes, EveryCodeHasItsTexts)
{
    for (const auto& c : finding_codes()) {
        EXPECT_EQ(std::string(c.code).rfind("profile.", 0), 0U) << c.code;
        EXPECT_NE(std::string(c.title), "") << c.code;
        EXPECT_NE(std::string(c.explanation), "") << c.code;
        EXPECT_NE(std::string(c.remedy), "") << c.code;
    }
}
