#pragma once

// Writes Nsight Systems SQLite exports for tests, in the table and column shapes of three
// generations (see the reference notes on the export schema):
//   2021: TARGET_INFO_CUDA_GPU(deviceId, name), every column NOT NULL with defaults, no ENUM_*
//         tables, no ANALYSIS_DETAILS or META_DATA_EXPORT;
//   2024: schema 3.16.1 (nsys 2024.6.2): TARGET_INFO_GPU(id, name, ...), greenContextId,
//         mangledName, ENUM_CUDA_MEMCPY_OPER and ENUM_CUDA_MEM_KIND, ANALYSIS_DETAILS, META_DATA_EXPORT;
//   2026: schema 3.28.1 (nsys 2026.4): 2024 plus TARGET_INFO_CUDA_DEVICE, numaNodeId, the kernel
//         cluster columns and memcpy copyCount.
// The enum tables can be left out of the 2024 and 2026 shapes, as older exports lack them.
#include <cstdint>
#include <filesystem>
#include <map>
#include <sqlite3.h>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace test_support {

enum class NsysShape { s2021, s2024, s2026 };

struct NsysKernel {
    std::int64_t start;
    std::int64_t end;
    int device;
    std::int64_t stream;
    std::string name; ///< short name; the demangled name is "void NAME(float*)"
};

struct NsysCopy {
    std::int64_t start;
    std::int64_t end;
    int device;
    int copy_kind; ///< CUPTI numbers: 1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH, 10 PtoP
    std::int64_t bytes;
    int src_kind = 2; ///< memory kinds: 0 pageable, 1 pinned, 2 device
    int dst_kind = 2;
    int src_device = -1; ///< -1: the column's default (NULL, or 0 in the 2021 shape)
    int dst_device = -1;
    int copy_count = 1; ///< the 2026 shape's copyCount
};

struct NsysMemset {
    std::int64_t start;
    std::int64_t end;
    int device;
    std::int64_t bytes;
};

struct NsysFixture {
    NsysShape shape = NsysShape::s2024;
    bool enums = true; ///< write ENUM_* tables (2024 and 2026 shapes)
    bool cuda_tables = true; ///< false: no CUPTI_ACTIVITY_KIND_* table at all
    std::int64_t span_start = 0; ///< ANALYSIS_DETAILS (2024, 2026)
    std::int64_t span_end = 0;
    std::map<int, std::string> gpus; ///< deviceId -> name
    std::vector<NsysKernel> kernels;
    std::vector<NsysCopy> copies;
    std::vector<NsysMemset> memsets;
    /// Overrides ENUM_CUDA_MEM_KIND rows (id, name, label); empty = the 2024.6 rows.
    std::vector<std::tuple<int, std::string, std::string>> mem_kinds;

    void write(const std::filesystem::path& path) const
    {
        std::filesystem::remove(path);
        sqlite3* db = nullptr;
        if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
            throw std::runtime_error("cannot create " + path.string());
        }
        Writer w{db};
        try {
            w.exec("BEGIN");
            write_tables(w);
            w.exec("COMMIT");
        } catch (...) {
            sqlite3_close(db);
            throw;
        }
        sqlite3_close(db);
    }

