// The findings of an NCCL log: each code's row (what gpudoctor explain and the man page say of it)
// beside the rule that makes its findings from one job's evidence.

#include "base/nccl/findings.hpp"

#include <fmt/format.h>

namespace base::nccl {

void Tally::add(std::uint64_t n, Mark where, const std::string& host)
{
    count += n;
    if (where.before(first)) {
        first = where;
    }
    if (hosts.size() < 8) {
        hosts.insert(host);
    }
}

std::string plural(std::uint64_t n, const char* one, const char* many)
{
    return fmt::format("{} {}", n, n == 1 ? one : many);
}

Finding make_finding(const FindingCode& code, std::string subject, std::string message, Where where,
    std::uint64_t count, nlohmann::json facts)
{
    Finding f = code.make(std::move(subject), std::move(message), std::move(facts));
    f.where = std::move(where);
    f.count = count;
    return f;
}

namespace {

std::string host_list(const std::set<std::string>& hosts)
{
    std::string out;
    for (const auto& h : hosts) {
        out += (out.empty() ? "" : ", ") + h;
    }
    return out;
}

void watchdog_timeout(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    const Watchdogs& w = e.facts.watchdogs;
    if (w.count == 0) {
        return;
    }
    const std::string what = w.first.op.empty() ? std::string("a collective") : w.first.op;
    const std::string detail = w.first.timeout_ms >= 0
        ? fmt::format(" after {} ms (timeout {} ms)", w.first.ran_ms >= 0 ? w.first.ran_ms : w.first.timeout_ms,
              w.first.timeout_ms)
        : std::string();
    out.push_back(make_finding(code, "job",
        fmt::format("PyTorch's NCCL watchdog timed out {}: {} (SeqNum {}){}{}", plural(w.count, "time", "times"), what,
            w.first.seq, detail,
            w.ranks.empty() ? std::string() : fmt::format(" on {}", plural(w.ranks.size(), "rank", "ranks"))),
        e.where(w.where), w.count));
}

void comm_error(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    const CommErrors& c = e.facts.comm_errors;
    if (c.count > 0) {
        out.push_back(make_finding(code, "job",
            fmt::format("an NCCL call failed ({}): {}", plural(c.count, "line", "lines"), c.first), e.where(c.where),
            c.count));
    }
}

void version_mismatch(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    if (e.mismatch.count > 0) {
        out.push_back(make_finding(code, "job", e.mismatch_detail, e.where(e.mismatch.first), e.mismatch.count));
    }
}

void init_incomplete(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    if (e.incomplete.count > 0) {
        out.push_back(make_finding(code, "job",
            fmt::format("{} logged Init START but no Init COMPLETE: {}{}", plural(e.incomplete.count, "rank", "ranks"),
                e.incomplete_detail, e.incomplete.count > 4 ? ", ..." : ""),
            e.where(e.incomplete.first), e.incomplete.count));
    }
}

void shm_not_p2p(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    if (e.shm.count == 0) {
        return;
    }
    std::string why;
    if (auto it = e.facts.env.find("NCCL_P2P_DISABLE"); it != e.facts.env.end() && it->second.value == "1") {
        why = fmt::format("; NCCL_P2P_DISABLE=1 is set ({})", e.where(it->second.where).str());
    } else if (auto lv = e.facts.env.find("NCCL_P2P_LEVEL"); lv != e.facts.env.end()) {
        why = fmt::format("; NCCL_P2P_LEVEL={} is set ({})", lv->second.value, e.where(lv->second.where).str());
    } else if (e.facts.evidence.p2p_refused.known()) {
        why = fmt::format("; NCCL could not enable P2P ({})", e.where(e.facts.evidence.p2p_refused).str());
    }
    out.push_back(make_finding(code, host_list(e.shm.hosts),
        fmt::format("shared memory (SHM) instead of GPU peer-to-peer inside a node: {} on {}{}",
            plural(e.shm.count, "connection line", "connection lines"), host_list(e.shm.hosts), why),
        e.where(e.shm.first), e.shm.count));
}

/// The first line that shows InfiniBand is there, and what it shows; unknown when none does.
std::pair<Mark, const char*> infiniband_shown(const Evidence& e)
{
    for (const auto& [mark, shows] : {std::pair{e.ib_disabled, "NCCL_IB_DISABLE=1 is set"},
             {e.ib_devices, "NCCL listed InfiniBand devices"}, {e.ib_plugin, "an InfiniBand net plugin was loaded"},
             {e.ipoib, "a socket interface is IP-over-InfiniBand"}, {e.no_verbs, "libibverbs could not be loaded"}}) {
        if (mark.known()) {
            return {mark, shows};
        }
    }
    return {Mark{}, ""};
}

std::string sockets_text(const Tally& socket)
{
    return fmt::format("TCP sockets between nodes: {} ({})",
        plural(socket.count, "connection line", "connection lines"), host_list(socket.hosts));
}

void socket_not_ib(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    const auto [ib, shows] = infiniband_shown(e.facts.evidence);
    if (e.socket.count > 0 && ib.known()) {
        out.push_back(make_finding(code, host_list(e.socket.hosts),
            fmt::format(
                "{} although the log shows InfiniBand: {} ({})", sockets_text(e.socket), shows, e.where(ib).str()),
            e.where(e.socket.first), e.socket.count));
    }
}

void net_socket(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    if (e.socket.count > 0 && !infiniband_shown(e.facts.evidence).first.known()) {
        out.push_back(make_finding(code, host_list(e.socket.hosts),
            sockets_text(e.socket) + "; the log shows no InfiniBand or RoCE device", e.where(e.socket.first),
            e.socket.count));
    }
}

void ib_without_gdr(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    if (e.ib_no_gdr.count == 0) {
        return;
    }
    const Mark disabled = e.facts.evidence.gdr_disabled;
    out.push_back(make_finding(code, host_list(e.ib_no_gdr.hosts),
        fmt::format("InfiniBand without GPUDirect RDMA: {} ({}){}",
            plural(e.ib_no_gdr.count, "connection line", "connection lines"), host_list(e.ib_no_gdr.hosts),
            disabled.known() ? fmt::format("; NCCL says GPU Direct RDMA Disabled ({})", e.where(disabled).str())
                             : std::string()),
        e.where(e.ib_no_gdr.first), e.ib_no_gdr.count));
}

void ring_crosses_nodes(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    if (e.ring_cross.count > 0) {
        out.push_back(make_finding(code, "job", e.ring_detail, e.where(e.ring_cross.first), e.ring_cross.count));
    }
}

void env_disables_transport(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    for (const auto& [name, hit] : e.facts.env) {
        const bool disables =
            ((name == "NCCL_P2P_DISABLE" || name == "NCCL_IB_DISABLE" || name == "NCCL_SHM_DISABLE") &&
                hit.value == "1") ||
            ((name == "NCCL_P2P_LEVEL" || name == "NCCL_NET_GDR_LEVEL") && (hit.value == "LOC" || hit.value == "0")) ||
            (name == "NCCL_NVLS_ENABLE" && hit.value == "0");
        if (disables) {
            out.push_back(make_finding(code, name,
                fmt::format("{}={} is set in the environment, which turns a transport off", name, hit.value),
                e.where(hit.where), hit.count));
        }
    }
}

void warn_records(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    for (const auto& w : e.job.warnings) {
        out.push_back(make_finding(code, "job",
            fmt::format("{} WARN {} of kind \"{}\", the first: {}", w.count, w.count == 1 ? "record" : "records",
                w.kind, w.example),
            w.where, w.count));
    }
}

void p2p_indirect(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    if (e.indirect.count > 0) {
        out.push_back(make_finding(code, host_list(e.indirect.hosts),
            fmt::format("peer-to-peer traffic relayed through another GPU: {} ({})",
                plural(e.indirect.count, "connection line", "connection lines"), host_list(e.indirect.hosts)),
            e.where(e.indirect.first), e.indirect.count));
    }
}

void no_connections(const JobEvidence& e, const FindingCode& code, std::vector<Finding>& out)
{
    const Job& job = e.job;
    if (job.connections != 0) {
        return;
    }
    const std::string input = job.inputs.empty() ? std::string("the input") : job.inputs.front();
    out.push_back(make_finding(code, "log",
        job.records == 0 ? fmt::format("no NCCL records in {} ({})", job.inputs.size() == 1 ? input : "the inputs",
                               plural(e.facts.lines, "line", "lines"))
                         : fmt::format("{} but no connection lines: the log ends before communicators connected, "
                                       "or NCCL_DEBUG_SUBSYS leaves out INIT",
                               plural(job.records, "NCCL record", "NCCL records")),
        Where{}, 0));
}

} // namespace

const std::vector<JobRule>& job_rules()
{
    static const std::vector<JobRule> rules = {
        {{"nccl.watchdog_timeout", Severity::fail, "PyTorch's NCCL watchdog timed out a collective",
             "A collective did not finish within the process group's timeout, so PyTorch's watchdog took the process "
             "down. One rank stopped (a crash, a hang, a dead link) and the others waited for it.",
             "find the rank that stopped first (its log ends early or shows a WARN) and why; check the links between "
             "nodes with nccl-tests; raise the timeout (init_process_group(timeout=...)) only when the collective is "
             "slow by design"},
            watchdog_timeout},
        {{"nccl.comm_error", Severity::fail, "an NCCL call failed (PyTorch 'NCCL error in:')",
             "PyTorch's 'NCCL error in: file:line, <error>' line: an NCCL call returned an error (unhandled system "
             "error, remote process exited, ...).",
             "read the first NCCL WARN before it (PyTorch prints it after 'Last error:'); rerun with NCCL_DEBUG=INFO "
             "NCCL_DEBUG_SUBSYS=INIT,NET to see the cause"},
            comm_error},
        {{"nccl.version_mismatch", Severity::fail, "processes of one communicator run different NCCL versions",
             "The processes of one communicator printed different NCCL versions. Ranks on different NCCL builds may "
             "disagree on protocols and hang or fail at init.",
             "use one NCCL build on every node (the same container image or framework wheel); compare "
             "'python -c \"import torch; print(torch.cuda.nccl.version())\"' across nodes"},
            version_mismatch},
        {{"nccl.init_incomplete", Severity::warn, "ranks started a communicator but never finished its init",
             "A rank logged 'Init START' for a communicator (NCCL 2.18.3 and later) and no 'Init COMPLETE': it hung or "
             "died while the communicator was set up.",
             "the job hung or died in NCCL init: look for WARN lines and for ranks that never started; check that "
             "every "
             "node reaches the others (NCCL_SOCKET_IFNAME, firewalls); ignore this if the log was cut short"},
            init_incomplete},
        {{"nccl.shm_not_p2p", Severity::warn, "GPUs in one node talk through shared memory instead of peer-to-peer",
             "Connection lines between GPUs of one host say 'via SHM' (or 'direct shared memory'): data goes through "
             "host memory instead of NVLink or PCIe peer-to-peer, which is several times slower. NCCL falls back to "
             "SHM "
             "when P2P is disabled (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL), refused by the system (ACS, IOMMU, containers "
             "without a shared IPC namespace) or not supported (GeForce).",
             "check NCCL_P2P_DISABLE and NCCL_P2P_LEVEL; run containers with --ipc=host (one container per node); turn "
             "off PCIe ACS or IOMMU translation for GPU peer traffic; run 'gpudoctor check' (p2p probe); GeForce GPUs "
             "have no P2P"},
            shm_not_p2p},
        {{"nccl.socket_not_ib", Severity::warn, "traffic between nodes goes over TCP although InfiniBand is there",
             "Connection lines between hosts say 'via NET/Socket' while the same log shows InfiniBand: IB devices "
             "listed by NET/IB, an IB net plugin, an IP-over-IB interface, NCCL_IB_DISABLE=1, or libibverbs missing. "
             "TCP is many times slower than RDMA.",
             "unset NCCL_IB_DISABLE; install rdma-core (libibverbs) in the container and pass /dev/infiniband in; set "
             "NCCL_IB_HCA to the right devices; check that 'ibstat' shows the ports Active"},
            socket_not_ib},
        {{"nccl.net_socket", Severity::info, "traffic between nodes goes over TCP sockets",
             "Connection lines between hosts say 'via NET/Socket' and the log shows no InfiniBand or RoCE device: the "
             "job runs over TCP.",
             "fine on Ethernet-only clusters: set NCCL_SOCKET_IFNAME to the fastest interface; if the nodes have "
             "InfiniBand or RoCE, install rdma-core and make /dev/infiniband visible"},
            net_socket},
        {{"nccl.ib_without_gdr", Severity::warn, "InfiniBand connections without GPUDirect RDMA",
             "Connection lines say 'via NET/IB/N' (or an IB plugin) without '/GDRDMA': data is staged through host "
             "memory on both sides instead of going straight from GPU to NIC.",
             "load nvidia-peermem (or use DMA-BUF: recent driver and kernel, NCCL_DMABUF_ENABLE=1); check "
             "NCCL_NET_GDR_LEVEL; GPU and HCA under one PCIe switch help; NCCL_DEBUG_SUBSYS=INIT,NET shows why"},
            ib_without_gdr},
        {{"nccl.ring_crosses_nodes", Severity::warn, "a ring leaves and re-enters nodes more often than needed",
             "A ring order line (NCCL prints it for rank 0 of each communicator) goes from host to host more often "
             "than "
             "the number of hosts: each extra crossing puts more traffic on the network than needed. Only rings that "
             "list every rank of the communicator are judged.",
             "give each node consecutive ranks (mpirun --map-by slot, as gpurun does); do not force a ring with "
             "NCCL_GRAPH_FILE or a wrong NCCL_TOPO_FILE"},
            ring_crosses_nodes},
        {{"nccl.env_disables_transport", Severity::warn, "an NCCL variable turns a transport off",
             "The log shows NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1, NCCL_IB_DISABLE=1, NCCL_P2P_LEVEL or "
             "NCCL_NET_GDR_LEVEL at LOC, or NCCL_NVLS_ENABLE=0 set by the environment.",
             "unset it unless it works around a known problem: it forces a slower path"},
            env_disables_transport},
        {{"nccl.warn", Severity::warn, "NCCL printed WARN records",
             "NCCL printed WARN records; they are grouped by kind (Cuda failure, NET/IB completion error, Call to "
             "ibv_... failed, socket errors, ...), each with its count and first occurrence.",
             "read the first of each kind: it names the failing call and its error"},
            warn_records},
        {{"nccl.p2p_indirect", Severity::info, "peer-to-peer traffic relayed through another GPU",
             "Connection lines say 'via P2P/indirect': two GPUs with no direct path talk through a third.",
             "expected where two GPUs have no direct path; 'gpudoctor topo' shows the links"},
            p2p_indirect},
        {{"nccl.no_connections", Severity::warn, "the log holds no NCCL connection lines",
             "No connection line was found. Either the log holds no NCCL records at all (NCCL_DEBUG was not INFO), or "
             "NCCL_DEBUG_SUBSYS left out INIT, or the job ended before communicators connected.",
             "run with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,NET when you set a subsystem list); NCCL prints "
             "connection lines while communicators initialise"},
            no_connections},
    };
    return rules;
}

const FindingCode& truncated_code()
{
    static const FindingCode code = {"nccl.truncated", Severity::warn,
        "the log holds more than one analysis keeps; part of it was left out",
        "One analysis keeps at most 20,000 hosts, 100,000 processes and ranks, 200,000 threads, 10,000 "
        "communicators, 1,000,000 ranks of all communicators together, 1,000,000 distinct connections and "
        "4,000,000 ranks of ring orders: far more than one job logs, so that a log cannot take all memory. "
        "Lines past those limits are left out and counted; the findings hold for the rest. A log past them is "
        "usually many jobs' logs put together, or not written by NCCL.",
        "give gpudoctor nccl-log the logs of one job, or of part of a job (the files of some hosts, or the lines "
        "of some hosts picked out with grep)"};
    return code;
}

const std::vector<FindingCode>& finding_codes()
{
    static const std::vector<FindingCode> codes = [] {
        std::vector<FindingCode> all;
        for (const auto& rule : job_rules()) {
            all.push_back(rule.code);
        }
        all.push_back(truncated_code());
        return all;
    }();
    return codes;
}

} // namespace base::nccl
