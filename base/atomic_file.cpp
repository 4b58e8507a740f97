#include "base/atomic_file.hpp"

#include "base/error.hpp"
#include "base/unique_fd.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <string_view>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace base {

namespace {

/// The process umask, read without changing it (umask(2) can only be read by setting it, which
/// races with threads) from /proc/self/status; set and set back where that line is missing.
mode_t current_umask()
{
    if (std::FILE* status = std::fopen("/proc/self/status", "re")) {
        char line[256];
        std::optional<mode_t> mask;
        while (!mask && std::fgets(line, sizeof line, status) != nullptr) {
            static constexpr std::string_view key = "Umask:";
            if (std::string_view(line).substr(0, key.size()) == key) {
                char* end = nullptr;
                const unsigned long value = std::strtoul(line + key.size(), &end, 8);
                if (end != line + key.size() && value <= 0777) {
                    mask = static_cast<mode_t>(value);
                }
            }
        }
        std::fclose(status);
        if (mask) {
            return *mask;
        }
    }
    const mode_t mask = umask(022);
    umask(mask);
    return mask;
}

std::deque<std::string> components(const std::string& path)
{
    std::deque<std::string> parts;
    std::size_t at = 0;
    while (at <= path.size()) {
        const std::size_t slash = std::min(path.find('/', at), path.size());
        std::string part = path.substr(at, slash - at);
        if (!part.empty() && part != ".") {
            parts.push_back(std::move(part));
        }
        at = slash + 1;
    }
    return parts;
}

std::string joined(const std::string& dir, const std::string& name)
{
    if (name == "..") {
        const std::size_t slash = dir.find_last_of('/');
        return slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
    }
    return dir == "/" ? "/" + name : dir + "/" + name;
}

/// Where the target is: its directory, opened and checked, and its name there.
struct Resolved {
    UniqueFd dir;
    std::string shown_dir;
    std::string name;
    std::optional<struct stat> existing;
};

/// Walks `path` from the root one component at a time (see the header). With `make_parents`, a
/// missing directory on the way is made (mode 0700) in the directory the walk has checked.
Resolved resolve(const std::string& path, const std::string& what, bool make_parents = false)
{
    auto error = [&](const std::string& why) { return Error(fmt::format("{} {}: {}", what, path, why)); };
    if (path.empty()) {
        throw Error(fmt::format("{} '': expected a file name", what));
    }
    const auto given = components(path);
    // "x/." names the directory x, as "x/" does; components() drops the ".".
    const bool ends_in_dot = path == "." || path.ends_with("/.");
    if (path.back() == '/' || ends_in_dot || given.empty() || given.back() == "..") {
        throw error("expected a file name, not a directory");
    }
    // The directory as the user would name it, for messages about a missing one.
    const std::size_t last_slash = path.find_last_of('/');
    const std::string textual_dir = last_slash == std::string::npos ? "."
        : last_slash == 0                                           ? "/"
                                                                    : path.substr(0, last_slash);

    std::string full = path;
    if (full.front() != '/') {
        std::unique_ptr<char, decltype(&std::free)> cwd(getcwd(nullptr, 0), &std::free);
        if (!cwd) {
            throw error(fmt::format("cannot find the working directory: {}", std::strerror(errno)));
        }
        full = std::string(cwd.get()) + "/" + path;
    }
    auto parts = components(full);
    auto open_root = [&] {
        const int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            throw error(fmt::format("cannot open /: {}", std::strerror(errno)));
        }
        return fd;
    };
    Resolved r;
    r.dir.reset(open_root());
    r.shown_dir = "/";
    const uid_t me = geteuid();
    int links = 0;
    bool via_link = false; ///< the final component was a link being followed
    while (true) {
        if (parts.empty()) {
            throw error("expected a file name, not a directory");
        }
        const std::string name = parts.front();
        parts.pop_front();
        const bool last = parts.empty();
        struct stat st { };
        if (fstatat(r.dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT && last) {
                r.name = name;
                return r;
            }
            if (errno == ENOENT && make_parents) {
                if (mkdirat(r.dir.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
                    throw error(fmt::format("cannot create {}: {}", joined(r.shown_dir, name), std::strerror(errno)));
                }
                parts.push_front(name); // walked into as any directory is
                continue;
            }
            if (via_link) {
                throw error(fmt::format(
                    "a symbolic link to nothing ({}); remove it, or give a file path", std::strerror(errno)));
            }
            throw error(fmt::format("cannot create a temporary file in {}: {}", textual_dir, std::strerror(errno)));
        }
        const std::string shown = joined(r.shown_dir, name);
        if (S_ISLNK(st.st_mode)) {
            // Followed only when its owner is the caller or root: another user's link (in /tmp,
            // say) could point at any file the caller may write.
            if (st.st_uid != me && st.st_uid != 0) {
                throw error(fmt::format("{} is a symbolic link owned by another user (uid {}); it is not followed: "
                                        "remove it, or write the file elsewhere",
                    shown, st.st_uid));
            }
            if (++links > 40) {
                throw error(fmt::format("cannot resolve {}: {}", shown, std::strerror(ELOOP)));
            }
            std::string target(4096, '\0');
            const ssize_t n = readlinkat(r.dir.get(), name.c_str(), target.data(), target.size());
            if (n < 0 || static_cast<std::size_t>(n) >= target.size()) {
                throw error(
                    fmt::format("cannot read the link {}: {}", shown, std::strerror(n < 0 ? errno : ENAMETOOLONG)));
            }
            target.resize(static_cast<std::size_t>(n));
            via_link = via_link || last;
            auto more = components(target);
            if (more.empty() && last) {
                throw error(fmt::format("{} links to a directory; give the path of a file", shown));
            }
            parts.insert(parts.begin(), more.begin(), more.end());
            if (!target.empty() && target.front() == '/') {
                r.dir.reset(open_root());
                r.shown_dir = "/";
            }
            continue;
        }
        if (last) {
            r.name = name;
            r.existing = st;
            return r;
        }
        if (!S_ISDIR(st.st_mode)) {
            throw error(fmt::format("cannot create a temporary file in {}: {}", textual_dir, std::strerror(ENOTDIR)));
        }
        UniqueFd next(openat(r.dir.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        struct stat opened { };
        if (next.get() < 0 || fstat(next.get(), &opened) != 0 || opened.st_ino != st.st_ino ||
            opened.st_dev != st.st_dev) {
            throw error(fmt::format("cannot open the directory {}: {}", shown,
                next.get() < 0 ? std::strerror(errno) : "it changed while being opened"));
        }
        if ((opened.st_mode & S_IWOTH) != 0 && (opened.st_mode & S_ISVTX) == 0) {
            // Anyone could rename or replace what is in it between our steps.
            throw error(fmt::format("{} can be written by every user and has no sticky bit (mode {:04o}); write the "
                                    "file to a directory that only you or root can change",
                shown, opened.st_mode & 07777));
        }
        r.dir.reset(next.release());
        r.shown_dir = shown;
    }
}

std::string random_suffix()
{
    static constexpr char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char bytes[6];
    if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
        const auto seed = static_cast<unsigned>(getpid()) ^ static_cast<unsigned>(clock());
        for (std::size_t i = 0; i < sizeof bytes; ++i) {
            bytes[i] = static_cast<unsigned char>(seed >> (i * 5));
        }
    }
    std::string out;
    for (const unsigned char b : bytes) {
        out += letters[b % (sizeof letters - 1)];
    }
    return out;
}

} // namespace

AtomicFile::AtomicFile(const std::string& path, const std::string& what, std::optional<mode_t> mode)
    : m_what(what), m_path(path)
{
    Resolved r = resolve(path, what);
    m_shown_dir = r.shown_dir;
    m_name = r.name;
    if (r.existing && !S_ISREG(r.existing->st_mode) && !S_ISDIR(r.existing->st_mode)) {
        // Renaming over a device, FIFO or socket would replace it with a regular file (over a
        // directory, rename fails by itself).
        throw Error(fmt::format("{} {}: not a regular file ({}); give the path of a file to write", what, path,
            S_ISFIFO(r.existing->st_mode)       ? "a FIFO"
                : S_ISSOCK(r.existing->st_mode) ? "a socket"
                                                : "a device"));
    }
    // A file the caller owns keeps its mode; any other is made as a new file of the caller's.
    if (!mode) {
        mode = r.existing && S_ISREG(r.existing->st_mode) && r.existing->st_uid == geteuid()
            ? r.existing->st_mode & 07777
            : 0666 & ~current_umask();
    }
    const std::string base = "." + m_name.substr(0, 200) + ".";
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
        m_temp = base + random_suffix();
        fd = openat(r.dir.get(), m_temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) {
            break;
        }
    }
    if (fd < 0) {
        m_temp.clear();
        throw Error(fmt::format(
            "{} {}: cannot create a temporary file in {}: {}", what, path, m_shown_dir, std::strerror(errno)));
    }
    m_dir = r.dir.release();
    m_fd = fd;
    if (fchmod(m_fd, *mode) != 0) {
        const int err = errno;
        discard(); // the destructor does not run for a constructor that throws
        throw Error(fmt::format(
            "{} {}: cannot set the mode of {}/{}: {}", what, path, m_shown_dir, m_temp, std::strerror(err)));
    }
}

