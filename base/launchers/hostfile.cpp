#include "base/launchers/hostfile.hpp"

#include "base/error.hpp"
#include "base/input_file.hpp"
#include "base/launchers/node_list.hpp"
#include "base/text.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace base::launchers {

namespace {

using base::Error;

/// The most slots one host may have.
constexpr unsigned max_slots = 1'000'000;

// An IPv6 address as -H takes it: hex digits, dots and at least two colons; it ends in a digit or
// "::", not in a single colon (so "a::4", host "a:" with 4 slots, is refused).
bool valid_ipv6(std::string_view a)
{
    if (std::count(a.begin(), a.end(), ':') < 2 || (a.back() == ':' && a.substr(a.size() - 2) != "::")) {
        return false;
    }
    return std::all_of(a.begin(), a.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
    });
}

// A host name (letters, digits, '-', '.', '_'), an IPv6 address, or one in brackets.
bool valid_host_name(std::string_view name)
{
    if (name.empty() || name.size() > 253 || name.front() == '-') {
        return false;
    }
    if (name.front() == '[') {
        return name.size() > 2 && name.back() == ']' && valid_ipv6(name.substr(1, name.size() - 2));
    }
    if (name.find(':') != std::string_view::npos) {
        return valid_ipv6(name);
    }
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_';
    });
}

std::optional<unsigned> parse_count(std::string_view text, unsigned min = 1)
{
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || value < min || value > max_slots) {
        return std::nullopt;
    }
    return value;
}

// The hosts of one -H entry or hostfile host word: one name, or the names of a Slurm range.
struct HostEntry {
    std::vector<std::string> names;
    std::optional<unsigned> slots;
};

// "host", "host:N", "gpu[01-04]" or "gpu[01-04]:N"; an IPv6 address in brackets ("[fe80::1]:4")
// may carry its own colons: an entry is one when its first brackets hold a ':' ("[1-3]:4" is the
// hosts 1, 2 and 3, as Slurm reads "[1-3]"). `budget` is how many more names the whole list may
// have, of `limit`.
HostEntry parse_host_entry(
    std::string_view entry, const std::string& where, std::size_t budget, std::size_t limit, unsigned min_count = 1)
{
    const bool ipv6 =
        !entry.empty() && entry.front() == '[' && entry.substr(0, entry.find(']')).find(':') != std::string_view::npos;
    std::size_t colon = entry.rfind(':');
    if (ipv6) {
        std::size_t close = entry.find(']');
        colon = (close != std::string_view::npos && close + 1 < entry.size() && entry[close + 1] == ':')
            ? close + 1
            : std::string_view::npos;
    } else if (entry.find_first_of("[]") != std::string_view::npos) {
        // A ':' inside a range, or after an unclosed '[', is not a slot count: the name is then
        // the whole entry, and expand_node_list says what is wrong with it.
        const std::size_t open = entry.rfind('[');
        const std::size_t close = entry.rfind(']');
        const bool unclosed = open != std::string_view::npos && (close == std::string_view::npos || open > close);
        if (unclosed || (close != std::string_view::npos && colon < close)) {
            colon = std::string_view::npos;
        }
    }
    HostEntry host;
    std::string_view name = entry;
    if (colon != std::string_view::npos) {
        name = entry.substr(0, colon);
        auto slots = parse_count(entry.substr(colon + 1), min_count);
        if (!slots) {
            throw Error(fmt::format("{}: {} has a bad {}count {}; write host:N with N a whole number from {} to {}",
                where, base::quote_input(entry), min_count == 0 ? "" : "slot ",
                base::quote_input(entry.substr(colon + 1)), min_count, max_slots));
        }
        host.slots = slots;
    }
    if (!ipv6 && name.find_first_of("[]") != std::string_view::npos) {
        try {
            host.names = expand_node_list(name, budget);
        } catch (const Error& e) {
            throw Error(fmt::format("{}: {}", where, e.what()));
        }
        return host;
    }
    if (!valid_host_name(name)) {
        throw Error(fmt::format("{}: {} is not a host name{}", where, base::quote_input(name),
            std::count(entry.begin(), entry.end(), ':') > 1 ? " (an IPv6 address goes in brackets: [fe80::1]:4)" : ""));
    }
    if (budget == 0) {
        throw Error(fmt::format("{}: more than {} hosts", where, limit));
    }
    host.names.emplace_back(name);
    return host;
}

void append_hosts(HostEntry&& entry, std::vector<HostSlots>& hosts)
{
    for (std::string& name : entry.names) {
        hosts.push_back(HostSlots{std::move(name), entry.slots});
    }
}

