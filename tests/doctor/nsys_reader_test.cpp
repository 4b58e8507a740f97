// The SQLite reader on exports written here in the 2021, 2024 and 2026 table shapes, with and
// without the ENUM_* tables: every shape gives the same numbers.
#include "base/nsys/reader.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/nsys_fixture.hpp"
#include "tests/support/temp_dir.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <sqlite3.h>

using base::nsys::CopyKind;
using test_support::error_of;
using test_support::NsysFixture;
using test_support::NsysShape;

namespace {

constexpr std::int64_t ms = 1'000'000;
constexpr std::int64_t us = 1'000;
constexpr std::uint64_t mib = 1 << 20;

struct Shape {
    const char* name;
    NsysShape shape;
    bool enums;
};

// A database made of `sql` alone, for files that are SQLite but no nsys export.
void write_sql(const std::filesystem::path& path, const char* sql)
{
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
    sqlite3_close(db);
}

[[maybe_unused]] void PrintTo(const Shape& s, std::ostream* os)
{
    *os << s.name;
}

class NsysExportShapes : public ::testing::TestWithParam<Shape> {
protected:
    std::string write(const NsysFixture& f, const std::string& name = "rank0.sqlite")
    {
        const auto path = m_dir / name;
        f.write(path);
        return path.string();
    }

    test_support::TempDir m_dir;
};

} // namespace

