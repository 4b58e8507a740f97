#include "launcher/nccl_check.hpp"

#include "probes/atomic_file.hpp"
#include "probes/error.hpp"
#include "probes/nccl/log.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <sys/stat.h>
#include <unistd.h>

namespace launcher {

namespace {

using probes::Error;

constexpr auto poll_interval = std::chrono::milliseconds(200);

// Every line of `text` as one of gpurun's own lines on standard error.
std::string prefixed(const std::string& text)
{
    std::string out;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) {
            end = text.size();
        }
        out += fmt::format("gpurun: nccl-check: {}\n", std::string_view(text).substr(start, end - start));
        start = end + 1;
    }
    return out;
}

std::string upper(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return s;
}

// The user's own setting of a variable: the last -x that names it, else a non-empty value in the
// environment.
struct UserSetting {
    bool set = false;
    bool exported = false; ///< by a -x of the user's, so it reaches the ranks already
    std::string value;
};

UserSetting user_setting(const char* name, const std::function<const char*(const char*)>& getenv,
    const std::vector<std::string>& user_exports)
{
    UserSetting s;
    for (const auto& e : user_exports) {
        const std::size_t eq = e.find('=');
        if (e.substr(0, eq) != name) {
            continue;
        }
        s.set = true;
        s.exported = true;
        if (eq != std::string::npos) {
            s.value = e.substr(eq + 1);
        } else {
            const char* v = getenv(name);
            s.value = v != nullptr ? v : "";
        }
    }
    if (!s.exported) {
        if (const char* v = getenv(name); v != nullptr && *v != '\0') {
            s.set = true;
            s.value = v;
        }
    }
    return s;
}

// NCCL compares NCCL_DEBUG without regard to case; INFO and TRACE log the Init and Channel lines.
bool logs_info(const std::string& level)
{
    const std::string u = upper(level);
    return u == "INFO" || u == "TRACE";
}

// NCCL_DEBUG_SUBSYS is a comma-separated list of subsystems, or with a leading '^' the ones to
// leave out; the Init and Channel lines belong to INIT.
bool logs_init(const std::string& subsys)
{
    const bool leave_out = !subsys.empty() && subsys[0] == '^';
    bool named = false;
    std::string list = upper(leave_out ? subsys.substr(1) : subsys);
    std::size_t start = 0;
    while (start <= list.size()) {
        std::size_t end = list.find(',', start);
        if (end == std::string::npos) {
            end = list.size();
        }
        const std::string word = list.substr(start, end - start);
        named = named || word == "INIT" || word == "ALL";
        start = end + 1;
    }
    return leave_out ? !named : named;
}

// Feeds every log to the analyzer; returns a line for each one that could not be read. With
// `complete_only` (while ranks still write), a log is read up to its last complete line; at the
// end it is streamed, whatever its size. A log in a private directory is named by its file name
// alone, since the directory goes away.
std::string read_logs(probes::nccl::Analyzer& analyzer, const std::vector<std::filesystem::path>& files,
    bool private_dir, bool complete_only)
{
    std::string unreadable;
    for (const auto& file : files) {
        const std::string name = private_dir ? file.filename().string() : file.string();
        if (!complete_only) {
            try {
                analyzer.read_file(file.string(), name);
            } catch (const probes::Error& e) {
                unreadable += std::string(e.what()) + "\n";
            }
            continue;
        }
        std::ifstream in(file, std::ios::binary);
        if (!in) {
            unreadable += fmt::format("cannot read {}: {}\n", file.string(), std::strerror(errno));
            continue;
        }
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const std::size_t last = text.rfind('\n');
        text.resize(last == std::string::npos ? 0 : last + 1);
        analyzer.read_text(text, name);
    }
    return unreadable;
}

} // namespace

