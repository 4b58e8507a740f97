#include "launcher/nccl_check.hpp"

#include "base/atomic_file.hpp"
#include "base/error.hpp"
#include "base/nccl/log.hpp"
#include "base/process.hpp"
#include "base/text.hpp"
#include "base/unique_fd.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace launcher {

namespace {

using base::Error;

constexpr auto poll_interval = std::chrono::milliseconds(200);
/// Logs are read in pieces of this size.
constexpr std::size_t piece_size = 1 << 20;

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
    const std::string u = base::upper_case(level);
    return u == "INFO" || u == "TRACE";
}

// NCCL_DEBUG_SUBSYS is a comma-separated list of subsystems, or with a leading '^' the ones to
// leave out; the Init and Channel lines belong to INIT.
bool logs_init(const std::string& subsys)
{
    const bool leave_out = !subsys.empty() && subsys[0] == '^';
    bool named = false;
    std::string list = base::upper_case(leave_out ? subsys.substr(1) : subsys);
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
    : m_mode(mode), m_ranks(ranks),
      m_analyzer(std::make_unique<base::nccl::Analyzer>(base::nccl::Limits{}, base::nccl::Inputs::one_job))
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
        // Also when gpurun is killed with SIGKILL and this destructor never runs.
        base::remove_after_exit(m_dir);
        return;
    }
    // Ranks open their logs there by name: the path must be one that nobody else can redirect.
    m_dir = base::own_directory(keep_dir, "--nccl-log-dir");
    for (const auto& log : logs()) {
        std::error_code ec;
        m_before[log.filename().string()] = {
            std::filesystem::last_write_time(log, ec), std::filesystem::file_size(log, ec)};
    }
}

NcclCheck::~NcclCheck()
{
    if (m_private) {
        base::remove_private_dir(m_dir);
    }
}

void NcclCheck::start_over()
{
    m_analyzer = std::make_unique<base::nccl::Analyzer>(base::nccl::Limits{}, base::nccl::Inputs::one_job);
    m_followed.clear();
    m_broken = false;
}

std::string NcclCheck::follow_logs(bool at_end)
{
    if (m_broken) {
        start_over();
    }
    m_broken = true; // until every log is read
    std::string unreadable;
    std::string piece(piece_size, '\0');
    for (const auto& file : logs()) {
        const std::string path = file.string();
        const base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
        struct stat st { };
        if (fd.get() < 0 || fstat(fd.get(), &st) != 0) {
            unreadable += fmt::format("cannot read {}: {}\n", path, std::strerror(errno));
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            continue;
        }
        const auto size = static_cast<std::uint64_t>(st.st_size);
        auto it = m_followed.find(path);
        if (it != m_followed.end() &&
            (it->second.device != st.st_dev || it->second.inode != st.st_ino || size < it->second.offset)) {
            // A log that shrank or was replaced: what was read of it is in the analysis and cannot
            // be taken out, so every log is read again from its start.
            start_over();
            return follow_logs(at_end);
        }
        if (it == m_followed.end()) {
            FollowedLog log;
            // A log in a private directory is named by its file name, since the directory goes away.
            log.input = m_analyzer->add_input(m_private ? file.filename().string() : path);
            log.device = st.st_dev;
            log.inode = st.st_ino;
            it = m_followed.emplace(path, log).first;
        }
        FollowedLog& log = it->second;
        // Up to the size seen now: a rank that writes faster than this reads cannot keep it here.
        while (log.offset < size) {
            const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(piece_size, size - log.offset));
            const ssize_t n = pread(fd.get(), piece.data(), want, static_cast<off_t>(log.offset));
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0) {
                unreadable += fmt::format("cannot read {}: {}\n", path, std::strerror(errno));
                break;
            }
            if (n == 0) {
                break;
            }
            log.offset += static_cast<std::uint64_t>(n);
            m_bytes_read += static_cast<std::uint64_t>(n);
            m_analyzer->read_more(log.input, std::string_view(piece.data(), static_cast<std::size_t>(n)));
        }
    }
    if (at_end) {
        for (const auto& [path, log] : m_followed) {
            m_analyzer->read_more(log.input, {}, true); // the last line, also without its newline
        }
    }
    m_broken = false;
    return unreadable;
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
        follow_logs(false);
        if (m_followed.empty()) {
            return "";
        }
        const base::nccl::Analysis analysis = m_analyzer->analysis();
        if (analysis.processes_init_complete < std::max(m_ranks, 1U)) {
            return "";
        }
        m_polling = false;
        m_shown = base::nccl::render_verdict(analysis);
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
            const std::string unreadable = follow_logs(true);
            const std::string verdict = base::nccl::render_verdict(m_analyzer->analysis());
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
