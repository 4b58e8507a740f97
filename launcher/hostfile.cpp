#include "launcher/hostfile.hpp"

#include "probes/error.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

namespace launcher {

namespace {

using probes::Error;

bool valid_host_name(std::string_view name)
{
    if (name.empty() || name.size() > 253 || name.front() == '-') {
        return false;
    }
    for (char c : name) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_' || c == ':' || c == '[' || c == ']';
        if (!ok) {
            return false;
        }
    }
    return true;
}

std::optional<unsigned> parse_count(std::string_view text)
{
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || value == 0 || value > 1000000) {
        return std::nullopt;
    }
    return value;
}

std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
        s.remove_suffix(1);
    }
    return s;
}

// "host" or "host:N"; an IPv6 address in brackets may carry its own colons.
HostSlots parse_host_slots(std::string_view entry, const std::string& where)
{
    std::size_t colon = entry.rfind(':');
    if (!entry.empty() && entry.front() == '[') {
        std::size_t close = entry.find(']');
        colon = (close != std::string_view::npos && close + 1 < entry.size() && entry[close + 1] == ':')
            ? close + 1
            : std::string_view::npos;
    }
    HostSlots host;
    std::string_view name = entry;
    if (colon != std::string_view::npos) {
        name = entry.substr(0, colon);
        auto slots = parse_count(entry.substr(colon + 1));
        if (!slots) {
            throw Error(fmt::format("{}: '{}' has a bad slot count '{}'; write host:N with N a positive number", where,
                entry, entry.substr(colon + 1)));
        }
        host.slots = slots;
    }
    if (!valid_host_name(name)) {
        throw Error(fmt::format("{}: '{}' is not a host name", where, name));
    }
    host.name = std::string(name);
    return host;
}

} // namespace

std::vector<HostSlots> parse_host_list(std::string_view text)
{
    std::vector<HostSlots> hosts;
    std::size_t pos = 0;
    while (true) {
        std::size_t comma = text.find(',', pos);
        std::string_view entry =
            trim(text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
        if (entry.empty()) {
            throw Error(fmt::format("-H {}: empty host entry; write -H host1:N,host2:N", text));
        }
        hosts.push_back(parse_host_slots(entry, fmt::format("-H {}", text)));
        if (comma == std::string_view::npos) {
            break;
        }
        pos = comma + 1;
    }
    return hosts;
}

std::vector<HostSlots> parse_hostfile(std::string_view text, const std::string& origin)
{
    std::vector<HostSlots> hosts;
    unsigned line_number = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t end = text.find('\n', pos);
        std::string_view line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
        pos = end == std::string_view::npos ? text.size() : end + 1;
        ++line_number;
        const std::string where = fmt::format("{}:{}", origin, line_number);
        if (line.find('\0') != std::string_view::npos) {
            throw Error(fmt::format("{}: binary data in a hostfile", where));
        }
        if (std::size_t hash = line.find('#'); hash != std::string_view::npos) {
            line = line.substr(0, hash);
        }
        line = trim(line);
        if (line.empty()) {
            continue;
        }
        std::vector<std::string_view> words;
        std::size_t p = 0;
        while (p < line.size()) {
            while (p < line.size() && (line[p] == ' ' || line[p] == '\t')) {
                ++p;
            }
            std::size_t q = p;
            while (q < line.size() && line[q] != ' ' && line[q] != '\t') {
                ++q;
            }
            if (q > p) {
                words.push_back(line.substr(p, q - p));
            }
            p = q;
        }
        HostSlots host = parse_host_slots(words[0], where);
        for (std::size_t i = 1; i < words.size(); ++i) {
            std::string_view word = words[i];
            std::size_t eq = word.find('=');
            std::string_view key = word.substr(0, eq);
            std::string_view value = eq == std::string_view::npos ? std::string_view() : word.substr(eq + 1);
            if (key == "slots" || key == "max_slots" || key == "max-slots") {
                auto n = parse_count(value);
                if (!n) {
                    throw Error(fmt::format("{}: '{}' needs a positive number", where, word));
                }
                if (key == "slots") {
                    if (host.slots) {
                        throw Error(fmt::format("{}: slots given twice for {}", where, host.name));
                    }
                    host.slots = n;
                }
            } else {
                throw Error(
                    fmt::format("{}: unknown word '{}'; a hostfile line is 'host slots=N' or 'host:N'", where, word));
            }
        }
        hosts.push_back(std::move(host));
    }
    if (hosts.empty()) {
        throw Error(fmt::format("{}: no hosts in the hostfile", origin));
    }
    return hosts;
}

std::vector<HostSlots> read_hostfile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw Error(fmt::format("cannot read hostfile {}: {}", path, std::strerror(errno)));
    }
    std::ostringstream text;
    text << in.rdbuf();
    return parse_hostfile(text.str(), path);
}

} // namespace launcher