NcclCheckEnv nccl_check_env(const std::string& log_dir, const std::function<const char*(const char*)>& getenv,
    const std::vector<std::string>& user_exports)
{
    NcclCheckEnv r;
    const UserSetting debug = user_setting("NCCL_DEBUG", getenv, user_exports);
    if (!debug.set) {
        r.exports.emplace_back("NCCL_DEBUG=INFO");
    } else {
        if (!debug.exported) {
            r.exports.emplace_back("NCCL_DEBUG");
        }
        if (!logs_info(debug.value)) {
            r.notes.push_back(fmt::format("NCCL_DEBUG={} is kept, so NCCL logs too little for --nccl-check to see "
                                          "communicators and transports; unset it or set NCCL_DEBUG=INFO",
                debug.value));
        }
    }
    const UserSetting subsys = user_setting("NCCL_DEBUG_SUBSYS", getenv, user_exports);
    if (!subsys.set) {
        r.exports.emplace_back("NCCL_DEBUG_SUBSYS=INIT,NET");
    } else {
        if (!subsys.exported) {
            r.exports.emplace_back("NCCL_DEBUG_SUBSYS");
        }
        if (!logs_init(subsys.value)) {
            r.notes.push_back(fmt::format("NCCL_DEBUG_SUBSYS={} is kept, and without INIT NCCL does not log the "
                                          "communicators and transports --nccl-check reads; unset it or add INIT",
                subsys.value));
        }
    }
    const std::string file = fmt::format("{}/{}", log_dir, nccl_log_name);
    if (const char* theirs = getenv("NCCL_DEBUG_FILE"); theirs != nullptr && *theirs != '\0') {
        r.notes.push_back(fmt::format(
            "NCCL_DEBUG_FILE={} is replaced by {} for this job: --nccl-check reads NCCL's logs there", theirs, file));
    }
    r.exports.push_back("NCCL_DEBUG_FILE=" + file);
    r.exports.push_back(fmt::format("{}={}", nccl_log_dir_variable, log_dir));
    return r;
}

std::string nccl_log_dir_problem(const std::string& dir)
{
    struct stat st { };
    if (stat(dir.c_str(), &st) != 0) {
        return std::strerror(errno);
    }
    if (!S_ISDIR(st.st_mode)) {
        return "it is not a directory";
    }
    if (st.st_uid != geteuid()) {
        return fmt::format("it belongs to uid {}, not {}", st.st_uid, geteuid());
    }
    if ((st.st_mode & S_IWOTH) != 0) {
        return fmt::format("every user can write to it (mode {:04o})", st.st_mode & 07777);
    }
    return "";
}

std::string keep_nccl_log_file_only_in_own_dir()
{
    const char* named = std::getenv(nccl_log_dir_variable);
    if (named == nullptr) {
        return "";
    }
    const std::string dir = named;
    unsetenv(nccl_log_dir_variable);
    if (std::getenv("NCCL_DEBUG_FILE") == nullptr) {
        return "";
    }
    struct stat st { };
    if (stat(dir.c_str(), &st) != 0 && errno == ENOENT) {
        // Another host: gpurun made the private directory on its own host only.
        unsetenv("NCCL_DEBUG_FILE");
        return "";
    }
    const std::string problem = nccl_log_dir_problem(dir);
    if (problem.empty()) {
        return "";
    }
    unsetenv("NCCL_DEBUG_FILE");
    return fmt::format("the NCCL log directory {} is not used: {}; NCCL logs to standard output", dir, problem);
}

