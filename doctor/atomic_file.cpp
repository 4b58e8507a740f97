#include "doctor/atomic_file.hpp"

#include "probes/error.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

namespace doctor {

namespace {

/// The process umask. umask() can only be read by setting it; gpudoctor writes its report files
/// from the main thread with no other threads running, so setting it back at once is safe.
mode_t current_umask()
{
    const mode_t mask = umask(022);
    umask(mask);
    return mask;
}

/// Closes and removes the temporary file unless it was renamed into place.
class TemporaryFile {
public:
    TemporaryFile(std::string path, int fd) : m_path(std::move(path)), m_fd(fd) { }
    ~TemporaryFile()
    {
        if (m_fd >= 0) {
            close(m_fd);
        }
        if (!m_renamed) {
            unlink(m_path.c_str());
        }
    }
    TemporaryFile(const TemporaryFile&) = delete;
    TemporaryFile& operator=(const TemporaryFile&) = delete;

    int fd() const { return m_fd; }
    const std::string& path() const { return m_path; }
    /// close(2) reports write-back errors (NFS, a full disk); so it is checked, once.
    int close_now()
    {
        const int rc = close(m_fd);
        m_fd = -1;
        return rc;
    }
    void renamed() { m_renamed = true; }

private:
    std::string m_path;
    int m_fd = -1;
    bool m_renamed = false;
};

} // namespace

namespace {

/// A file written whole to its temporary name, not yet renamed over its target.
struct Staged {
    std::filesystem::path target;
    std::filesystem::path dir;
    std::unique_ptr<TemporaryFile> temp;
};

Staged stage(const OutputFile& file)
{
    const std::string& path = file.path;
    const std::string& what = file.what;
    auto fail = [&](const std::string& step) {
        return probes::Error(fmt::format("{} {}: {}: {}", what, path, step, std::strerror(errno)));
    };
    if (path.empty()) {
        throw probes::Error(fmt::format("{} '': expected a file name", what));
    }
    Staged staged;
    staged.target = path;
    if (!staged.target.has_filename()) {
        throw probes::Error(fmt::format("{} {}: expected a file name, not a directory", what, path));
    }
    struct stat st { };
    if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        // A link (say into a directory a node_exporter reads) stays a link: its target is replaced.
        std::error_code ec;
        staged.target = std::filesystem::canonical(staged.target, ec);
        if (ec) {
            throw probes::Error(fmt::format(
                "{} {}: a symbolic link to nothing ({}); remove it, or give a file path", what, path, ec.message()));
        }
    }
    if (stat(staged.target.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        // Renaming over a device, FIFO or socket would replace it with a regular file (over a
        // directory, rename fails by itself).
        throw probes::Error(fmt::format("{} {}: not a regular file ({}); give the path of a file to write", what, path,
            S_ISFIFO(st.st_mode)       ? "a FIFO"
                : S_ISSOCK(st.st_mode) ? "a socket"
                                       : "a device"));
    }
    staged.dir = staged.target.has_parent_path() ? staged.target.parent_path() : std::filesystem::path(".");
    std::string pattern = (staged.dir / ("." + staged.target.filename().string() + ".XXXXXX")).string();
    const int fd = mkostemp(pattern.data(), O_CLOEXEC);
    if (fd < 0) {
        throw fail(fmt::format("cannot create a temporary file in {}", staged.dir.string()));
    }
    staged.temp = std::make_unique<TemporaryFile>(pattern, fd);
    TemporaryFile& temp = *staged.temp;
    const std::string_view content = file.content;
    for (std::size_t done = 0; done < content.size();) {
        const ssize_t n = write(temp.fd(), content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            throw fail(fmt::format("cannot write {}", temp.path()));
        }
        done += static_cast<std::size_t>(n);
    }
    if (fchmod(temp.fd(), 0666 & ~current_umask()) != 0) {
        throw fail(fmt::format("cannot set the mode of {}", temp.path()));
    }
    if (fsync(temp.fd()) != 0) {
        throw fail(fmt::format("cannot sync {}", temp.path()));
    }
    if (temp.close_now() != 0) {
        throw fail(fmt::format("cannot write {}", temp.path()));
    }
    return staged;
}

} // namespace

void write_files_atomically(const std::vector<OutputFile>& files)
{
    // Every file is written to its temporary name first: one that cannot be written replaces none.
    std::vector<Staged> staged;
    for (const auto& file : files) {
        staged.push_back(stage(file));
    }
    for (std::size_t i = 0; i < staged.size(); ++i) {
        TemporaryFile& temp = *staged[i].temp;
        if (rename(temp.path().c_str(), staged[i].target.c_str()) != 0) {
            throw probes::Error(fmt::format(
                "{} {}: cannot rename {} to it: {}", files[i].what, files[i].path, temp.path(), std::strerror(errno)));
        }
        temp.renamed();
        // The rename itself is durable once the directory is synced; a failure here loses nothing
        // that a reader could see, so it is not an error.
        const int dir_fd = open(staged[i].dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd >= 0) {
            fsync(dir_fd);
            close(dir_fd);
        }
    }
}

void write_file_atomically(const std::string& path, std::string_view content, const std::string& what)
{
    write_files_atomically({OutputFile{what, path, std::string(content)}});
}

} // namespace doctor
