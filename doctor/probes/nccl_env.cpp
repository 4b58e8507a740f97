#include "base/spelling.hpp"
#include "base/sysroot.hpp"
#include "doctor/probes/table.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <set>

namespace doctor::probes {

namespace {

// Variables that change how NCCL, CUDA and MPI pick devices and transports.
constexpr const char* kept_prefixes[] = {"NCCL_", "CUDA_", "OMPI_MCA_", "PMIX_MCA_", "UCX_", "TORCH_NCCL_",
    "NVIDIA_VISIBLE_DEVICES", "GLOO_SOCKET_IFNAME", "I_MPI_"};

bool kept(const std::string& name)
{
    return std::any_of(std::begin(kept_prefixes), std::end(kept_prefixes),
        [&](const char* prefix) { return name.rfind(prefix, 0) == 0; });
}

// NCCL reads integer parameters with strtol(str, NULL, 0): leading junk gives 0.
long nccl_int(const std::string& value)
{
    return std::strtol(value.c_str(), nullptr, 0);
}

// What a NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL value means, as NCCL's ncclGetLevel reads it: the path
// names are compared case-sensitively; a value starting with a digit is the old numbering
// 0=LOC 1=PIX 2=PXB 3=PHB 4+=SYS; anything else is ignored.
std::string nccl_level(const std::string& value)
{
    static const char* names[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS"};
    for (const char* n : names) {
        if (value == n) {
            return n;
        }
    }
    if (!value.empty() && value[0] >= '0' && value[0] <= '9') {
        static const char* old_levels[] = {"LOC", "PIX", "PXB", "PHB", "SYS", "SYS"};
        long l = std::min(nccl_int(value), 5L);
        return old_levels[std::max(l, 0L)];
    }
    return "";
}

// NCCL's interface list syntax (misc/socket.cc): a leading '^' excludes, then a leading '='
// asks for exact names instead of prefixes; entries are comma-separated, each may end in ":port".
struct InterfaceList {
    bool exclude = false;
    bool exact = false;
    std::vector<std::string> names;

    bool matches(const std::string& interface) const
    {
        if (names.empty()) {
            return true; // NCCL: an empty list matches everything
        }
        return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return named(interface, n); });
    }
    bool named(const std::string& interface, const std::string& n) const
    {
        return exact ? interface == n : interface.rfind(n, 0) == 0;
    }
    bool selects(const std::string& interface) const { return matches(interface) != exclude; }
};

InterfaceList parse_interface_list(std::string text)
{
    InterfaceList list;
    if (!text.empty() && text[0] == '^') {
        list.exclude = true;
        text.erase(0, 1);
    }
    if (!text.empty() && text[0] == '=') {
        list.exact = true;
        text.erase(0, 1);
    }
    std::size_t pos = 0;
    while (pos <= text.size()) {
        std::size_t comma = text.find(',', pos);
        std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        item = item.substr(0, item.find(':'));
        if (!item.empty()) {
            list.names.push_back(item);
        }
        if (comma == std::string::npos) {
            break;
        }
        pos = comma + 1;
    }
    return list;
}

std::string join(const std::vector<std::string>& items)
{
    return items.empty() ? std::string("none") : fmt::format("{}", fmt::join(items, ", "));
}

void judge_socket_ifname(const std::string& value, const facts::EnvFacts& env, Findings& out)
{
    const std::string subject = "NCCL_SOCKET_IFNAME";
    nlohmann::json seen = {{"NCCL_SOCKET_IFNAME", value}, {"interfaces", facts::write(env.interfaces)}};
    if (value.size() <= 1) {
        out.add("nccl-env.socket_ifname_ignored", subject,
            fmt::format("NCCL_SOCKET_IFNAME='{}' is ignored: NCCL only reads values of 2 characters or "
                        "more, and picks an interface itself",
                value),
            seen);
        return;
    }
    if (!env.interfaces) {
        out.add("nccl-env.socket_ifname_unchecked", subject,
            fmt::format("NCCL_SOCKET_IFNAME={} not checked: the network interfaces are unknown ({})", value,
                env.interfaces_error.value_or("not collected")),
            seen);
        return;
    }
    const std::vector<std::string>& interfaces = *env.interfaces;
    const InterfaceList list = parse_interface_list(value);
    std::vector<std::string> selected;
    for (const auto& i : interfaces) {
        if (list.selects(i)) {
            selected.push_back(i);
        }
    }
    // Entries that name no interface at all: a typo, or an interface of another node type. Not for
    // exclusions: "^docker,lo" is copied everywhere, docker or not.
    std::vector<std::string> unmatched;
    std::string hints;
    for (const auto& n : list.exclude ? std::vector<std::string>() : list.names) {
        if (std::none_of(
                interfaces.begin(), interfaces.end(), [&](const std::string& i) { return list.named(i, n); })) {
            unmatched.push_back(n);
            std::string hint = base::closest_match(n, interfaces);
            if (!hint.empty()) {
                hints += fmt::format(" (did you mean {}?)", hint);
            }
        }
    }
    seen["selected"] = selected;
    const std::string have = join(interfaces);
    if (!list.exclude && selected.empty()) {
        out.add("nccl-env.socket_ifname_missing", subject,
            fmt::format("NCCL_SOCKET_IFNAME={} matches no interface on this node{}: NCCL init fails with "
                        "'no socket interface found'; interfaces here: {}",
                value, hints, have),
            seen);
        return;
    }
    std::vector<std::string> usable;
    std::copy_if(
        selected.begin(), selected.end(), std::back_inserter(usable), [](const std::string& i) { return i != "lo"; });
    if (list.exclude && usable.empty()) {
        out.add(Severity::warn, "nccl-env.socket_ifname_missing", subject,
            fmt::format("NCCL_SOCKET_IFNAME={} leaves {} on this node: inter-node bootstrap cannot work; "
                        "interfaces here: {}",
                value, selected.empty() ? std::string("no interface") : "only loopback", have),
            seen);
        return;
    }
    if (!unmatched.empty()) {
        out.add("nccl-env.socket_ifname_partial", subject,
            fmt::format("NCCL_SOCKET_IFNAME={}: {} {} no interface on this node{}; NCCL uses {}; "
                        "interfaces here: {}",
                value, join(unmatched), unmatched.size() == 1 ? "names" : "name", hints, join(selected), have),
            seen);
        return;
    }
    out.add("nccl-env.socket_ifname_ok", subject,
        fmt::format("NCCL_SOCKET_IFNAME={} selects {}", value, join(selected)), seen);
}

} // namespace

