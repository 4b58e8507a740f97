#pragma once

#include <functional>
#include <string>
#include <vector>

namespace launcher {

/// How gpurun learns addresses: the system's resolver and interfaces, or a test's.
struct AddressLookup {
    /// The addresses `host` resolves to here (IPv4 first), as text; empty when it does not resolve.
    std::function<std::vector<std::string>(const std::string& host)> resolve;
    /// This machine's addresses on interfaces that are up, loopback excluded, IPv4 first, each with
    /// its interface name.
    std::function<std::vector<std::pair<std::string, std::string>>()> local_addresses;
};

AddressLookup system_address_lookup();

/// MASTER_ADDR for the ranks, and a note when it is not simply the first host's address.
struct MasterAddress {
    std::string address;
    std::string note;
};

/// The address of the first host (where rank 0 runs), as every other host can reach it: a job on
/// this node alone uses 127.0.0.1; an address literal is used as it is; a name is resolved here,
/// IPv4 first. A name that resolves only to loopback (Debian maps its own host name to 127.0.1.1)
/// is useless to other hosts: when the first host is this machine, its first non-loopback address
/// is used instead. A name that does not resolve here is passed on as it is, with a note: the ranks
/// resolve it themselves.
MasterAddress choose_master_address(
    const std::string& first_host, bool first_is_this_host, bool single_node, const AddressLookup& lookup);

/// Whether `text` is an IPv4 or IPv6 address literal (IPv6 with or without brackets).
bool is_address_literal(const std::string& text);

/// Whether `address` (an address literal) is a loopback address: 127.0.0.0/8 or ::1.
bool is_loopback(const std::string& address);

} // namespace launcher