AtomicFile::~AtomicFile()
{
    discard();
}

void AtomicFile::discard() noexcept
{
    if (m_fd >= 0) {
        close(m_fd);
        m_fd = -1;
    }
    if (m_dir >= 0) {
        if (!m_committed && !m_temp.empty()) {
            unlinkat(m_dir, m_temp.c_str(), 0);
        }
        close(m_dir);
        m_dir = -1;
    }
}

void AtomicFile::write(std::string_view data)
{
    for (std::size_t done = 0; done < data.size();) {
        const ssize_t n = ::write(m_fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            throw Error(fmt::format(
                "{} {}: cannot write {}/{}: {}", m_what, m_path, m_shown_dir, m_temp, std::strerror(errno)));
        }
        done += static_cast<std::size_t>(n);
    }
}

void AtomicFile::finish()
{
    if (m_fd < 0) {
        return;
    }
    // Often on a shared file system, where a failed write-back shows only at fsync or close.
    const bool synced = fsync(m_fd) == 0;
    const int sync_errno = errno;
    const bool closed = close(m_fd) == 0;
    m_fd = -1;
    if (!synced || !closed) {
        throw Error(fmt::format("{} {}: cannot write {}/{}: {}", m_what, m_path, m_shown_dir, m_temp,
            std::strerror(synced ? errno : sync_errno)));
    }
}