// The environment variables that matter for NCCL/CUDA/MPI and the network interfaces NCCL could use.
Collector env_collector()
{
    return {"env", [](const CollectContext& ctx) {
                facts::EnvFacts out;
                for (const auto& [name, value] : ctx.env) {
                    if (kept(name)) {
                        out.variables[name] = value;
                    }
                }
                base::Sysroot root(ctx.sysroot);
                std::error_code ec;
                std::vector<std::string> names;
                for (const auto& entry : std::filesystem::directory_iterator(root.path("/sys/class/net"), ec)) {
                    names.push_back(entry.path().filename().string());
                }
                if (ec) {
                    out.interfaces_error =
                        fmt::format("cannot list {}: {}", root.path("/sys/class/net").string(), ec.message());
                } else {
                    std::sort(names.begin(), names.end());
                    out.interfaces = std::move(names);
                }
                return facts::write(out);
            }};
}

Probe nccl_env_probe()
{
    Probe p;
    p.name = "nccl-env";
    p.summary = "NCCL environment traps: P2P/IB/SHM disabled, a missing socket interface, debug output left on";
    p.collectors = {"env", "network"};
    p.codes = {
        {"nccl-env.ok", Severity::pass, "no NCCL environment traps",
            "None of the NCCL variables gpudoctor knows to be traps is set.", ""},
        {"nccl-env.p2p_disabled", Severity::warn, "NCCL_P2P_DISABLE=1",
            "NCCL will not use NVLink or PCIe peer-to-peer between GPUs of this node: intra-node traffic goes through "
            "host shared memory at a fraction of the bandwidth. It is a warning, not a failure, because it is a known "
            "workaround for GPUs whose P2P hangs (ACS or IOMMU on the PCIe path, some consumer GPUs); the p2p probe "
            "says whether P2P works here.",
            "unset NCCL_P2P_DISABLE unless P2P is known to be broken on this node"},
        {"nccl-env.ib_disabled", Severity::warn, "NCCL_IB_DISABLE is set on a node with InfiniBand/RoCE",
            "NCCL will not use the InfiniBand/RoCE HCAs and sends inter-node traffic over TCP sockets: an order of "
            "magnitude less bandwidth.",
            "unset NCCL_IB_DISABLE"},
        {"nccl-env.shm_disabled", Severity::warn, "NCCL_SHM_DISABLE is set",
            "NCCL will not use shared memory between processes of this node; where P2P is not possible traffic goes "
            "through the network instead.",
            "unset NCCL_SHM_DISABLE (and give the container a big /dev/shm instead)"},
        {"nccl-env.debug_on", Severity::warn, "NCCL_DEBUG is INFO or TRACE",
            "Every rank prints NCCL's topology, channels and transports at startup (TRACE: on every call): logs "
            "flood and initialisation slows down on big jobs. Useful while debugging, not left on.",
            "unset NCCL_DEBUG or set it to WARN once the job works"},
        {"nccl-env.p2p_level_restrictive", Severity::warn, "NCCL_P2P_LEVEL restricts GPU peer-to-peer",
            "NCCL_P2P_LEVEL sets the farthest PCI path over which NCCL uses P2P between GPUs: LOC disables it, NVL "
            "allows NVLink only, PIX only GPUs behind the same PCIe switch. Other pairs go through host memory.",
            "unset NCCL_P2P_LEVEL so NCCL decides from the topology"},
        {"nccl-env.gdr_level_restrictive", Severity::warn, "NCCL_NET_GDR_LEVEL restricts GPUDirect RDMA",
            "NCCL_NET_GDR_LEVEL sets the farthest PCI path between a GPU and a NIC over which NCCL uses GPUDirect "
            "RDMA: LOC disables it, PIX needs the NIC behind the GPU's own PCIe switch. Other pairs stage through "
            "host memory.",
            "unset NCCL_NET_GDR_LEVEL so NCCL decides from the topology"},
        {"nccl-env.socket_ifname_ok", Severity::pass, "NCCL_SOCKET_IFNAME names interfaces that exist",
            "NCCL's syntax: comma-separated prefixes, '=' before the list for exact names, '^' to exclude.", ""},
        {"nccl-env.socket_ifname_missing", Severity::fail, "NCCL_SOCKET_IFNAME selects no usable interface",
            "Including: no interface on this node matches, so NCCL's bootstrap fails ('no socket interface found'). "
            "Excluding (^): nothing but loopback is left, so ranks on other nodes cannot connect. Interfaces are "
            "taken from /sys/class/net; NCCL also needs them to have an IP address.",
            "set NCCL_SOCKET_IFNAME to an interface of this node (ip -br addr; a prefix, '=' for exact names, '^' to "
            "exclude), exclude fewer interfaces, or unset it",
            Severity::warn},
        {"nccl-env.socket_ifname_partial", Severity::warn, "some NCCL_SOCKET_IFNAME entries name nothing",
            "NCCL uses the entries that match and ignores the rest; an entry that names nothing is usually a typo "
            "or an interface of another kind of node.",
            "fix the entries that name nothing (a typo, or an interface of another node type)"},
        {"nccl-env.socket_ifname_ignored", Severity::warn, "NCCL_SOCKET_IFNAME is too short to count",
            "NCCL ignores values shorter than 2 characters (an empty value too) and picks an interface itself.",
            "unset NCCL_SOCKET_IFNAME, or set it to the interface NCCL should use (e.g. =eth0)"},
        {"nccl-env.socket_ifname_unchecked", Severity::skip, "NCCL_SOCKET_IFNAME not checked",
            "The network interfaces of the node (/sys/class/net) could not be listed.", ""},
        {"nccl-env.no_visible_devices", Severity::warn, "CUDA_VISIBLE_DEVICES hides every GPU",
            "CUDA_VISIBLE_DEVICES is empty or starts with an invalid index such as -1: CUDA programs see no GPU "
            "(torch.cuda.is_available() is False) while nvidia-smi still lists them.",
            "unset CUDA_VISIBLE_DEVICES or list the GPUs to use (0,1,...)"},
    };
    p.judge = [](const Facts& facts, const Policy& policy, Findings& out) {
        const facts::EnvFacts& env = *facts.env().get();
        auto get = [&](const char* name) { return env.variable(name); };
        auto one = [](const char* name, const std::string& value) { return nlohmann::json{{name, value}}; };
        if (auto v = get("NCCL_P2P_DISABLE"); v && nccl_int(*v) == 1) {
            out.add("nccl-env.p2p_disabled", "NCCL_P2P_DISABLE",
                fmt::format("NCCL_P2P_DISABLE={}: intra-node GPU traffic leaves NVLink/PCIe P2P and goes "
                            "through host memory",
                    *v),
                one("NCCL_P2P_DISABLE", *v));
        } else if (auto level = get("NCCL_P2P_LEVEL")) {
            const std::string l = nccl_level(*level);
            const char* what = l == "LOC" ? "disables GPU peer-to-peer altogether"
                : l == "NVL"              ? "allows P2P over NVLink only; PCIe-connected pairs go through host memory"
                : l == "NVB"              ? "allows P2P over NVLink (and through other GPUs) only"
                : l == "PIX"              ? "allows P2P only between GPUs behind the same PCIe switch"
                                          : nullptr;
            if (what != nullptr) {
                out.add("nccl-env.p2p_level_restrictive", "NCCL_P2P_LEVEL",
                    fmt::format("NCCL_P2P_LEVEL={} ({}) {}", *level, l, what), one("NCCL_P2P_LEVEL", *level));
            }
        }
        if (auto v = get("NCCL_IB_DISABLE"); v && nccl_int(*v) != 0 && !facts.network().get()->infiniband.empty()) {
            out.add("nccl-env.ib_disabled", "NCCL_IB_DISABLE",
                fmt::format("NCCL_IB_DISABLE={} on a node with InfiniBand/RoCE devices: inter-node "
                            "traffic goes over TCP sockets",
                    *v),
                one("NCCL_IB_DISABLE", *v));
        }
        if (auto v = get("NCCL_SHM_DISABLE"); v && nccl_int(*v) != 0) {
            out.add("nccl-env.shm_disabled", "NCCL_SHM_DISABLE",
                fmt::format("NCCL_SHM_DISABLE={}: GPUs of this node that cannot use P2P talk through the "
                            "network instead of shared memory",
                    *v),
                one("NCCL_SHM_DISABLE", *v));
        }
        if (auto level = get("NCCL_NET_GDR_LEVEL")) {
            const std::string l = nccl_level(*level);
            const char* what = l == "LOC" ? "disables GPUDirect RDMA: inter-node traffic stages through host memory"
                : (l == "PIX" || l == "NVL" || l == "NVB" || l == "C2C")
                ? "uses GPUDirect RDMA only for a NIC behind the GPU's own PCIe switch"
                : nullptr;
            if (what != nullptr) {
                out.add("nccl-env.gdr_level_restrictive", "NCCL_NET_GDR_LEVEL",
                    fmt::format("NCCL_NET_GDR_LEVEL={} ({}) {}", *level, l, what), one("NCCL_NET_GDR_LEVEL", *level));
            }
        }
        if (auto v = get("NCCL_DEBUG")) {
            std::string upper = *v;
            std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
            if (upper == "INFO" || upper == "TRACE") {
                out.add("nccl-env.debug_on", "NCCL_DEBUG",
                    fmt::format("NCCL_DEBUG={}: every rank floods the log and initialisation slows down", *v),
                    one("NCCL_DEBUG", *v));
            }
        }
        if (auto v = get("NCCL_SOCKET_IFNAME")) {
            judge_socket_ifname(*v, env, out);
        }
        if (auto v = get("CUDA_VISIBLE_DEVICES")) {
            std::string first = v->substr(0, v->find(','));
            first.erase(0, first.find_first_not_of(' '));
            const bool cpu_node = policy.expect_gpus && *policy.expect_gpus == 0;
            if ((first.empty() || first[0] == '-') && !cpu_node) {
                out.add("nccl-env.no_visible_devices", "CUDA_VISIBLE_DEVICES",
                    fmt::format("CUDA_VISIBLE_DEVICES='{}' hides every GPU from CUDA programs", *v),
                    one("CUDA_VISIBLE_DEVICES", *v));
            }
        }
        const bool any_problem = std::any_of(out.list().begin(), out.list().end(),
            [](const Finding& f) { return f.severity == Severity::warn || f.severity == Severity::fail; });
        if (!any_problem) {
            std::vector<std::string> nccl;
            for (const auto& [name, value] : env.variables) {
                if (name.rfind("NCCL_", 0) == 0) {
                    nccl.push_back(fmt::format("{}={}", name, value));
                }
            }
            out.add_first("nccl-env.ok", "environment",
                nccl.empty() ? std::string("no NCCL_* variables set")
                             : fmt::format("no NCCL environment traps; set: {}", fmt::join(nccl, " ")),
                env.variables);
        }
    };
    return p;
}

} // namespace doctor::probes