TEST_P(NsysExportShapes, TwoGpusOverlappingKernelsPeerAndPageableCopies)
{
    const Shape& shape = GetParam();
    const auto trace = base::nsys::read_export(write(test_support::two_gpus(shape.shape, shape.enums)));
    EXPECT_EQ(trace.kernels.size(), 5U);
    EXPECT_EQ(trace.copies.size(), 7U);
    EXPECT_EQ(trace.memsets.size(), 1U);
    EXPECT_EQ(trace.gpu_names.at(0), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(trace.gpu_names.at(1), "NVIDIA A100-SXM4-80GB");
    if (shape.shape == NsysShape::s2021) {
        EXPECT_EQ(trace.product_version, "");
        EXPECT_EQ(trace.span_end, 0) << "no ANALYSIS_DETAILS in 2021 exports";
    } else {
        EXPECT_EQ(trace.span_start, 1'000'000'000);
        EXPECT_EQ(trace.span_end, 3'000'000'000);
        EXPECT_EQ(trace.schema_version, shape.shape == NsysShape::s2026 ? "3.28.1" : "3.16.1");
    }
    EXPECT_EQ(trace.notes.size(), shape.enums && shape.shape != NsysShape::s2021 ? 0U : 1U);

    const auto s = base::nsys::summarize({trace});
    ASSERT_EQ(s.reports.size(), 1U);
    EXPECT_EQ(s.reports[0].span_ns, 2000 * ms);
    ASSERT_EQ(s.gpus.size(), 2U);

    const auto& g0 = s.gpus[0];
    EXPECT_EQ(g0.device, 0U);
    EXPECT_EQ(g0.name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(g0.busy_ns, 700 * ms) << "the union of the kernels, not their sum";
    EXPECT_EQ(g0.kernel_total_ns, 900 * ms);
    EXPECT_DOUBLE_EQ(g0.busy_share(), 0.35);
    EXPECT_EQ(g0.busy_with_copies_ns, 821 * ms + 610 * us);
    EXPECT_EQ(g0.copy_busy_ns, 121 * ms + 510 * us);
    ASSERT_EQ(g0.top_kernels.size(), 2U);
    EXPECT_EQ(g0.top_kernels[0].name, "void gemm(float*)");
    EXPECT_EQ(g0.top_kernels[0].count, 2U);
    EXPECT_EQ(g0.top_kernels[0].total_ns, 800 * ms);
    EXPECT_DOUBLE_EQ(g0.top_kernels[0].median_ns, 400.0 * ms);
    EXPECT_EQ(g0.top_kernels[1].name, "void relu(float*)");
    ASSERT_EQ(g0.streams.size(), 2U);
    EXPECT_EQ(g0.streams[0].stream, 7);
    EXPECT_EQ(g0.streams[0].kernels, 2U);
    EXPECT_EQ(g0.streams[1].stream, 13);

    EXPECT_EQ(g0.copy(CopyKind::htod).count, 2U);
    EXPECT_EQ(g0.copy(CopyKind::htod).bytes, 96 * mib);
    EXPECT_EQ(g0.copy(CopyKind::htod).total_ns, 110 * ms);
    EXPECT_DOUBLE_EQ(g0.copy(CopyKind::htod).bandwidth_gbps(), 96.0 * mib / (110 * ms));
    EXPECT_EQ(g0.copy(CopyKind::htod).pageable_count, 1U);
    EXPECT_EQ(g0.copy(CopyKind::htod).pageable_bytes, 64 * mib);
    EXPECT_EQ(g0.copy(CopyKind::dtoh).count, 1U);
    EXPECT_EQ(g0.copy(CopyKind::dtoh).pageable_bytes, 4U) << "the destination of a DtoH copy is its host side";
    EXPECT_EQ(g0.copy(CopyKind::dtod).bytes, mib);
    EXPECT_EQ(g0.copy(CopyKind::htoh).bytes, 1024U);
    EXPECT_EQ(g0.copy(CopyKind::ptop).bytes, 16 * mib);
    EXPECT_EQ(g0.copy(CopyKind::other).count, 0U);
    ASSERT_EQ(g0.peers.size(), 1U);
    EXPECT_EQ(g0.peers[0].src_device, 0);
    EXPECT_EQ(g0.peers[0].dst_device, 1);
    EXPECT_EQ(g0.memsets.bytes, 4096U);
    EXPECT_EQ(g0.gap_count, 1U);
    ASSERT_EQ(g0.longest_gaps.size(), 1U);
    EXPECT_EQ(g0.longest_gaps[0].start_ns, 710 * ms);
    EXPECT_EQ(g0.longest_gaps[0].length_ns, 690 * ms);

    const auto& g1 = s.gpus[1];
    EXPECT_EQ(g1.device, 1U);
    EXPECT_EQ(g1.busy_ns, 300 * ms);
    EXPECT_EQ(g1.copy_busy_ns, 800 * ms);
    EXPECT_EQ(g1.copy(CopyKind::htod).pageable_count, 0U);
    EXPECT_DOUBLE_EQ(g1.copy(CopyKind::htod).bandwidth_gbps(), 512.0 * mib / (800 * ms));

    std::vector<std::pair<std::string, std::int64_t>> findings;
    for (const auto& f : s.findings) {
        findings.emplace_back(f.code, f.facts.at("device_id").get<std::int64_t>());
    }
    EXPECT_EQ(findings,
        (std::vector<std::pair<std::string, std::int64_t>>{{"profile.low_busy", 0}, {"profile.pageable_copies", 0},
            {"profile.idle_gaps", 0}, {"profile.low_busy", 1}, {"profile.copies_dominate", 1},
            {"profile.idle_gaps", 1}}));
}

TEST_P(NsysExportShapes, AnExportWithEmptyCudaTables)
{
    const Shape& shape = GetParam();
    NsysFixture f;
    f.shape = shape.shape;
    f.enums = shape.enums;
    f.span_start = 1;
    f.span_end = 5'000'000'000;
    f.gpus = {{0, "NVIDIA H100 80GB HBM3"}};
    const auto trace = base::nsys::read_export(write(f));
    EXPECT_TRUE(trace.kernels.empty());
    const auto s = base::nsys::summarize({trace});
    EXPECT_TRUE(s.gpus.empty());
    ASSERT_EQ(s.findings.size(), 1U);
    EXPECT_EQ(s.findings[0].code, "profile.no_kernels");
}

INSTANTIATE_TEST_SUITE_P(Shapes, NsysExportShapes,
    ::testing::Values(Shape{"s2021", NsysShape::s2021, false}, Shape{"s2024", NsysShape::s2024, true},
        Shape{"s2024_no_enums", NsysShape::s2024, false}, Shape{"s2026", NsysShape::s2026, true},
        Shape{"s2026_no_enums", NsysShape::s2026, false}),
    [](const ::testing::TestParamInfo<Shape>& p) { return std::string(p.param.name); });

TEST(NsysExport, BatchedCopiesCountAsTheirCopyCount)
{
    test_support::TempDir dir;
    auto f = test_support::two_gpus(NsysShape::s2026);
    f.copies = {{1'100'000'000, 1'200'000'000, 0, 1, 1000, 1, 2, -1, -1, 8}};
    f.write(dir / "batched.sqlite");
    const auto trace = base::nsys::read_export((dir / "batched.sqlite").string());
    ASSERT_EQ(trace.copies.size(), 1U);
    EXPECT_EQ(trace.copies[0].count, 8U);
}

TEST(NsysExport, TheEnumTableWinsOverCuptisNumbers)
{
    // Memory-kind numbers changed between versions (4 was Unknown, then Managed): the export's own
    // table says which number is pageable.
    test_support::TempDir dir;
    auto f = test_support::two_gpus(NsysShape::s2024);
    f.mem_kinds = {
        {0, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"}, {5, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"}};
    f.copies = {{1'100'000'000, 1'200'000'000, 0, 1, 1000, 0, 2}, {1'300'000'000, 1'400'000'000, 0, 1, 1000, 5, 2}};
    f.write(dir / "kinds.sqlite");
    const auto trace = base::nsys::read_export((dir / "kinds.sqlite").string());
    ASSERT_EQ(trace.copies.size(), 2U);
    EXPECT_FALSE(trace.copies[0].pageable);
    EXPECT_TRUE(trace.copies[1].pageable);
    f.enums = false;
    f.write(dir / "kinds.sqlite");
    const auto fallback = base::nsys::read_export((dir / "kinds.sqlite").string());
    EXPECT_TRUE(fallback.copies[0].pageable) << "without the table, CUPTI's 0 is pageable";
    EXPECT_FALSE(fallback.copies[1].pageable);
}

TEST(NsysExport, KernelsWithoutADemangledNameUseTheShortName)
{
    test_support::TempDir dir;
    const auto path = dir / "names.sqlite";
    test_support::two_gpus(NsysShape::s2024).write(path);
    // An id with no string, as old exports wrote 0 for a missing name.
    write_sql(path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 999 WHERE streamId = 20");
    const auto trace = base::nsys::read_export(path.string());
    const auto s = base::nsys::summarize({trace});
    EXPECT_EQ(s.gpus.at(1).top_kernels.at(0).name, "allreduce");
}

TEST(NsysExport, WhatIsNotAnExportIsAnInputErrorNamingTheFile)
{
    test_support::TempDir dir;
    const std::string text = (dir / "notes.sqlite").string();
    std::ofstream(text) << "this is not a database, just text that is long enough to be read as a header\n";
    EXPECT_EQ(error_of([&] { base::nsys::read_export(text); }),
        text +
            " is not an SQLite database (file is not a database); give the SQLite export of an Nsight Systems "
            "report (nsys profile --export sqlite, or nsys export --type sqlite REPORT)");

    const std::string missing = (dir / "missing.sqlite").string();
    EXPECT_EQ(
        error_of([&] { base::nsys::read_export(missing); }), "cannot read " + missing + ": No such file or directory");

    const std::string rep = (dir / "rank0.nsys-rep").string();
    std::ofstream(rep) << "x";
    EXPECT_EQ(error_of([&] { base::nsys::read_export(rep); }),
        rep + " is an Nsight Systems report, not its SQLite export; run 'nsys export --type sqlite " + rep +
            "' and read the .sqlite file (gpurun --profile nsys writes both)");

    NsysFixture no_cuda;
    no_cuda.cuda_tables = false;
    no_cuda.write(dir / "cpu.sqlite");
    EXPECT_EQ(error_of([&] { base::nsys::read_export((dir / "cpu.sqlite").string()); }),
        (dir / "cpu.sqlite").string() +
            " has no CUDA activity: no CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY or "
            "CUPTI_ACTIVITY_KIND_MEMSET table; profile with --trace cuda (as gpurun --profile nsys does) and check "
            "that the program used a GPU");

    const auto other = dir / "other.sqlite";
    write_sql(other, "CREATE TABLE t (x INTEGER)");
    EXPECT_EQ(error_of([&] { base::nsys::read_export(other.string()); }),
        other.string() +
            " is not an Nsight Systems export: it has no StringIds table and no CUPTI_ACTIVITY_KIND_* "
            "tables");

    const auto nvprof = dir / "nvprof.sqlite";
    write_sql(nvprof,
        "CREATE TABLE StringTable (_id_ INTEGER PRIMARY KEY, value TEXT); CREATE TABLE "
        "CUPTI_ACTIVITY_KIND_KERNEL (_id_ INTEGER, start INTEGER, \"end\" INTEGER, name INTEGER)");
    EXPECT_NE(
        error_of([&] { base::nsys::read_export(nvprof.string()); }).find("is an nvprof database"), std::string::npos);

    const auto broken = dir / "broken.sqlite";
    write_sql(broken,
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT); CREATE TABLE "
        "CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, \"end\" INTEGER, streamId INTEGER)");
    EXPECT_EQ(error_of([&] { base::nsys::read_export(broken.string()); }),
        broken.string() +
            ": table CUPTI_ACTIVITY_KIND_KERNEL has no column deviceId; gpudoctor reads the SQLite "
            "exports of Nsight Systems 2021 and later");
}

TEST(NsysExport, DirectoriesAreReadAsTheirExportsInRankOrder)
{
    test_support::TempDir dir;
    std::filesystem::create_directories(dir / "p");
    for (const char* name : {"rank10.sqlite", "rank2.sqlite", "rank0.sqlite", "rank1.nsys-rep", "notes.txt"}) {
        std::ofstream(dir / "p" / name) << "x";
    }
    const std::string p = (dir / "p").string();
    EXPECT_EQ(base::nsys::export_files({p, "x.sqlite"}),
        (std::vector<std::string>{p + "/rank0.sqlite", p + "/rank2.sqlite", p + "/rank10.sqlite", "x.sqlite"}));
    std::filesystem::create_directories(dir / "empty");
    EXPECT_EQ(error_of([&] { base::nsys::export_files({(dir / "empty").string()}); }),
        (dir / "empty").string() +
            " holds no .sqlite export; export a report with 'nsys export --type sqlite REPORT.nsys-rep'");
}

// Files no Nsight Systems writes, made to exhaust the reader: each is refused with a message that
// names the file and says what to do, within the bounds of ReadLimits.
class HostileExport : public ::testing::Test {
protected:
    // A 2024 export changed by `sql`.
    std::string write(const char* sql)
    {
        const auto path = m_dir / "hostile.sqlite";
        test_support::two_gpus(NsysShape::s2024).write(path);
        write_sql(path, sql);
        return path.string();
    }

    test_support::TempDir m_dir;
};

TEST_F(HostileExport, AViewNamedLikeATableIsRefusedUnread)
{
    // A recursive view in StringIds' place; bounded here, so that a reader that ran it would end.
    const std::string path = write("DROP TABLE StringIds; CREATE VIEW StringIds (id, value) AS WITH RECURSIVE "
                                   "r(id, value) AS (SELECT 1, 'x' UNION ALL SELECT id + 1, value || 'x' FROM r "
                                   "WHERE id < 2000) SELECT id, value FROM r");
    EXPECT_EQ(error_of([&] { base::nsys::read_export(path); }),
        path +
            ": StringIds is a view, not a table; gpudoctor reads only the tables Nsight Systems writes: export the "
            "report again with 'nsys export --type sqlite REPORT.nsys-rep'");

    // Names differ from ours only in case: SQLite would read the view for our name.
    const std::string lower = write("ALTER TABLE CUPTI_ACTIVITY_KIND_MEMSET RENAME TO old_memsets; CREATE VIEW "
                                    "cupti_activity_kind_memset AS SELECT * FROM old_memsets");
    EXPECT_NE(error_of([&] { base::nsys::read_export(lower); }).find("cupti_activity_kind_memset is a view"),
        std::string::npos);
}

TEST_F(HostileExport, AViewByAnotherNameIsNeverRun)
{
    // Unbounded: running it would not end.
    const std::string path = write("CREATE VIEW endless (n) AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + "
                                   "1 FROM r) SELECT n FROM r");
    const auto trace = base::nsys::read_export(path);
    EXPECT_EQ(trace.kernels.size(), 5U);
}

TEST_F(HostileExport, AVirtualTableNamedLikeATableIsRefused)
{
    const auto path = m_dir / "virtual.sqlite";
    test_support::two_gpus(NsysShape::s2024).write(path);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const int rc = sqlite3_exec(
        db, "DROP TABLE StringIds; CREATE VIRTUAL TABLE StringIds USING fts4(id, value)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    if (rc != SQLITE_OK) {
        GTEST_SKIP() << "this SQLite has no fts4 module";
    }
    EXPECT_NE(
        error_of([&] { base::nsys::read_export(path.string()); }).find(": StringIds is a virtual table, not a table"),
        std::string::npos);
}

TEST_F(HostileExport, AValueLongerThanTheLimitIsRefused)
{
    // One kernel name of 5 MiB, past the default limit.
    const std::string big = write("UPDATE StringIds SET value = printf('%.*c', 5242880, 'x') WHERE id = (SELECT "
                                  "demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)");
    EXPECT_EQ(error_of([&] { base::nsys::read_export(big); }),
        big +
            ": a value in StringIds is longer than 4 MiB, the longest gpudoctor reads (string or blob too big); "
            "Nsight Systems writes no such value: export the report again with 'nsys export --type sqlite "
            "REPORT.nsys-rep'");

    // A stored value: 1 MiB is read at the default limit and refused at a limit of 64 KiB.
    const std::string stored = write("UPDATE StringIds SET value = printf('%.*c', 1048576, 'x')");
    EXPECT_NO_THROW(base::nsys::read_export(stored));
    base::nsys::ReadLimits small;
    small.value_bytes = 64 << 10;
    EXPECT_NE(error_of([&] {
        base::nsys::read_export(stored, small);
    }).find(": a value in StringIds is longer than 64 KiB, the longest gpudoctor reads"),
        std::string::npos);
}

TEST_F(HostileExport, ReadingPastTheDeadlineStopsWithTheFileNamed)
{
    // 5 * 2^10 kernels: more SQLite steps than one check of the deadline is apart.
    std::string doubling;
    for (int i = 0; i < 10; ++i) {
        doubling += "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL;";
    }
    const std::string path = write(doubling.c_str());
    EXPECT_EQ(base::nsys::read_export(path).kernels.size(), 5U << 10);
    base::nsys::ReadLimits none;
    none.deadline = std::chrono::seconds(0);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(error_of([&] { base::nsys::read_export(path, none); }),
        path +
            ": reading took over 0 s, the most one export may take (stopped in CUPTI_ACTIVITY_KIND_KERNEL); an "
            "export as Nsight Systems writes it reads in seconds: export the report again with 'nsys export "
            "--type sqlite REPORT.nsys-rep'");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}
