#include "probes/sysroot.hpp"

#include "probes/error.hpp"

#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <system_error>

namespace probes {

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
    std::ifstream in(path(system_path), std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream out;
    out << in.rdbuf();
    if (in.bad()) {
        return std::nullopt;
    }
    return out.str();
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

} // namespace probes
