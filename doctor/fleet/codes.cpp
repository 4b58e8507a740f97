#include "doctor/fleet/codes.hpp"

namespace doctor::fleet {

using base::Severity;

const std::vector<base::FindingCode>& fleet_codes()
{
    static const std::vector<base::FindingCode> codes = {
        {"fleet.node_fit", Severity::pass, "the node is fit",
            "The node's snapshot was judged and nothing failed (with --strict: nothing warned either, and its "
            "measurements are not outliers). It is in --healthy-hostfile.",
            ""},
        {"fleet.no_answer", Severity::error, "a node gave no snapshot",
            "What came back from the node is not a gpudoctor snapshot (an error message, a truncated file, "
            "nothing): the node was not judged, so it is not fit.",
            "run gpudoctor snapshot on that node by hand and look at what it prints; a node that cannot be "
            "reached is left out of the job"},
        {"fleet.outlier", Severity::warn, "a node measured far below the others",
            "The node's all-reduce bus bandwidth, or its slowest GPU's copy bandwidth, is below the median of "
            "the nodes that measured it times the policy's deep.outlier_fraction: a slow link, a GPU on a "
            "narrow or slow PCIe link, or a busy node, that the node's own floors let pass.",
            "compare gpudoctor check --deep on that node with a good one; leave it out of the job "
            "(--healthy-hostfile with --strict does)"},
        {"fleet.slow_node", Severity::warn, "a node is slow in an all-reduce with any other",
            "With --deep through a launch, the nodes were paired and each pair's NCCL all-reduce measured; this "
            "node's pair was slow, and so was its all-reduce beside a node known to be good: the node itself (its "
            "NIC, its PCIe link to the NIC, a GPU, a busy host), not a link between two nodes.",
            "run gpudoctor check --deep on it and compare with a good node (network, pcie, bandwidth); leave it "
            "out of the job (--healthy-hostfile with --strict does)"},
        {"fleet.slow_link", Severity::warn, "two nodes are slow together but fast beside others",
            "The two nodes' all-reduce was slow, yet each was fast beside a node known to be good: the path "
            "between them (a cable, a switch port, a congested or misrouted link) rather than either node.",
            "check the switch ports and cables between the two nodes (ibdiagnet, the switch's counters); a job "
            "that places them far apart in its rings is slowed by it"},
        {"fleet.pairs_unresolved", Severity::info, "a node of a slow pair was not told apart",
            "The node was in a slow pair, and the rounds ran out (or no pair was fast to compare with) before it "
            "was measured beside a node known to be good: it may be slow, or its pair's link may be.",
            "run gpudoctor fleet --deep again with more nodes, or on this node and a known good one"},
        {"fleet.drift", Severity::info, "a fact differs between the nodes",
            "A fact that should be the same on every node of a job (a version, the GPUs, the InfiniBand "
            "ports, a limit, an NCCL variable) has another value on some nodes than on most.",
            "install the same software and settings on every node of a job, or leave the odd ones out"},
    };
    return codes;
}

} // namespace doctor::fleet
