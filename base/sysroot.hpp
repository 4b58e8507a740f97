#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace base {

/// Every read of /sys and /proc goes through one root prefix (`--sysroot DIR`, default "/"), so
/// tests can lay out DIR/sys/... and DIR/proc/... without touching the machine.
class Sysroot {
public:
    explicit Sysroot(std::filesystem::path root = "/") : m_root(std::move(root)) { }

    /// The host path of an absolute system path such as "/sys/bus/pci/devices".
    std::filesystem::path path(const std::string& system_path) const;

    /// The most Sysroot::read takes from one file: 16 MiB (/proc/modules and a device's config
    /// space are a few KiB).
    static constexpr std::size_t sysroot_file_limit = std::size_t{16} << 20;

    /// The whole file, or nullopt when it cannot be read, is not a regular file or is longer than
    /// sysroot_file_limit.
    std::optional<std::string> read(const std::string& system_path) const;

    /// The first line without its newline, or nullopt when the file cannot be read.
    std::optional<std::string> read_line(const std::string& system_path) const;

    bool exists(const std::string& system_path) const;

    const std::filesystem::path& root() const { return m_root; }

private:
    std::filesystem::path m_root;
};

/// Throws base::Error unless `dir`, given as --sysroot, is a directory: a mistyped sysroot would
/// otherwise read as a machine with no GPUs, no /dev/shm and no limits.
void require_sysroot_directory(const std::string& dir);

} // namespace base
