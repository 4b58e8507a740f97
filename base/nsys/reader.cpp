#include "base/nsys/reader.hpp"

#include "base/byte_size.hpp"
#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/text.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <set>
#include <sqlite3.h>
#include <sys/stat.h>

namespace base::nsys {

namespace {

using base::Error;

constexpr const char* kernel_table = "CUPTI_ACTIVITY_KIND_KERNEL";
constexpr const char* memcpy_table = "CUPTI_ACTIVITY_KIND_MEMCPY";
constexpr const char* memset_table = "CUPTI_ACTIVITY_KIND_MEMSET";

// Every table read here; a view or virtual table by one of these names is refused.
constexpr const char* tables_read[] = {kernel_table, memcpy_table, memset_table, "StringIds", "META_DATA_EXPORT",
    "ANALYSIS_DETAILS", "TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU", "ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND"};

// SQLite's bounds on what the file may make it do, beside ReadLimits. The SQL run here is a few
// hundred bytes and a few levels deep; the CREATE statements of an export (parsed when the
// file opens) are as small.
constexpr int max_sql_bytes = 1 << 20;
constexpr int max_expression_depth = 100;
// How often (in SQLite virtual machine steps) the deadline is checked: about every millisecond.
constexpr int progress_steps = 10000;

const char* what_to_do = "export the report again with 'nsys export --type sqlite REPORT.nsys-rep'";

bool ends_with(const std::string& text, const std::string& suffix)
{
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One read-only connection; every statement on it names the file in its errors. The file is not
// trusted: SQLite is held to the limits, and a progress handler stops it at the deadline.
class Database {
public:
    Database(const std::string& path, const ReadLimits& limits)
        : m_path(path), m_limits(limits), m_deadline(std::chrono::steady_clock::now() + limits.deadline)
    {
        const int rc = sqlite3_open_v2(path.c_str(), &m_db, SQLITE_OPEN_READONLY, nullptr);
        if (rc != SQLITE_OK) {
            const std::string why = m_db != nullptr ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
            sqlite3_close(m_db);
            throw Error(fmt::format("cannot open {}: {}", path, why));
        }
        const auto value_bytes = static_cast<int>(std::clamp<std::int64_t>(limits.value_bytes, 1, 1 << 30));
        sqlite3_limit(m_db, SQLITE_LIMIT_LENGTH, value_bytes);
        sqlite3_limit(m_db, SQLITE_LIMIT_SQL_LENGTH, std::min(max_sql_bytes, value_bytes));
        sqlite3_limit(m_db, SQLITE_LIMIT_EXPR_DEPTH, max_expression_depth);
        sqlite3_limit(m_db, SQLITE_LIMIT_ATTACHED, 0);
        // Functions in the file's schema (generated columns, defaults) run only if harmless.
        sqlite3_db_config(m_db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
        sqlite3_db_config(m_db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
        sqlite3_progress_handler(m_db, progress_steps, &Database::past_deadline, this);
    }
    ~Database() { sqlite3_close(m_db); }
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    sqlite3* handle() const { return m_db; }
    const std::string& path() const { return m_path; }
    const ReadLimits& limits() const { return m_limits; }
    /// The progress handler stopped a statement at the deadline.
    bool timed_out() const { return m_timed_out; }

private:
    static int past_deadline(void* self)
    {
        auto* db = static_cast<Database*>(self);
        db->m_timed_out = db->m_timed_out || std::chrono::steady_clock::now() >= db->m_deadline;
        return db->m_timed_out ? 1 : 0;
    }

    std::string m_path;
    ReadLimits m_limits;
    std::chrono::steady_clock::time_point m_deadline;
    bool m_timed_out = false;
    sqlite3* m_db = nullptr;
};

// A prepared statement. SQL text is built only from the table and column names of this file, never
// from user input; values are bound.
class Statement {
public:
    Statement(const Database& db, const std::string& sql, const char* what) : m_db(db), m_what(what)
    {
        const int rc = sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &m_stmt, nullptr);
        if (rc != SQLITE_OK) {
            fail(rc);
        }
    }
    ~Statement() { sqlite3_finalize(m_stmt); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    bool step()
    {
        const int rc = sqlite3_step(m_stmt);
        if (rc == SQLITE_ROW) {
            return true;
        }
        if (rc == SQLITE_DONE) {
            return false;
        }
        fail(rc);
    }
    void reset()
    {
        sqlite3_reset(m_stmt);
        sqlite3_clear_bindings(m_stmt);
    }
    void bind(int index, std::int64_t value) { sqlite3_bind_int64(m_stmt, index, value); }
    void bind(int index, const std::string& value)
    {
        sqlite3_bind_text(m_stmt, index, value.c_str(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
    }
    bool null(int column) const { return sqlite3_column_type(m_stmt, column) == SQLITE_NULL; }
    std::int64_t integer(int column) const { return sqlite3_column_int64(m_stmt, column); }
    std::string text(int column) const
    {
        const auto* p = sqlite3_column_text(m_stmt, column);
        return p != nullptr ? std::string(reinterpret_cast<const char*>(p)) : std::string();
    }

private:
    [[noreturn]] void fail(int rc) const
    {
        const std::string why = sqlite3_errmsg(m_db.handle());
        if ((rc & 0xff) == SQLITE_INTERRUPT && m_db.timed_out()) {
            throw Error(fmt::format("{}: reading took over {} s, the most one export may take (stopped in {}); an "
                                    "export as Nsight Systems writes it reads in seconds: {}",
                m_db.path(), m_db.limits().deadline.count(), m_what, what_to_do));
        }
        if ((rc & 0xff) == SQLITE_TOOBIG) {
            throw Error(fmt::format("{}: a value in {} is longer than {}, the longest gpudoctor reads ({}); Nsight "
                                    "Systems writes no such value: {}",
                m_db.path(), m_what, format_bytes(static_cast<std::uint64_t>(m_db.limits().value_bytes)), why,
                what_to_do));
        }
        if (rc == SQLITE_NOTADB || (rc & 0xff) == SQLITE_NOTADB) {
            throw Error(fmt::format("{} is not an SQLite database ({}); give the SQLite export of an Nsight Systems "
                                    "report (nsys profile --export sqlite, or nsys export --type sqlite REPORT)",
                m_db.path(), why));
        }
        throw Error(fmt::format("{}: reading {} failed: {}", m_db.path(), m_what, why));
    }

    const Database& m_db;
    const char* m_what;
    sqlite3_stmt* m_stmt = nullptr;
};

// Which tables the file has, and their columns when asked. Only real tables count: a view runs
// whatever query it holds (a recursive one grows without end), a virtual table whatever its module
// does. Nsight Systems writes neither by the names read here, so those are refused.
class Schema {
public:
    explicit Schema(const Database& db) : m_db(db)
    {
        Statement s(db, "SELECT type, name, substr(sql, 1, 32) FROM sqlite_master WHERE type IN ('table', 'view')",
            "the table list");
        while (s.step()) {
            const std::string type = s.text(0);
            const std::string name = s.text(1);
            const bool is_virtual = upper_case(s.text(2)).rfind("CREATE VIRTUAL", 0) == 0;
            if (type == "table" && !is_virtual) {
                m_tables.insert(name);
                continue;
            }
            for (const char* table : tables_read) {
                if (upper_case(name) == upper_case(table)) {
                    throw Error(fmt::format("{}: {} is a {}, not a table; gpudoctor reads only the tables Nsight "
                                            "Systems writes: {}",
                        db.path(), name, is_virtual ? "virtual table" : "view", what_to_do));
                }
            }
        }
    }

    bool has(const std::string& table) const { return m_tables.count(table) > 0; }
    bool empty() const { return m_tables.empty(); }

    const std::set<std::string>& columns(const std::string& table)
    {
        auto it = m_columns.find(table);
        if (it == m_columns.end()) {
            std::set<std::string> names;
            Statement s(m_db, "SELECT name FROM pragma_table_info(?1)", "a table's columns");
            s.bind(1, table);
            while (s.step()) {
                names.insert(s.text(0));
            }
            it = m_columns.emplace(table, std::move(names)).first;
        }
        return it->second;
    }

    bool has(const std::string& table, const std::string& column)
    {
        return has(table) && columns(table).count(column) > 0;
    }

    /// `"column"` when the table has it, else NULL: a SELECT list that works on every schema.
    std::string column_or_null(const std::string& table, const std::string& column)
    {
        return has(table, column) ? "\"" + column + "\"" : "NULL";
    }

    /// Throws when the table lacks a column that every export version has.
    void require(const std::string& table, std::initializer_list<const char*> needed)
    {
        for (const char* column : needed) {
            if (!has(table, column)) {
                throw Error(fmt::format("{}: table {} has no column {}; gpudoctor reads the SQLite exports of Nsight "
                                        "Systems 2021 and later",
                    m_db.path(), table, column));
            }
        }
    }

private:
    const Database& m_db;
    std::set<std::string> m_tables;
    std::map<std::string, std::set<std::string>> m_columns;
};

void check_is_export(const Database& db, const Schema& schema)
{
    const bool cuda = schema.has(kernel_table) || schema.has(memcpy_table) || schema.has(memset_table);
    if (!schema.has("StringIds") && schema.has("StringTable")) {
        throw Error(fmt::format("{} is an nvprof database (StringTable), not an Nsight Systems export; profile with "
                                "nsys (gpurun --profile nsys) and read its .sqlite export",
            db.path()));
    }
    if (!schema.has("StringIds") && !cuda) {
        throw Error(fmt::format("{} is not an Nsight Systems export: it has no StringIds table and no "
                                "CUPTI_ACTIVITY_KIND_* tables",
            db.path()));
    }
    if (!cuda) {
        throw Error(fmt::format("{} has no CUDA activity: no {}, {} or {} table; profile with --trace cuda (as gpurun "
                                "--profile nsys does) and check that the program used a GPU",
            db.path(), kernel_table, memcpy_table, memset_table));
    }
}

void read_metadata(const Database& db, Schema& schema, Trace& trace)
{
    if (schema.has("META_DATA_EXPORT", "name") && schema.has("META_DATA_EXPORT", "value")) {
        Statement s(db,
            "SELECT name, value FROM META_DATA_EXPORT WHERE name IN ('EXPORT_PRODUCT_VERSION', "
            "'EXPORT_SCHEMA_VERSION')",
            "META_DATA_EXPORT");
        while (s.step()) {
            (s.text(0) == "EXPORT_PRODUCT_VERSION" ? trace.product_version : trace.schema_version) = s.text(1);
        }
    }
    const std::string details = "ANALYSIS_DETAILS";
    const bool start = schema.has(details, "startTime");
    const bool stop = schema.has(details, "stopTime");
    const bool duration = schema.has(details, "duration");
    if (stop || duration) {
        Statement s(db,
            fmt::format("SELECT {}, {}, {} FROM ANALYSIS_DETAILS", start ? "startTime" : "0",
                stop ? "stopTime" : "NULL", duration ? "duration" : "NULL"),
            "ANALYSIS_DETAILS");
        if (s.step()) {
            trace.span_start = s.integer(0);
            trace.span_end = !s.null(1) ? s.integer(1) : trace.span_start + s.integer(2);
        }
    }
    // GPU names: TARGET_INFO_GPU(id, name) since mid-2021, TARGET_INFO_CUDA_GPU(deviceId, name) before.
    for (auto [table, keys] : {std::pair{"TARGET_INFO_GPU", std::vector<const char*>{"id"}},
             std::pair{"TARGET_INFO_CUDA_GPU", std::vector<const char*>{"deviceId", "id"}}}) {
        const char* key = nullptr;
        for (const char* k : keys) {
            if (key == nullptr && schema.has(table, k)) {
                key = k;
            }
        }
        if (key == nullptr || !schema.has(table, "name")) {
            continue;
        }
        Statement s(db, fmt::format("SELECT \"{}\", name FROM {}", key, table), table);
        while (s.step()) {
            if (!s.null(0) && !s.null(1)) {
                trace.gpu_names.emplace(static_cast<std::uint32_t>(s.integer(0)), s.text(1));
            }
        }
        break;
    }
}

// copyKind number -> CopyKind, from ENUM_CUDA_MEMCPY_OPER when the export has it.
std::map<std::int64_t, CopyKind> copy_kinds(const Database& db, Schema& schema, Trace& trace)
{
    std::map<std::int64_t, CopyKind> kinds;
    const std::string table = "ENUM_CUDA_MEMCPY_OPER";
    if (schema.has(table, "id") && (schema.has(table, "name") || schema.has(table, "label"))) {
        Statement s(db,
            fmt::format("SELECT id, {}, {} FROM {}", schema.column_or_null(table, "name"),
                schema.column_or_null(table, "label"), table),
            "ENUM_CUDA_MEMCPY_OPER");
        while (s.step()) {
            kinds[s.integer(0)] = copy_kind_from_enum(s.text(1), s.text(2));
        }
    } else if (schema.has(memcpy_table)) {
        trace.notes.emplace_back("no ENUM_CUDA_MEMCPY_OPER table: copy kinds from CUPTI's copyKind numbers");
    }
    return kinds;
}

// The memory-kind numbers that mean pageable host memory: from ENUM_CUDA_MEM_KIND, else CUPTI's 0.
std::set<std::int64_t> pageable_kinds(const Database& db, Schema& schema)
{
    const std::string table = "ENUM_CUDA_MEM_KIND";
    if (!schema.has(table, "id") || !(schema.has(table, "name") || schema.has(table, "label"))) {
        return {0};
    }
    std::set<std::int64_t> ids;
    Statement s(db,
        fmt::format("SELECT id, {}, {} FROM {}", schema.column_or_null(table, "name"),
            schema.column_or_null(table, "label"), table),
        "ENUM_CUDA_MEM_KIND");
    while (s.step()) {
        if (upper_case(s.text(1)).find("PAGEABLE") != std::string::npos || upper_case(s.text(2)) == "PAGEABLE") {
            ids.insert(s.integer(0));
        }
    }
    return ids;
}

void read_kernels(const Database& db, Schema& schema, Trace& trace)
{
    if (!schema.has(kernel_table)) {
        return;
    }
    schema.require(kernel_table, {"start", "end", "deviceId"});
    Statement s(db,
        fmt::format("SELECT start, \"end\", deviceId, {}, {}, {} FROM {}",
            schema.column_or_null(kernel_table, "streamId"), schema.column_or_null(kernel_table, "demangledName"),
            schema.column_or_null(kernel_table, "shortName"), kernel_table),
        kernel_table);
    const bool strings = schema.has("StringIds", "id") && schema.has("StringIds", "value");
    std::optional<Statement> lookup;
    if (strings) {
        lookup.emplace(db, "SELECT value FROM StringIds WHERE id = ?1", "StringIds");
    }
    auto string_of = [&](const Statement& row, int column) -> std::optional<std::string> {
        if (!lookup || row.null(column)) {
            return std::nullopt;
        }
        lookup->reset();
        lookup->bind(1, row.integer(column));
        if (!lookup->step()) {
            return std::nullopt;
        }
        return lookup->text(0);
    };
    // Kernel names by (demangledName, shortName) id pair: looked up once each.
    std::map<std::pair<std::int64_t, std::int64_t>, std::uint32_t> names;
    while (s.step()) {
        Kernel k;
        k.start = s.integer(0);
        k.end = s.integer(1);
        k.device = static_cast<std::uint32_t>(s.integer(2));
        k.stream = s.null(3) ? -1 : s.integer(3);
        const std::pair<std::int64_t, std::int64_t> key{s.null(4) ? -1 : s.integer(4), s.null(5) ? -1 : s.integer(5)};
        auto it = names.find(key);
        if (it == names.end()) {
            std::optional<std::string> name = string_of(s, 4);
            if (!name || name->empty()) {
                name = string_of(s, 5);
            }
            if (!name || name->empty()) {
                name = fmt::format("kernel #{}", key.first >= 0 ? key.first : key.second);
            }
            trace.kernel_names.push_back(*name);
            it = names.emplace(key, static_cast<std::uint32_t>(trace.kernel_names.size() - 1)).first;
        }
        k.name = it->second;
        trace.kernels.push_back(k);
    }
}

void read_copies(const Database& db, Schema& schema, Trace& trace)
{
    if (!schema.has(memcpy_table)) {
        return;
    }
    schema.require(memcpy_table, {"start", "end", "deviceId", "bytes", "copyKind"});
    const auto kinds = copy_kinds(db, schema, trace);
    const auto pageable = pageable_kinds(db, schema);
    Statement s(db,
        fmt::format("SELECT start, \"end\", deviceId, bytes, copyKind, {}, {}, {}, {}, {} FROM {}",
            schema.column_or_null(memcpy_table, "srcKind"), schema.column_or_null(memcpy_table, "dstKind"),
            schema.column_or_null(memcpy_table, "srcDeviceId"), schema.column_or_null(memcpy_table, "dstDeviceId"),
            schema.column_or_null(memcpy_table, "copyCount"), memcpy_table),
        memcpy_table);
    while (s.step()) {
        Copy c;
        c.start = s.integer(0);
        c.end = s.integer(1);
        c.device = static_cast<std::uint32_t>(s.integer(2));
        c.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(0, s.integer(3)));
        const std::int64_t kind = s.integer(4);
        if (kinds.empty()) {
            c.kind = copy_kind_from_number(kind);
        } else {
            auto it = kinds.find(kind);
            c.kind = it != kinds.end() ? it->second : CopyKind::other;
        }
        // The host side of a copy: the source of HtoD, the destination of DtoH.
        const int host_side = c.kind == CopyKind::htod ? 5 : c.kind == CopyKind::dtoh ? 6 : -1;
        c.pageable = host_side > 0 && !s.null(host_side) && pageable.count(s.integer(host_side)) > 0;
        c.src_device = s.null(7) ? -1 : s.integer(7);
        c.dst_device = s.null(8) ? -1 : s.integer(8);
        c.count = s.null(9) || s.integer(9) <= 0 ? 1 : static_cast<std::uint64_t>(s.integer(9));
        trace.copies.push_back(c);
    }
}

void read_memsets(const Database& db, Schema& schema, Trace& trace)
{
    if (!schema.has(memset_table)) {
        return;
    }
    schema.require(memset_table, {"start", "end", "deviceId"});
    Statement s(db,
        fmt::format(
            "SELECT start, \"end\", deviceId, {} FROM {}", schema.column_or_null(memset_table, "bytes"), memset_table),
        memset_table);
    while (s.step()) {
        Memset m;
        m.start = s.integer(0);
        m.end = s.integer(1);
        m.device = static_cast<std::uint32_t>(s.integer(2));
        m.bytes = s.null(3) ? 0 : static_cast<std::uint64_t>(std::max<std::int64_t>(0, s.integer(3)));
        trace.memsets.push_back(m);
    }
}

} // namespace

Trace read_export(const std::string& path, const ReadLimits& limits)
{
    struct stat st { };
    if (stat(path.c_str(), &st) != 0) {
        throw Error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    }
    if (S_ISDIR(st.st_mode)) {
        throw Error(fmt::format("{} is a directory", path));
    }
    if (ends_with(path, ".nsys-rep") || ends_with(path, ".qdrep")) {
        throw Error(fmt::format("{} is an Nsight Systems report, not its SQLite export; run 'nsys export --type "
                                "sqlite {}' and read the .sqlite file (gpurun --profile nsys writes both)",
            path, path));
    }
    Database db(path, limits);
    Schema schema(db);
    check_is_export(db, schema);
    Trace trace;
    trace.file = path;
    read_metadata(db, schema, trace);
    read_kernels(db, schema, trace);
    read_copies(db, schema, trace);
    read_memsets(db, schema, trace);
    return trace;
}

std::vector<std::string> export_files(const std::vector<std::string>& arguments)
{
    return input_files(
        arguments, [](const std::string& path) { return path.ends_with(".sqlite"); },
        "holds no .sqlite export; export a report with 'nsys export --type sqlite REPORT.nsys-rep'");
}

} // namespace base::nsys