void AtomicFile::commit()
{
    finish();
    if (renameat(m_dir, m_temp.c_str(), m_dir, m_name.c_str()) != 0) {
        throw Error(fmt::format(
            "{} {}: cannot rename {}/{} to it: {}", m_what, m_path, m_shown_dir, m_temp, std::strerror(errno)));
    }
    m_committed = true;
    // The rename itself is durable once the directory is synced; a failure here loses nothing
    // that a reader could see, so it is not an error.
    const int dir = openat(m_dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        fsync(dir);
        close(dir);
    }
}

int open_output_file(const std::string& path, const std::string& what, mode_t mode)
{
    Resolved r = resolve(path, what);
    if (r.existing && S_ISDIR(r.existing->st_mode)) {
        throw Error(fmt::format("{} {}: a directory; give the path of a file to write", what, path));
    }
    const int flags =
        O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (r.existing && !S_ISREG(r.existing->st_mode) ? 0 : O_TRUNC);
    const int fd = openat(r.dir.get(), r.name.c_str(), flags, mode);
    if (fd < 0) {
        throw Error(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
    }
    return fd;
}

void write_files_atomically(const std::vector<OutputFile>& files)
{
    // Every file is written to its temporary name first: one that cannot be written replaces none.
    std::vector<std::unique_ptr<AtomicFile>> staged;
    for (const auto& file : files) {
        staged.push_back(std::make_unique<AtomicFile>(file.path, file.what));
        staged.back()->write(file.content);
        staged.back()->finish();
    }
    for (auto& file : staged) {
        file->commit();
    }
}

void write_file_atomically(
    const std::string& path, std::string_view content, const std::string& what, std::optional<mode_t> mode)
{
    AtomicFile file(path, what, mode);
    file.write(content);
    file.commit();
}

std::string own_directory(const std::string& path, const std::string& what)
{
    // "logs/", "logs/." and "logs/./" name logs.
    std::string trimmed = path;
    while (trimmed.size() > 1 && (trimmed.back() == '/' || trimmed.ends_with("/."))) {
        trimmed.pop_back();
    }
    // Missing parents are made by the walk, never through a link or directory it refuses.
    Resolved r = resolve(trimmed, what, true);
    const std::string full = joined(r.shown_dir, r.name);
    auto error = [&](const std::string& why) { return Error(fmt::format("{} {}: {}", what, path, why)); };
    if (!r.existing && mkdirat(r.dir.get(), r.name.c_str(), 0700) != 0 && errno != EEXIST) {
        throw error(fmt::format("cannot create it: {}", std::strerror(errno)));
    }
    UniqueFd dir(openat(r.dir.get(), r.name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st { };
    if (dir.get() < 0 || fstat(dir.get(), &st) != 0) {
        throw error(errno == ENOTDIR ? std::string("not a directory") : std::strerror(errno));
    }
    if (st.st_uid != geteuid()) {
        throw error(fmt::format("it belongs to uid {}, not {}: use a directory of your own", st.st_uid, geteuid()));
    }
    if ((st.st_mode & S_IWOTH) != 0) {
        throw error(fmt::format("every user can write to it (mode {:04o}): another user could read or replace what "
                                "is written there; use a directory of your own",
            st.st_mode & 07777));
    }
    return full;
}

std::string why_not_private(const std::string& dir)
{
    struct stat st { };
    if (lstat(dir.c_str(), &st) != 0) {
        return std::strerror(errno);
    }
    if (S_ISLNK(st.st_mode)) {
        return "it is a symbolic link";
    }
    if (!S_ISDIR(st.st_mode)) {
        return "it is not a directory";
    }
    if (st.st_uid != geteuid()) {
        return fmt::format("it belongs to uid {}, not {}", st.st_uid, geteuid());
    }
    if ((st.st_mode & 07777) != 0700) {
        return fmt::format("its mode is {:04o}, not 0700", st.st_mode & 07777);
    }
    return "";
}

void remove_private_dir(const std::string& dir) noexcept
{
    if (!why_not_private(dir).empty()) {
        return;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

} // namespace base
