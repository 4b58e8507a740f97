#include "launcher/master_address.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace launcher {

namespace {

std::string unbracket(const std::string& text)
{
    if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
        return text.substr(1, text.size() - 2);
    }
    return text;
}

std::string address_text(const sockaddr* sa)
{
    char buffer[INET6_ADDRSTRLEN] = {};
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buffer, sizeof buffer);
    } else if (sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buffer, sizeof buffer);
    }
    return buffer;
}

std::vector<std::string> resolve_host(const std::string& host)
{
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) {
        return {};
    }
    std::vector<std::string> v4;
    std::vector<std::string> v6;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        std::string text = address_text(a->ai_addr);
        auto& list = a->ai_family == AF_INET ? v4 : v6;
        if (!text.empty() && std::find(list.begin(), list.end(), text) == list.end()) {
            list.push_back(text);
        }
    }
    freeaddrinfo(found);
    v4.insert(v4.end(), v6.begin(), v6.end());
    return v4;
}

std::vector<std::pair<std::string, std::string>> interface_addresses()
{
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) {
        return {};
    }
    std::vector<std::pair<std::string, std::string>> v4;
    std::vector<std::pair<std::string, std::string>> v6;
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) {
            continue;
        }
        if (i->ifa_addr->sa_family == AF_INET) {
            v4.emplace_back(address_text(i->ifa_addr), i->ifa_name);
        } else if (i->ifa_addr->sa_family == AF_INET6 &&
            !IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr)) {
            v6.emplace_back(address_text(i->ifa_addr), i->ifa_name);
        }
    }
    freeifaddrs(list);
    v4.insert(v4.end(), v6.begin(), v6.end());
    return v4;
}

} // namespace

AddressLookup system_address_lookup()
{
    return AddressLookup{resolve_host, interface_addresses};
}

bool is_address_literal(const std::string& text)
{
    const std::string bare = unbracket(text);
    in_addr v4{};
    in6_addr v6{};
    return inet_pton(AF_INET, bare.c_str(), &v4) == 1 || inet_pton(AF_INET6, bare.c_str(), &v6) == 1;
}

bool is_loopback(const std::string& address)
{
    const std::string bare = unbracket(address);
    in_addr v4{};
    if (inet_pton(AF_INET, bare.c_str(), &v4) == 1) {
        return (ntohl(v4.s_addr) >> 24) == 127;
    }
    in6_addr v6{};
    return inet_pton(AF_INET6, bare.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

MasterAddress choose_master_address(
    const std::string& first_host, bool first_is_this_host, bool single_node, const AddressLookup& lookup)
{
    if (single_node && first_is_this_host) {
        return {"127.0.0.1", ""};
    }
    if (is_address_literal(first_host)) {
        return {unbracket(first_host), ""};
    }
    const auto addresses = lookup.resolve(first_host);
    for (const auto& a : addresses) {
        if (!is_loopback(a)) {
            return {a, ""};
        }
    }
    if (addresses.empty()) {
        return {first_host,
            fmt::format("MASTER_ADDR is {}: the name does not resolve here, so the ranks resolve it "
                        "themselves; pass --master-addr ADDRESS to choose",
                first_host)};
    }
    if (single_node) {
        return {addresses.front(), ""};
    }
    if (first_is_this_host) {
        const auto local = lookup.local_addresses();
        if (!local.empty()) {
            return {local.front().first,
                fmt::format("{} resolves to {} here, which other hosts cannot reach; MASTER_ADDR is this host's {} "
                            "({}); pass --master-addr to choose another",
                    first_host, addresses.front(), local.front().first, local.front().second)};
        }
    }
    return {first_host,
        fmt::format("{} resolves to {} here, which other hosts cannot reach; MASTER_ADDR is the name "
                    "itself, for each host to resolve; pass --master-addr to choose",
            first_host, addresses.front())};
}

} // namespace launcher
