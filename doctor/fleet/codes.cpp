#include "doctor/fleet/codes.hpp"

namespace doctor::fleet {

using probes::Severity;

const std::vector<probes::CodeText>& fleet_codes()
{
    static const std::vector<probes::CodeText> codes = {
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
        {"fleet.drift", Severity::info, "a fact differs between the nodes",
            "A fact that should be the same on every node of a job (a version, the GPUs, the InfiniBand "
            "ports, a limit, an NCCL variable) has another value on some nodes than on most.",
            "install the same software and settings on every node of a job, or leave the odd ones out"},
    };
    return codes;
}

} // namespace doctor::fleet
