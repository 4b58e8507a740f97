#include "base/sysroot.hpp"

#include "base/error.hpp"

#include "base/input_file.hpp"
#include "base/unique_fd.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace base {

std::filesystem::path Sysroot::path(const std::string& system_path) const
{
    std::string relative = system_path;
    while (!relative.empty() && relative.front() == '/') {
        relative.erase(0, 1);
    }
    return m_root / relative;
}

std::optional<std::string> Sysroot::read(const std::string& system_path) const
{
    // Files of /sys and /proc are regular files of a few KiB; under a --sysroot something else
    // (a FIFO, /dev/zero linked in) is not read, and nothing past the ceiling.
    const UniqueFd fd(open(path(system_path).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    struct stat st { };
    if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return std::nullopt;
    }
    try {
        return read_input_fd(fd.get(), system_path, "file", sysroot_file_limit);
    } catch (const Error&) {
        return std::nullopt;
    }
}

std::optional<std::string> Sysroot::read_line(const std::string& system_path) const
{
    auto text = read(system_path);
    if (!text) {
        return std::nullopt;
    }
    auto newline = text->find('\n');
    if (newline != std::string::npos) {
        text->resize(newline);
    }
    return text;
}

bool Sysroot::exists(const std::string& system_path) const
{
    std::error_code ec;
    return std::filesystem::exists(path(system_path), ec);
}

void require_sysroot_directory(const std::string& dir)
{
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
        throw Error(fmt::format("--sysroot {}: {}; give the directory that holds sys/ and proc/ (default /)", dir,
            ec ? ec.message() : std::string("not a directory")));
    }
}

} // namespace base
