#pragma once

// Every file gpukit writes for the user (check --prometheus and --junit, the --monitor-json of a
// job, the rank records of a job directory) is written here, one way:
// - atomically: other programs read these files while they are written (node_exporter's textfile
//   collector scrapes whenever it likes, a CI server picks the report up when the job ends), so
//   they see the old file or the new one, never part of one;
// - without following what another user could have planted: these files are written by root too
//   (a Slurm prolog), often into /tmp. The path is walked one component at a time from a directory
//   descriptor, so nothing can be swapped between the check and the write; a symbolic link is
//   followed only when the caller or root owns it; a directory that every user can write to
//   without the sticky bit (as /tmp has) is refused; the temporary file is created with O_EXCL
//   inside the directory that was checked, and renamed within it.

#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace base {

/// A file being written under a temporary name (".NAME.XXXXXX", which node_exporter's textfile
/// collector ignores: it reads only *.prom) in the directory of its target, put in place by
/// commit(). Until then the target is untouched; a file destroyed uncommitted removes its
/// temporary. Errors are base::Error naming `what` (the option that asked for the file), the
/// path and the step: "--prometheus /x/node.prom: cannot create a temporary file in /x: Permission
/// denied".
class AtomicFile {
public:
    /// `mode`: the new file's; by default 0666 less the umask (mkstemp's 0600 would hide a metrics
    /// file from node_exporter), or the mode of the file it replaces when the caller owns that.
    AtomicFile(const std::string& path, const std::string& what, std::optional<mode_t> mode = std::nullopt);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(std::string_view data);
    /// Flushed to disk and closed: after this only commit() is left (one that fails replaces nothing).
    void finish();
    /// finish() if not done yet, then the rename over the target.
    void commit();

    /// The directory and the temporary's name in it, for a signal handler's unlinkat (both stay
    /// valid until the file is committed or destroyed).
    int dir_fd() const { return m_dir; }
    const char* temp_name() const { return m_temp.c_str(); }

private:
    /// Closes what is open and removes the temporary unless it was committed.
    void discard() noexcept;

    std::string m_what;
    std::string m_path; ///< as given, for messages
    std::string m_shown_dir; ///< the directory, for messages
    int m_dir = -1;
    std::string m_name; ///< the target's name in m_dir
    std::string m_temp; ///< the temporary's name in m_dir
    int m_fd = -1;
    bool m_committed = false;
};

/// Replaces `path` with `content` atomically, with the mode AtomicFile gives it.
void write_file_atomically(const std::string& path, std::string_view content, const std::string& what,
    std::optional<mode_t> mode = std::nullopt);

/// For output that is read while it grows (a live log): `path` opened for writing from the start,
/// truncated, created with `mode` (less the umask) when missing, after the same walk as AtomicFile
/// (no other user's link, no directory every user can write to without the sticky bit); a device
/// or FIFO is opened as it is (`--output /dev/stderr`). The descriptor is close-on-exec. Throws
/// base::Error naming `what`.
int open_output_file(const std::string& path, const std::string& what, mode_t mode = 0666);

/// A directory of the caller's at `path` for others to write files into by name (NCCL's logs):
/// walked as AtomicFile walks (no other user's link followed, no directory on the way that every
/// user can write to without the sticky bit), made with mode 0700 when missing (its missing
/// parents too), and refused unless it is a directory that the caller owns and that not every user
/// can write to. Returns its path with the links resolved, so that nobody can swap what it names
/// afterwards. Throws base::Error naming `what`.
std::string own_directory(const std::string& path, const std::string& what);

/// Why `dir` is not a private directory of the caller's, or "" when it is: lstat shows a
/// directory, not a symbolic link, owned by this user, mode 0700 (as mkdtemp makes it).
std::string why_not_private(const std::string& dir);

/// Removes `dir` and what is in it when it is such a directory; anything else stays.
void remove_private_dir(const std::string& dir) noexcept;

/// A file for write_files_atomically: `what` is the option that asked for it.
struct OutputFile {
    std::string what;
    std::string path;
    std::string content;
};

/// Writes several files as write_file_atomically does, all of them to their temporary names
/// first: when one cannot be written, none is replaced.
void write_files_atomically(const std::vector<OutputFile>& files);

} // namespace base