NcclCheck::NcclCheck(NcclCheckMode mode, unsigned ranks, const std::string& keep_dir, const std::string& temp_dir)
    : m_mode(mode), m_ranks(ranks)
{
    if (keep_dir.empty()) {
        const std::string base = temp_dir.empty() ? "/tmp" : temp_dir;
        std::string pattern = base + "/gpurun-nccl.XXXXXX";
        if (mkdtemp(pattern.data()) == nullptr) {
            throw Error(fmt::format("cannot make a directory for the NCCL logs under {}: mkdtemp: {}; set TMPDIR to "
                                    "a writable directory, or pass --nccl-log-dir",
                base, std::strerror(errno)));
        }
        m_dir = pattern;
        m_private = true;
        return;
    }
    // Ranks open their logs there by name: the path must be one that nobody else can redirect.
    m_dir = probes::own_directory(keep_dir, "--nccl-log-dir");
    for (const auto& log : logs()) {
        std::error_code ec;
        m_before[log.filename().string()] = {
            std::filesystem::last_write_time(log, ec), std::filesystem::file_size(log, ec)};
    }
}

NcclCheck::~NcclCheck()
{
    if (m_private) {
        std::error_code ec;
        std::filesystem::remove_all(m_dir, ec);
    }
}

std::vector<std::filesystem::path> NcclCheck::logs() const
{
    std::vector<std::filesystem::path> found;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(m_dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() <= 9 || name.rfind("nccl.", 0) != 0 || name.substr(name.size() - 4) != ".log") {
            continue;
        }
        std::error_code file_ec;
        if (!it->is_regular_file(file_ec)) {
            continue;
        }
        if (auto before = m_before.find(name); before != m_before.end()) {
            // The file time alone may not change within one clock tick.
            const std::pair now{
                std::filesystem::last_write_time(it->path(), file_ec), std::filesystem::file_size(it->path(), file_ec)};
            if (now == before->second) {
                continue;
            }
        }
        found.push_back(it->path());
    }
    std::sort(found.begin(), found.end());
    return found;
}

std::string NcclCheck::poll() noexcept
{
    if (m_mode != NcclCheckMode::init || !m_polling) {
        return "";
    }
    const auto now = std::chrono::steady_clock::now();
    if (now < m_next_poll) {
        return "";
    }
    m_next_poll = now + poll_interval;
    try {
        const auto files = logs();
        if (files.empty()) {
            return "";
        }
        probes::nccl::Analyzer analyzer;
        read_logs(analyzer, files, m_private, true);
        const probes::nccl::Analysis analysis = analyzer.analysis();
        if (analysis.processes_init_complete < std::max(m_ranks, 1U)) {
            return "";
        }
        m_polling = false;
        m_shown = probes::nccl::render_verdict(analysis);
        return prefixed(fmt::format("{} through NCCL init (the job goes on):\n{}",
            m_ranks == 1 ? std::string("the rank is") : fmt::format("all {} ranks are", m_ranks), m_shown));
    } catch (const std::exception& e) {
        m_polling = false;
        return prefixed(fmt::format("cannot read the NCCL logs while the job runs: {}", e.what()));
    }
}

std::string NcclCheck::finish() noexcept
{
    m_polling = false;
    try {
        std::string out;
        const auto files = logs();
        if (files.empty()) {
            out = prefixed(fmt::format("no NCCL log appeared{}: the ranks did not start NCCL, or NCCL did not log "
                                       "to NCCL_DEBUG_FILE",
                m_private ? "" : " in " + m_dir));
        } else {
            probes::nccl::Analyzer analyzer;
            const std::string unreadable = read_logs(analyzer, files, m_private, false);
            const std::string verdict = probes::nccl::render_verdict(analyzer.analysis());
            if (verdict != m_shown || !unreadable.empty()) {
                out += prefixed(fmt::format("{} ({} log{}):\n{}{}",
                    m_shown.empty() ? "at the end of the job" : "at the end of the job the logs show more",
                    files.size(), files.size() == 1 ? "" : "s", unreadable, verdict));
            }
        }
        if (!m_private) {
            out += prefixed(fmt::format("the NCCL logs are kept in {} (nccl.HOST.PID.log)", m_dir));
        }
        return out;
    } catch (const std::exception& e) {
        return prefixed(fmt::format("cannot read the NCCL logs in {}: {}", m_dir, e.what()));
    }
}

} // namespace launcher
