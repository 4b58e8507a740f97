#pragma once

#include "launcher/launch_options.hpp"

#include <string>
#include <vector>

namespace launcher {

/// A host and the GPUs (ranks) it has free for this job.
struct HostCapacity {
    std::string name;
    unsigned free = 0;
    friend bool operator==(const HostCapacity&, const HostCapacity&) = default;
};

/// A host --pack did not use, and why.
struct LeftOutHost {
    std::string name;
    std::string reason;
    friend bool operator==(const LeftOutHost&, const LeftOutHost&) = default;
};

/// --pack's answer: the hosts to use, in the order given (their slots = their free GPUs), and the
/// others with the reason each was left out.
struct PackChoice {
    std::vector<HostSlots> chosen;
    std::vector<LeftOutHost> left_out;
};

/// The fewest hosts that hold `ranks` ranks: hosts with the most free GPUs are taken first, ties in
/// the order given (the hostfile's), until they hold the job; the k hosts with the most free GPUs
/// hold the most ranks any k hosts can, so no smaller set exists. The chosen hosts keep the order
/// given, so ranks are numbered as the hostfile lists them. Throws base::Error when all of them
/// together cannot hold the job, with the counts.
PackChoice pack_hosts(const std::vector<HostCapacity>& hosts, unsigned ranks);

/// How many hosts the job needs at least (0 when the hosts cannot hold it): the --dry-run check that
/// a job is not spread over more nodes than it needs.
unsigned fewest_hosts(const std::vector<HostCapacity>& hosts, unsigned ranks);

} // namespace launcher