private:
    struct Writer {
        sqlite3* db;
        void exec(const std::string& sql) const
        {
            char* error = nullptr;
            if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
                std::string what = error != nullptr ? error : "?";
                sqlite3_free(error);
                throw std::runtime_error("fixture SQL failed: " + what + ": " + sql);
            }
        }
        // Runs `sql` once per row; a value of nullptr-like "\x01" binds NULL.
        void insert(const std::string& sql, const std::vector<std::vector<std::string>>& rows) const
        {
            sqlite3_stmt* stmt = nullptr;
            if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
                throw std::runtime_error("fixture SQL failed: " + std::string(sqlite3_errmsg(db)) + ": " + sql);
            }
            for (const auto& row : rows) {
                sqlite3_reset(stmt);
                for (std::size_t i = 0; i < row.size(); ++i) {
                    const int index = static_cast<int>(i + 1);
                    if (row[i] == "\x01") {
                        sqlite3_bind_null(stmt, index);
                    } else if (!row[i].empty() && row[i][0] == '\'') {
                        sqlite3_bind_text(stmt, index, row[i].c_str() + 1, -1, SQLITE_TRANSIENT);
                    } else {
                        sqlite3_bind_int64(stmt, index, std::stoll(row[i]));
                    }
                }
                if (sqlite3_step(stmt) != SQLITE_DONE) {
                    std::string what = sqlite3_errmsg(db);
                    sqlite3_finalize(stmt);
                    throw std::runtime_error("fixture insert failed: " + what + ": " + sql);
                }
            }
            sqlite3_finalize(stmt);
        }
    };

    static std::string n(std::int64_t v) { return std::to_string(v); }
    static std::string t(const std::string& v) { return "'" + v; }
    static inline const std::string null = "\x01";

    void write_tables(const Writer& w) const
    {
        const bool old = shape == NsysShape::s2021;
        const bool now = shape == NsysShape::s2026;
        // Columns that every generation has but that these tests do not fill: NOT NULL with a
        // default in the 2021 shape (old exports wrote defaults instead of NULL), nullable later.
        const std::string filler = old ? " INTEGER NOT NULL DEFAULT 0" : " INTEGER";
        w.exec("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)");
        std::map<std::string, int> ids;
        std::vector<std::vector<std::string>> strings;
        auto id_of = [&](const std::string& s) {
            auto it = ids.find(s);
            if (it == ids.end()) {
                it = ids.emplace(s, static_cast<int>(ids.size()) + 1).first;
                strings.push_back({n(it->second), t(s)});
            }
            return it->second;
        };

        if (old) {
            w.exec("CREATE TABLE TARGET_INFO_CUDA_GPU (deviceId INTEGER NOT NULL, name TEXT NOT NULL, "
                   "numMultiprocessors INTEGER NOT NULL DEFAULT 0, numThreadsPerWarp INTEGER NOT NULL DEFAULT 32, "
                   "computeCapabilityMajor INTEGER NOT NULL DEFAULT 8, coreClockRate INTEGER NOT NULL DEFAULT 0)");
            std::vector<std::vector<std::string>> rows;
            for (const auto& [id, name] : gpus) {
                rows.push_back({n(id), t(name)});
            }
            w.insert("INSERT INTO TARGET_INFO_CUDA_GPU (deviceId, name) VALUES (?1, ?2)", rows);
        } else {
            w.exec(std::string("CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL DEFAULT 0, id INTEGER NOT NULL, "
                               "name TEXT, busLocation TEXT, isDiscrete INTEGER, totalMemory INTEGER, smCount INTEGER, "
                               "uuid TEXT, cuDevice INTEGER, computeMajor INTEGER, computeMinor INTEGER") +
                (now ? ", numaNodeId INTEGER" : "") + ")");
            std::vector<std::vector<std::string>> rows;
            for (const auto& [id, name] : gpus) {
                rows.push_back({n(id), t(name), t("0000:" + std::to_string(0x10 + id) + ":00.0")});
            }
            w.insert("INSERT INTO TARGET_INFO_GPU (id, name, busLocation) VALUES (?1, ?2, ?3)", rows);
            if (now) {
                w.exec("CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER NOT NULL, pid INTEGER NOT "
                       "NULL, uuid TEXT, numMultiprocessors INTEGER)");
                std::vector<std::vector<std::string>> devices;
                for (const auto& [id, name] : gpus) {
                    devices.push_back({n(id), n(id)});
                }
                w.insert("INSERT INTO TARGET_INFO_CUDA_DEVICE (gpuId, cudaId, pid) VALUES (?1, ?2, 4242)", devices);
            }
            w.exec("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)");
            w.insert("INSERT INTO META_DATA_EXPORT (name, value) VALUES (?1, ?2)",
                {{t("EXPORT_SCHEMA_VERSION"), t(now ? "3.28.1" : "3.16.1")},
                    {t("EXPORT_PRODUCT_VERSION"), t(now ? "2026.4.1.100" : "2024.6.2.225")},
                    {t("EXPORT_OS"), t("Linux")}});
            w.exec("CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER, duration INTEGER NOT NULL, startTime INTEGER NOT "
                   "NULL, stopTime INTEGER NOT NULL)");
            w.insert("INSERT INTO ANALYSIS_DETAILS VALUES (0, ?1, ?2, ?3)",
                {{n(span_end - span_start), n(span_start), n(span_end)}});
            if (enums) {
                const char* enum_table = "(id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT)";
                w.exec(std::string("CREATE TABLE ENUM_CUDA_MEMCPY_OPER ") + enum_table);
                w.insert("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?1, ?2, ?3)",
                    {{"0", t("CUDA_MEMCPY_KIND_UNKNOWN"), t("Unknown")},
                        {"1", t("CUDA_MEMCPY_KIND_HTOD"), t("Host-to-Device")},
                        {"2", t("CUDA_MEMCPY_KIND_DTOH"), t("Device-to-Host")},
                        {"3", t("CUDA_MEMCPY_KIND_HTOA"), t("Host-to-Array")},
                        {"8", t("CUDA_MEMCPY_KIND_DTOD"), t("Device-to-Device")},
                        {"9", t("CUDA_MEMCPY_KIND_HTOH"), t("Host-to-Host")},
                        {"10", t("CUDA_MEMCPY_KIND_PTOP"), t("Peer-to-Peer")},
                        {"11", t("CUDA_MEMCPY_KIND_UVM_HTOD"), t("Unified Host-to-Device")}});
                w.exec(std::string("CREATE TABLE ENUM_CUDA_MEM_KIND ") + enum_table);
                std::vector<std::vector<std::string>> kinds;
                if (mem_kinds.empty()) {
                    kinds = {{"0", t("CUDA_MEMOPR_MEMORY_KIND_PAGEABLE"), t("Pageable")},
                        {"1", t("CUDA_MEMOPR_MEMORY_KIND_PINNED"), t("Pinned")},
                        {"2", t("CUDA_MEMOPR_MEMORY_KIND_DEVICE"), t("Device")},
                        {"3", t("CUDA_MEMOPR_MEMORY_KIND_ARRAY"), t("Array")},
                        {"4", t("CUDA_MEMOPR_MEMORY_KIND_MANAGED"), t("Managed")},
                        {"7", t("CUDA_MEMOPR_MEMORY_KIND_UNKNOWN"), t("Unknown")}};
                }
                for (const auto& [id, name, label] : mem_kinds) {
                    kinds.push_back({n(id), t(name), t(label)});
                }
                w.insert("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?1, ?2, ?3)", kinds);
            }
        }
        // Tables nsys writes whatever was traced.
        w.exec("CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT)");
        w.exec("CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER)");

        if (cuda_tables) {
            const std::string green = old ? "" : ", greenContextId INTEGER";
            w.exec("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, "
                   "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL DEFAULT 1" +
                green + ", streamId INTEGER NOT NULL, correlationId" + filler + ", globalPid" + filler +
                ", demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL" + (old ? "" : ", mangledName INTEGER") +
                ", launchType" + filler +
                ", registersPerThread INTEGER NOT NULL DEFAULT 32, gridX INTEGER NOT NULL "
                "DEFAULT 1, gridY INTEGER NOT NULL DEFAULT 1, gridZ INTEGER NOT NULL DEFAULT 1, blockX INTEGER NOT "
                "NULL DEFAULT 128, blockY INTEGER NOT NULL DEFAULT 1, blockZ INTEGER NOT NULL DEFAULT 1" +
                (now ? ", clusterX INTEGER, clusterY INTEGER, clusterZ INTEGER, graphId INTEGER, "
                       "tensorSizeMinusOneElements TEXT NOT NULL DEFAULT ''"
                     : "") +
                ")");
            std::vector<std::vector<std::string>> kernel_rows;
            for (const auto& k : kernels) {
                kernel_rows.push_back({n(k.start), n(k.end), n(k.device), n(k.stream),
                    n(id_of("void " + k.name + "(float*)")), n(id_of(k.name))});
            }
            w.insert("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, streamId, demangledName, "
                     "shortName) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                kernel_rows);

            w.exec("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, "
                   "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL DEFAULT 1" +
                green + ", streamId INTEGER NOT NULL DEFAULT 7, correlationId" + filler + ", globalPid" + filler +
                ", bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId" + filler + ", srcKind" + filler +
                ", dstKind" + filler + ", srcDeviceId" + filler + ", srcContextId" + filler + ", dstDeviceId" + filler +
                ", dstContextId" + filler + ", migrationCause" + filler + ", graphNodeId" + filler +
                (old ? "" : ", virtualAddress INTEGER") + (now ? ", copyCount INTEGER" : "") + ")");
            std::vector<std::vector<std::string>> copy_rows;
            for (const auto& c : copies) {
                auto device = [&](int d) { return d >= 0 ? n(d) : old ? "0" : null; };
                copy_rows.push_back({n(c.start), n(c.end), n(c.device), n(c.bytes), n(c.copy_kind), n(c.src_kind),
                    n(c.dst_kind), device(c.src_device), device(c.dst_device)});
                if (now) {
                    copy_rows.back().push_back(n(c.copy_count));
                }
            }
            w.insert(std::string("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, \"end\", deviceId, bytes, copyKind, "
                                 "srcKind, dstKind, srcDeviceId, dstDeviceId") +
                    (now ? ", copyCount) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                         : ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
                copy_rows);

            w.exec("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, "
                   "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL DEFAULT 1" +
                green + ", streamId INTEGER NOT NULL DEFAULT 7, correlationId" + filler + ", globalPid" + filler +
                ", value INTEGER NOT NULL DEFAULT 0, bytes INTEGER NOT NULL, graphNodeId" + filler + ", memKind" +
                filler + ")");
            std::vector<std::vector<std::string>> memset_rows;
            for (const auto& m : memsets) {
                memset_rows.push_back({n(m.start), n(m.end), n(m.device), n(m.bytes)});
            }
            w.insert("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, \"end\", deviceId, bytes) VALUES (?1, ?2, ?3, ?4)",
                memset_rows);

            w.exec("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, "
                   "eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue "
                   "INTEGER NOT NULL)");
        }
        w.insert("INSERT INTO StringIds (id, value) VALUES (?1, ?2)", strings);
    }
};

/// The scenario the reader and CLI tests share, 2 s long from t0 = 1 s (times below from t0):
///   GPU 0 "NVIDIA H100 80GB HBM3": gemm on stream 7 [0, 400 ms) and on stream 13 [200, 600 ms)
///     (overlapping: busy 600 ms, not 800), relu on stream 7 [1400, 1500 ms); copies: HtoD 64 MiB
///     pageable [600, 700 ms), HtoD 32 MiB pinned [700, 710 ms), DtoH 4 B pageable [1500, 1500.01 ms),
///     PtoP 16 MiB to GPU 1 [1510, 1520 ms), DtoD 1 MiB [1600, 1601 ms), HtoH 1 KiB [1700, 1700.5 ms);
///     memset 4 KiB [1800, 1800.1 ms). Busy 700 ms = 35%; one idle gap, 690 ms from 710 ms.
///   GPU 1 "NVIDIA A100-SXM4-80GB": allreduce on stream 20 [100, 300 ms) and [1900, 2000 ms);
///     HtoD 512 MiB pinned [300, 1100 ms). Busy 300 ms = 15%; copies 800 ms; idle 800 ms from 1100 ms.
inline NsysFixture two_gpus(NsysShape shape, bool enums = true)
{
    constexpr std::int64_t t0 = 1'000'000'000;
    constexpr std::int64_t ms = 1'000'000;
    constexpr std::int64_t us = 1'000;
    constexpr std::int64_t mib = 1 << 20;
    NsysFixture f;
    f.shape = shape;
    f.enums = enums;
    f.span_start = t0;
    f.span_end = t0 + 2000 * ms;
    f.gpus = {{0, "NVIDIA H100 80GB HBM3"}, {1, "NVIDIA A100-SXM4-80GB"}};
    f.kernels = {{t0, t0 + 400 * ms, 0, 7, "gemm"}, {t0 + 200 * ms, t0 + 600 * ms, 0, 13, "gemm"},
        {t0 + 1400 * ms, t0 + 1500 * ms, 0, 7, "relu"}, {t0 + 100 * ms, t0 + 300 * ms, 1, 20, "allreduce"},
        {t0 + 1900 * ms, t0 + 2000 * ms, 1, 20, "allreduce"}};
    f.copies = {{t0 + 600 * ms, t0 + 700 * ms, 0, 1, 64 * mib, 0, 2},
        {t0 + 700 * ms, t0 + 710 * ms, 0, 1, 32 * mib, 1, 2}, {t0 + 1500 * ms, t0 + 1500 * ms + 10 * us, 0, 2, 4, 2, 0},
        {t0 + 1510 * ms, t0 + 1520 * ms, 0, 10, 16 * mib, 2, 2, 0, 1},
        {t0 + 1600 * ms, t0 + 1601 * ms, 0, 8, 1 * mib, 2, 2},
        {t0 + 1700 * ms, t0 + 1700 * ms + 500 * us, 0, 9, 1024, 1, 1},
        {t0 + 300 * ms, t0 + 1100 * ms, 1, 1, 512 * mib, 1, 2}};
    f.memsets = {{t0 + 1800 * ms, t0 + 1800 * ms + 100 * us, 0, 4096}};
    return f;
}

} // namespace test_support