// A host listed more than once is one host with the slots of its entries added up, as Open MPI
// counts `-H a:2,a:2` as four slots on a. An entry without a count means "as many as it has
// GPUs", which cannot be added to anything: listing such a host twice is an error, with
// `remedy` as the advice.
std::vector<HostSlots> merge_repeated_hosts(std::vector<HostSlots> hosts, const std::string& where,
    std::string_view remedy = "list it once, or give each entry its count (host:N)")
{
    std::unordered_map<std::string, std::size_t> first;
    std::vector<HostSlots> merged;
    merged.reserve(hosts.size());
    for (auto& h : hosts) {
        auto [it, inserted] = first.emplace(h.name, merged.size());
        if (inserted) {
            merged.push_back(std::move(h));
            continue;
        }
        HostSlots& earlier = merged[it->second];
        if (!earlier.slots || !h.slots) {
            throw Error(fmt::format("{}: {} is listed more than once{}; {}", where, h.name,
                earlier.slots || h.slots ? ", and not every time with a count" : "", remedy));
        }
        if (*earlier.slots + *h.slots > max_slots) {
            throw Error(fmt::format("{}: {} has more than {} slots in all", where, h.name, max_slots));
        }
        *earlier.slots += *h.slots;
    }
    return merged;
}

// The hosts of every entry of a list, in order, repeats not yet merged.
std::vector<HostSlots> parse_entries(
    std::string_view text, const std::string& where, std::string_view example, unsigned min_count, std::size_t limit)
{
    std::vector<HostSlots> hosts;
    for (std::string_view entry : split_node_list(text)) {
        if (entry.empty()) {
            throw Error(
                fmt::format("{}: empty host entry (a comma at an end, or two together); write {}", where, example));
        }
        append_hosts(parse_host_entry(entry, where, limit - hosts.size(), limit, min_count), hosts);
    }
    return hosts;
}

} // namespace

std::vector<HostSlots> parse_host_list(
    std::string_view text, std::string_view option, unsigned min_count, std::size_t limit)
{
    const std::string where = fmt::format("{} {}", option, base::quote_input(text));
    auto hosts = parse_entries(text, where, fmt::format("{} host1:N,host2:N", option), min_count, limit);
    return merge_repeated_hosts(std::move(hosts), where);
}

std::vector<std::string> parse_node_names(std::string_view text, std::string_view source, std::size_t limit)
{
    const std::string where = fmt::format("{}={}", source, base::quote_input(text));
    if (text.empty()) {
        throw Error(fmt::format("{} is set but empty; it names the allocation's nodes, as in gpu[01-04]: run "
                                "gpurun in the allocation's own environment, or unset it (env -u {}) outside one",
            source, source));
    }
    auto hosts = parse_entries(text, where, "names such as gpu[01-04],cpu7", 1, limit);
    for (const auto& h : hosts) {
        if (h.slots) {
            throw Error(fmt::format(
                "{}: a count after ':' ({}:{}); it lists node names only, as in gpu[01-04]", where, h.name, *h.slots));
        }
    }
    hosts = merge_repeated_hosts(std::move(hosts), where,
        "Slurm lists each node of an allocation once: run gpurun in the allocation's own environment");
    std::vector<std::string> names;
    names.reserve(hosts.size());
    for (auto& h : hosts) {
        names.push_back(std::move(h.name));
    }
    return names;
}

std::vector<HostSlots> parse_hostfile(std::string_view text, const std::string& origin, std::size_t limit)
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
        line = base::trim_blanks(line);
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
        HostEntry host = parse_host_entry(words[0], where, limit - hosts.size(), limit);
        for (std::size_t i = 1; i < words.size(); ++i) {
            std::string_view word = words[i];
            std::size_t eq = word.find('=');
            std::string_view key = word.substr(0, eq);
            std::string_view value = eq == std::string_view::npos ? std::string_view() : word.substr(eq + 1);
            if (key == "slots" || key == "max_slots" || key == "max-slots") {
                auto n = parse_count(value);
                if (!n) {
                    throw Error(fmt::format(
                        "{}: {} needs a whole number from 1 to {}", where, base::quote_input(word), max_slots));
                }
                if (key == "slots") {
                    if (host.slots) {
                        throw Error(fmt::format("{}: slots given twice for {}", where, words[0]));
                    }
                    host.slots = n;
                }
            } else {
                throw Error(fmt::format("{}: unknown word {}; a hostfile line is 'host slots=N' or 'host:N'", where,
                    base::quote_input(word)));
            }
        }
        append_hosts(std::move(host), hosts);
    }
    if (hosts.empty()) {
        throw Error(fmt::format("{}: no hosts in the hostfile", origin));
    }
    return merge_repeated_hosts(std::move(hosts), origin);
}

std::vector<HostSlots> read_hostfile(const std::string& path)
{
    return parse_hostfile(base::read_input_file(path, "hostfile"), path);
}

} // namespace base::launchers
