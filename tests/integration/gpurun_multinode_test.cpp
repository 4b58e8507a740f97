// gpurun (and gpudoctor fleet) across "nodes" with the real Open MPI mpirun: each node is a network namespace on a
// bridge with its own hostname and its own hwloc XML topology, reached through an rsh agent
// (/work/shared/reference/multinode-on-one-machine.md). Each node plans from its own topology,
// so the two nodes bind their ranks differently. Needs root and `ip`; skipped otherwise.
#include "base/cpu_set.hpp"
#include "base/topology.hpp"
#include "tests/support/fake_gpu_node.hpp"
#include "tests/support/files.hpp"
#include "tests/support/process.hpp"
#include "tests/support/rank_files.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/topology_xml.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

using test_support::EnvChanges;
using test_support::TempDir;
using test_support::TopologyXml;

namespace {

using Values = test_support::RankValues;
using test_support::one;
using test_support::read_rank;

/// Runs a set-up or tear-down command; "" when it worked, else what failed and why.
std::string command(const std::vector<std::string>& argv)
{
    auto r = test_support::run(argv, {}, std::chrono::seconds(20));
    if (r.exit_code == 0) {
        return "";
    }
    std::string line;
    for (const auto& a : argv) {
        line += (line.empty() ? "" : " ") + a;
    }
    if (r.exit_code == 127 && r.err.empty()) {
        return line + ": " + argv[0] + " not found in PATH";
    }
    return line + ": exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") + ": " + r.err;
}

std::vector<pid_t> netns_pids(const std::string& ns)
{
    auto r = test_support::run({"ip", "netns", "pids", ns}, {}, std::chrono::seconds(10));
    std::vector<pid_t> pids;
    std::istringstream in(r.out);
    pid_t pid = 0;
    while (in >> pid) {
        pids.push_back(pid);
    }
    return pids;
}

std::vector<std::string> netns_names()
{
    auto r = test_support::run({"ip", "netns", "list"}, {}, std::chrono::seconds(10));
    std::vector<std::string> names;
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
        names.push_back(line.substr(0, line.find(' '))); // "NAME (id: 3)"
    }
    return names;
}

/// The pid a name of ours carries ("gkmn1234-1", "gkmb1234"), or nullopt for another's name.
std::optional<pid_t> owner_of(const std::string& name, const std::string& prefix)
{
    if (name.rfind(prefix, 0) != 0) {
        return std::nullopt;
    }
    const std::string rest = name.substr(prefix.size(), name.find('-') - prefix.size());
    if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos) {
        return std::nullopt;
    }
    return static_cast<pid_t>(std::stol(rest));
}

/// Processes of one test: an argv[0] ending in `program` and PROBE_DIR=`dir` in the environment.
std::vector<pid_t> processes_of(const std::string& program, const std::string& dir)
{
    std::vector<pid_t> found;
    const std::string marker = "PROBE_DIR=" + dir;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const std::string name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        std::string argv0;
        std::getline(std::ifstream(entry.path() / "cmdline"), argv0, '\0');
        if (std::filesystem::path(argv0).filename() != program) {
            continue;
        }
        std::ifstream environ(entry.path() / "environ");
        std::string var;
        while (std::getline(environ, var, '\0')) {
            if (var == marker) {
                const pid_t pid = static_cast<pid_t>(std::stol(name));
                if (test_support::alive(pid)) {
                    found.push_back(pid);
                }
                break;
            }
        }
    }
    return found;
}

/// Nodes 10.213.X.1, .2, ... (two unless told), as network namespaces on a bridge at
/// 10.213.X.254. X starts from this process's pid and skips subnets in use; names carry the pid,
/// so two test processes never share anything and a later run removes what a killed one left.
class SimulatedNodes {
public:
    explicit SimulatedNodes(unsigned count = 2) : m_count(count) { }

    static constexpr const char* ns_prefix = "gkmn";
    static constexpr const char* bridge_prefix = "gkmb";
    static constexpr const char* veth_prefix = "gkmv";

    /// Sets up the nodes; "" on success, else why not (then tear_down() undoes any part done).
    std::string set_up()
    {
        if (geteuid() != 0) {
            return "needs root to create network namespaces";
        }
        if (auto e = command({"ip", "netns", "list"}); !e.empty()) {
            return e;
        }
        const std::string tag = std::to_string(getpid());
        m_bridge = bridge_prefix + tag;
        // One lock for all test processes while a subnet is chosen and taken.
        const char* lock_path = std::filesystem::is_directory("/run/lock") ? "/run/lock/gpukit-multinode.lock"
                                                                           : "/tmp/gpukit-multinode.lock";
        int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock < 0) {
            return std::string("cannot open ") + lock_path + ": " + std::strerror(errno);
        }
        std::unique_ptr<int, void (*)(int*)> unlock(&lock, [](int* fd) { close(*fd); }); // closing unlocks
        if (flock(lock, LOCK_EX) != 0) {
            return std::string("cannot lock ") + lock_path + ": " + std::strerror(errno);
        }
        remove_stale();
        auto addresses = test_support::run({"ip", "-o", "-4", "addr", "show"}, {}, std::chrono::seconds(10)).out;
        const unsigned start = static_cast<unsigned>(getpid()) % 250;
        for (unsigned k = 0; k < 250 && m_subnet.empty(); ++k) {
            const std::string prefix = "10.213." + std::to_string((start + k) % 250 + 1) + ".";
            if (addresses.find(" " + prefix) == std::string::npos) {
                m_subnet = prefix;
            }
        }
        if (m_subnet.empty()) {
            return "no free subnet 10.213.X.0/24";
        }
        if (auto e = command({"ip", "link", "add", m_bridge, "type", "bridge"}); !e.empty()) {
            m_bridge.clear();
            return e;
        }
        for (const auto& step : std::vector<std::vector<std::string>>{
                 {"ip", "addr", "add", m_subnet + "254/24", "dev", m_bridge}, {"ip", "link", "set", m_bridge, "up"}}) {
            if (auto e = command(step); !e.empty()) {
                return e;
            }
        }
        unlock.reset();
        for (unsigned i = 1; i <= m_count; ++i) {
            const std::string ns = ns_prefix + tag + "-" + std::to_string(i);
            const std::string veth = veth_prefix + tag + "-" + std::to_string(i);
            if (auto e = command({"ip", "netns", "add", ns}); !e.empty()) {
                return e;
            }
            m_namespaces.push_back(ns);
            const std::string address = m_subnet + std::to_string(i);
            for (const auto& step : std::vector<std::vector<std::string>>{
                     {"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
                     {"ip", "link", "set", veth, "master", m_bridge}, {"ip", "link", "set", veth, "up"},
                     {"ip", "-n", ns, "addr", "add", address + "/24", "dev", "eth0"},
                     {"ip", "-n", ns, "link", "set", "eth0", "up"}, {"ip", "-n", ns, "link", "set", "lo", "up"},
                     {"ip", "-n", ns, "route", "add", "default", "via", m_subnet + "254"}}) {
                if (auto e = command(step); !e.empty()) {
                    return e;
                }
            }
            m_addresses.push_back(address);
        }
        return "";
    }

    /// Kills what runs in the namespaces (they share the process table with the host).
    void kill_processes() const
    {
        for (const auto& ns : m_namespaces) {
            for (int round = 0; round < 50; ++round) {
                auto pids = netns_pids(ns);
                if (pids.empty()) {
                    break;
                }
                for (pid_t pid : pids) {
                    kill(pid, SIGKILL);
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
    }

    void tear_down()
    {
        kill_processes();
        for (const auto& ns : m_namespaces) {
            command({"ip", "netns", "del", ns}); // takes the veth pair with it
        }
        const std::string tag = std::to_string(getpid());
        for (unsigned i = 1; i <= m_count; ++i) {
            const std::string veth = veth_prefix + tag + "-" + std::to_string(i);
            if (std::filesystem::exists("/sys/class/net/" + veth)) {
                command({"ip", "link", "del", veth});
            }
        }
        if (!m_bridge.empty()) {
            command({"ip", "link", "del", m_bridge});
        }
        m_namespaces.clear();
        m_addresses.clear();
        m_bridge.clear();
    }

    const std::vector<std::string>& namespaces() const { return m_namespaces; }
    const std::vector<std::string>& addresses() const { return m_addresses; }
    std::string subnet_cidr() const { return m_subnet + "0/24"; }

private:
    // What an earlier test process left when it was killed before its tear-down.
    static void remove_stale()
    {
        for (const auto& ns : netns_names()) {
            auto owner = owner_of(ns, ns_prefix);
            if (owner && kill(*owner, 0) != 0) {
                for (pid_t pid : netns_pids(ns)) {
                    kill(pid, SIGKILL);
                }
                command({"ip", "netns", "del", ns});
            }
        }
        for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net")) {
            const std::string name = entry.path().filename().string();
            for (const char* prefix : {bridge_prefix, veth_prefix}) {
                auto owner = owner_of(name, prefix);
                if (owner && kill(*owner, 0) != 0) {
                    command({"ip", "link", "del", name});
                }
            }
        }
    }

    unsigned m_count;
    std::string m_subnet; ///< "10.213.X."
    std::string m_bridge;
    std::vector<std::string> m_namespaces;
    std::vector<std::string> m_addresses;
};

/// A suite over `Count` simulated nodes, set up once for its tests.
template <unsigned Count> class NodesSuite : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        s_nodes = new SimulatedNodes(Count);
        s_skip = s_nodes->set_up();
        if (!s_skip.empty()) {
            s_nodes->tear_down();
        }
    }

    static void TearDownTestSuite()
    {
        s_nodes->tear_down();
        delete s_nodes;
        s_nodes = nullptr;
    }

    static inline SimulatedNodes* s_nodes = nullptr;
    static inline std::string s_skip;
};

class GpurunMultiNode : public NodesSuite<2> {
protected:
    void SetUp() override
    {
        if (!s_skip.empty()) {
            GTEST_SKIP() << "cannot simulate two nodes: " << s_skip;
        }
        const base::CpuSet allowed = base::Topology::load_live(false).layout().allowed;
        if (allowed.size() < 2) {
            GTEST_SKIP() << "needs 2 CPUs to tell the nodes' bindings apart; this machine allows " << allowed.to_list();
        }
        m_a = allowed.cpus()[0];
        m_b = allowed.cpus()[1];
        // Node 1: bus 07 near the first CPU, bus 0f near the second; node 2 the other way round.
        m_near = {{{"0000:07:00.0", m_a}, {"0000:0f:00.0", m_b}}, {{"0000:07:00.0", m_b}, {"0000:0f:00.0", m_a}}};
        for (unsigned n = 0; n < 2; ++n) {
            m_xml.push_back(write_topology(n));
        }
        m_agent = write_agent();
        const auto& addr = s_nodes->addresses();
        m_hosts = addr[0] + ":2," + addr[1] + ":2";
        m_env = {{"PROBE_DIR", m_dir.path().string()}, {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
            {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}, {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
            {"OMPI_MCA_plm_rsh_agent", m_agent.string()}, {"OMPI_MCA_oob_tcp_if_include", s_nodes->subnet_cidr()},
            {"OMPI_MCA_btl_tcp_if_include", s_nodes->subnet_cidr()}, {"OMPI_MCA_btl", "tcp,self,vader"},
            {"HWLOC_XMLFILE", m_xml[0].string()}, {"HWLOC_THISSYSTEM", "1"}, {"GPUKIT_NVML_LIBRARY", "/nonexistent"},
            {"CUDA_VISIBLE_DEVICES", test_support::unset_var}, {"OMP_NUM_THREADS", test_support::unset_var},
            {"MASTER_ADDR", test_support::unset_var}, {"MASTER_PORT", test_support::unset_var}};
    }

    void TearDown() override
    {
        if (s_nodes != nullptr) {
            s_nodes->kill_processes();
        }
    }

    /// Two packages with one NUMA node each, so each GPU has one CPU near it; the PUs in between
    /// (when this machine's first two allowed CPUs are not 0 and 1) are not allowed.
    std::filesystem::path write_topology(unsigned node) const
    {
        TopologyXml xml(s_nodes->namespaces()[node]);
        const unsigned p0 = xml.package();
        const unsigned p1 = xml.package();
        xml.numa(p0, 0, m_a + 1);
        xml.numa(p1, 1, m_b - m_a);
        xml.allow_only({m_a, m_b});
        for (const auto& [bus, cpu] : m_near[node]) {
            xml.gpu(TopologyXml::at_package(cpu == m_a ? p0 : p1), bus);
        }
        // An HCA beside each GPU: mlx5_0 near the first CPU, mlx5_1 near the second.
        xml.hca(TopologyXml::at_package(p0), "0000:c1:00.0", "mlx5_0");
        xml.hca(TopologyXml::at_package(p1), "0000:c2:00.0", "mlx5_1");
        return xml.write(m_dir / ("node" + std::to_string(node + 1) + ".xml"));
    }

    /// The rsh agent: runs the command on the node of the address it is given, with the node's
    /// hostname and topology, in a mount namespace of its own, after the node's `setup` (shell
    /// commands: what makes one node differ from the other).
    std::filesystem::path write_agent(const std::vector<std::string>& setup = {}) const
    {
        std::string script = "#!/bin/sh\nhost=$1; shift\ncase \"$host\" in\n";
        for (unsigned n = 0; n < 2; ++n) {
            script += s_nodes->addresses()[n] + ") ns='" + s_nodes->namespaces()[n] + "'; xml='" + m_xml[n].string() +
                "'; setup='" + (n < setup.size() ? setup[n] : std::string()) + "' ;;\n";
        }
        script += "*) echo \"agent: unknown host $host\" >&2; exit 1 ;;\nesac\n"
                  "exec ip netns exec \"$ns\" unshare --uts --mount sh -c \"hostname $ns; export HWLOC_XMLFILE='$xml' "
                  "HWLOC_THISSYSTEM=1; $setup $*\"\n";
        auto path = m_dir / "agent.sh";
        std::ofstream(path) << script;
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
        return path;
    }

    test_support::Finished gpurun(std::vector<std::string> args, const EnvChanges& extra = {})
    {
        return test_support::run_with(GPURUN_PATH, std::move(args), m_env, extra, std::chrono::seconds(25));
    }

    TempDir m_dir;
    unsigned m_a = 0;
    unsigned m_b = 0;
    std::vector<std::map<std::string, unsigned>> m_near; ///< per node: GPU bus id → its CPU
    std::vector<std::filesystem::path> m_xml;
    std::filesystem::path m_agent;
    std::string m_hosts;
    EnvChanges m_env;
};

} // namespace

TEST_F(GpurunMultiNode, EachNodeBindsItsRanksFromItsOwnTopology)
{
    auto r = gpurun({"-np", "4", "-H", m_hosts, "--nic-binding", "nccl", RANK_PROBE_PATH});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    std::set<std::string> ports;
    for (unsigned rank = 0; rank < 4; ++rank) {
        const unsigned node = rank / 2;
        auto v = read_rank(m_dir, rank);
        SCOPED_TRACE("rank " + std::to_string(rank));
        EXPECT_EQ(one(v, "RANK"), std::to_string(rank));
        EXPECT_EQ(one(v, "WORLD_SIZE"), "4");
        EXPECT_EQ(one(v, "LOCAL_RANK"), std::to_string(rank % 2));
        EXPECT_EQ(one(v, "LOCAL_WORLD_SIZE"), "2");
        EXPECT_EQ(one(v, "GROUP_RANK"), std::to_string(node)) << "torchrun's node index";
        EXPECT_EQ(one(v, "NODE_RANK"), std::to_string(node)) << "Lightning's";
        EXPECT_EQ(one(v, "HOST"), s_nodes->namespaces()[node]);
        EXPECT_EQ(one(v, "MASTER_ADDR"), s_nodes->addresses()[0]);
        ports.insert(one(v, "MASTER_PORT"));
        const std::string bus = one(v, "GPURUN_GPU_BUS_ID");
        ASSERT_EQ(m_near[node].count(bus), 1U) << "no GPU " << bus << " on node " << node + 1;
        EXPECT_EQ(one(v, "Cpus_allowed_list"), std::to_string(m_near[node].at(bus)))
            << "the CPU near " << bus << " in node " << node + 1 << "'s topology";
        EXPECT_EQ(one(v, "GPURUN_CPUS"), one(v, "Cpus_allowed_list"));
        const std::string hca = m_near[node].at(bus) == m_a ? "mlx5_0" : "mlx5_1";
        EXPECT_EQ(one(v, "GPURUN_NIC"), hca) << "the NIC beside the rank's GPU";
        EXPECT_EQ(one(v, "GPURUN_HCA"), hca) << "the older name of GPURUN_NIC";
        EXPECT_EQ(one(v, "UCX_NET_DEVICES"), hca + ":1");
        EXPECT_EQ(one(v, "NCCL_IB_HCA"), "=" + hca + ":1") << "--nic-binding nccl";
    }
    for (unsigned node = 0; node < 2; ++node) {
        EXPECT_NE(one(read_rank(m_dir, 2 * node), "GPURUN_GPU_BUS_ID"),
            one(read_rank(m_dir, 2 * node + 1), "GPURUN_GPU_BUS_ID"))
            << "two ranks on one GPU of node " << node + 1;
    }
    ASSERT_EQ(ports.size(), 1U) << "every rank has the same MASTER_PORT";
    EXPECT_NE(*ports.begin(), "<unset>");
}

TEST_F(GpurunMultiNode, ExitStatusOfARankOnTheSecondNode)
{
    auto r = gpurun({"-np", "4", "-H", m_hosts, RANK_PROBE_PATH}, {{"PROBE_EXIT_RANK", "3"}, {"PROBE_EXIT", "7"}});
    EXPECT_EQ(r.exit_code, 7) << r.err;
    EXPECT_EQ(one(read_rank(m_dir, 3), "HOST"), s_nodes->namespaces()[1]) << "rank 3 ran on node 2";
}

TEST_F(GpurunMultiNode, SigintLeavesNothingBehindOnAnyNode)
{
    EnvChanges env = m_env;
    env["PROBE_SLEEP"] = "60";
    pid_t pid = test_support::start({GPURUN_PATH, "-np", "4", "-H", m_hosts, "--grace", "3", RANK_PROBE_PATH}, env,
        (m_dir / "gpurun.log").string());
    std::vector<pid_t> ranks = test_support::wait_for_rank_pids(m_dir, 4, std::chrono::milliseconds(20000));
    if (ranks.size() < 4) {
        FAIL() << "the 4 ranks did not start; gpurun said:\n" << test_support::kill_and_read(pid, m_dir / "gpurun.log");
    }
    // What the check below looks for is there while the job runs: one orted per node, the ranks.
    EXPECT_EQ(processes_of("orted", m_dir.path().string()).size(), 2U);
    EXPECT_EQ(processes_of("rank_probe", m_dir.path().string()).size(), 4U);
    EXPECT_FALSE(netns_pids(s_nodes->namespaces()[1]).empty());
    const auto stopped = test_support::interrupt(pid, std::chrono::seconds(10));
    EXPECT_EQ(stopped.code, 128 + SIGINT) << "gpurun did not end within 10 s of SIGINT (grace 3 s)";
    EXPECT_LT(stopped.took, std::chrono::seconds(8));
    // Let the kernel finish with processes killed a moment ago.
    auto leftovers = [&] {
        std::vector<std::string> out;
        for (pid_t p : ranks) {
            if (test_support::alive(p)) {
                out.push_back("rank " + std::to_string(p));
            }
        }
        for (const char* program : {"orted", "gpurun-rank", "rank_probe"}) {
            for (pid_t p : processes_of(program, m_dir.path().string())) {
                out.push_back(std::string(program) + " " + std::to_string(p));
            }
        }
        for (const auto& ns : s_nodes->namespaces()) {
            for (pid_t p : netns_pids(ns)) {
                out.push_back("in " + ns + ": " + std::to_string(p));
            }
        }
        return out;
    };
    std::vector<std::string> left = leftovers();
    for (int i = 0; i < 50 && !left.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        left = leftovers();
    }
    for (const auto& what : left) {
        ADD_FAILURE() << "survived gpurun: " << what;
    }
}

namespace {

using nlohmann::json;

/// gpudoctor fleet across the two nodes: each node's check runs there through Open MPI (the rsh
/// agent reaches the node), with the fake NVML its fixture describes.
class FleetMultiNode : public GpurunMultiNode {
protected:
    void SetUp() override
    {
        GpurunMultiNode::SetUp();
        if (IsSkipped()) {
            return;
        }
        std::ofstream(m_dir / "two.json") << test_support::healthy_gpu_node(2).dump();
        std::ofstream(m_dir / "one.json") << test_support::healthy_gpu_node(1).dump();
        json hung = test_support::healthy_gpu_node(2);
        hung["hang_in"] = "nvmlDeviceGetCount_v2";
        std::ofstream(m_dir / "hung.json") << hung.dump();
    }

    /// The shell words that give a node the fixture `name`, and `more`.
    std::string node_setup(const std::string& fixture, const std::string& more = "") const
    {
        return "export FAKE_NVML_FIXTURE=" + (m_dir / fixture).string() + "; " + more;
    }

    test_support::Finished fleet(std::vector<std::string> args, const std::vector<std::string>& setup)
    {
        m_agent = write_agent(setup);
        args.insert(args.begin(), {"fleet", "--launcher", "openmpi"});
        const std::string path = std::filesystem::path(GPURUN_PATH).parent_path().string() + ":" + std::getenv("PATH");
        return test_support::run_with(GPUDOCTOR_PATH, std::move(args), m_env,
            {{"PATH", path}, {"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"GPUKIT_CUDA_LIBRARY", FAKE_CUDA_PATH},
                {"GPUKIT_NCCL_LIBRARY", FAKE_NCCL_PATH}, {"NO_COLOR", "1"}},
            std::chrono::seconds(60));
    }

    std::string hosts() const { return s_nodes->addresses()[0] + "," + s_nodes->addresses()[1]; }
};

/// The findings of `host` in a fleet report, by code.
std::set<std::string> codes_of(const json& report, const std::string& host)
{
    std::set<std::string> codes;
    for (const auto& node : report["nodes"]) {
        if (node["host"] == host) {
            for (const auto& f : node["findings"]) {
                codes.insert(f["code"].get<std::string>());
            }
        }
    }
    return codes;
}

} // namespace

/// Shell words that give a node an InfiniBand HCA mlx5_0 whose port 1 is in `state` (a tmpfs over
/// /sys/class in the node's mount namespace). No single quotes: the agent holds them in its own.
std::string infiniband_port(const std::string& state, const std::string& phys_state)
{
    const std::string port = "/sys/class/infiniband/mlx5_0/ports/1";
    return "mount -t tmpfs tmpfs /sys/class && mkdir -p " + port + " && echo " + state + " > " + port +
        "/state && echo " + phys_state + " > " + port + "/phys_state && echo 200 Gb/sec \\(4X HDR\\) > " + port +
        "/rate && echo InfiniBand > " + port + "/link_layer;";
}

TEST_F(FleetMultiNode, TheOddNodeIsNamedWithItsFindingsAndTheFactsThatDrift)
{
    // Node 2: one GPU of two, a 1 MiB /dev/shm, NCCL_P2P_DISABLE left in its environment, its
    // InfiniBand port down.
    const auto r = fleet({"-H", hosts(), "--only", "driver,gpus,limits,nccl-env,network", "--expect-gpus", "2",
                             "--json", "--healthy-hostfile", (m_dir / "healthy").string()},
        {node_setup("two.json", infiniband_port("\"4: ACTIVE\"", "\"5: LinkUp\"")),
            node_setup("one.json",
                "mount -t tmpfs -o size=1m tmpfs /dev/shm; export NCCL_P2P_DISABLE=1; " +
                    infiniband_port("\"1: DOWN\"", "\"3: Disabled\""))});
    ASSERT_EQ(r.exit_code, 1) << r.err << r.out;
    const json j = json::parse(r.out);
    const std::string n1 = s_nodes->addresses()[0];
    const std::string n2 = s_nodes->addresses()[1];
    ASSERT_EQ(j["nodes"].size(), 2U);
    for (const auto& node : j["nodes"]) {
        ASSERT_EQ(node["answer"], "snapshot") << node["host"] << ": " << node["why"] << "\n" << r.err;
    }
    EXPECT_EQ(j["nodes"][0]["host"], n1) << "named as the launcher reached it, as a hostfile needs";
    EXPECT_EQ(j["nodes"][0]["facts"]["host"]["hostname"], s_nodes->namespaces()[0]) << "answered from node 1 itself";
    EXPECT_EQ(j["nodes"][1]["facts"]["host"]["hostname"], s_nodes->namespaces()[1]);
    EXPECT_EQ(j["nodes"][0]["exit_code"], 0);
    EXPECT_EQ(j["nodes"][1]["exit_code"], 1);
    const auto odd = codes_of(j, n2);
    EXPECT_EQ(odd.count("gpus.count"), 1U);
    EXPECT_EQ(odd.count("limits.shm_small"), 1U);
    EXPECT_EQ(odd.count("nccl-env.p2p_disabled"), 1U);
    EXPECT_EQ(odd.count("network.port_down"), 1U);
    EXPECT_EQ(codes_of(j, n1).count("limits.shm_small"), 0U);
    EXPECT_EQ(codes_of(j, n1).count("network.port_down"), 0U);
    bool variable_drifts = false;
    bool ports_drift = false;
    for (const auto& d : j["drift"]) {
        if (d["fact"] == "infiniband") {
            ports_drift = true;
            ASSERT_EQ(d["odd"].size(), 1U);
            EXPECT_EQ(d["odd"][0]["host"], n2);
            EXPECT_NE(d["odd"][0]["value"].get<std::string>().find("DOWN"), std::string::npos) << d.dump();
        }
        if (d["fact"] == "NCCL_P2P_DISABLE") {
            variable_drifts = true;
            EXPECT_EQ(d["majority"], "(none)");
            ASSERT_EQ(d["odd"].size(), 1U);
            EXPECT_EQ(d["odd"][0]["host"], n2);
            EXPECT_EQ(d["odd"][0]["value"], "1");
        }
    }
    EXPECT_TRUE(variable_drifts) << j["drift"].dump();
    EXPECT_TRUE(ports_drift) << j["drift"].dump();
    EXPECT_EQ(test_support::file_text(m_dir / "healthy"), n1 + " slots=2\n");
}

TEST_F(FleetMultiNode, ANodeWhoseCheckHangsIsReportedAtTheDeadlineWhileTheOtherAnswers)
{
    const auto started = std::chrono::steady_clock::now();
    const auto r = fleet({"-H", hosts(), "--only", "driver,gpus", "--deadline", "3", "--timeout", "60", "--json"},
        {node_setup("two.json"), node_setup("hung.json")});
    const auto took = std::chrono::steady_clock::now() - started;
    ASSERT_EQ(r.exit_code, 1) << r.err << r.out;
    EXPECT_LT(took, std::chrono::seconds(25));
    const json j = json::parse(r.out);
    ASSERT_EQ(j["nodes"].size(), 2U);
    EXPECT_EQ(j["nodes"][0]["answer"], "snapshot");
    EXPECT_EQ(j["nodes"][0]["exit_code"], 0);
    EXPECT_EQ(j["nodes"][1]["answer"], "timed out");
    EXPECT_EQ(j["nodes"][1]["why"], "its check took longer than the deadline, 3 s");
}

TEST_F(FleetMultiNode, ANodeThatPrintsSomethingElseIsGarbageWithWhatItPrinted)
{
    // On node 2, what runs as gpudoctor is a script (bound over it in the node's mount namespace).
    const auto script = m_dir / "not-gpudoctor.sh";
    std::ofstream(script) << "#!/bin/sh\necho 'Welcome to node 2! Last login: never'\necho '{\"not\": \"a frame\"}'\n";
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    const auto r = fleet({"-H", hosts(), "--only", "gpus", "--json"},
        {node_setup("two.json"),
            node_setup("two.json", "mount --bind " + script.string() + " " + GPUDOCTOR_PATH + ";")});
    ASSERT_EQ(r.exit_code, 1) << r.err << r.out;
    const json j = json::parse(r.out);
    ASSERT_EQ(j["nodes"].size(), 2U);
    EXPECT_EQ(j["nodes"][0]["answer"], "snapshot");
    EXPECT_EQ(j["nodes"][1]["answer"], "garbage");
    EXPECT_EQ(j["nodes"][1]["why"], "no answer; it printed instead: 'Welcome to node 2! Last login: never'");
}

TEST_F(FleetMultiNode, DeepPairsTheNodesInAnAllReduceAcrossThem)
{
    // Two GPUs per node (the fake CUDA driver and NCCL); node 2's ranks of the joined
    // communicator (2 and 3) run at 40 GB/s, node 1's at 100.
    const std::string gpus = "export FAKE_CUDA_DEVICE_COUNT=2 FAKE_NCCL_ALGBW_GBPS=100,100,40,40;";
    const auto r = fleet({"-H", hosts(), "--deep", "--only", "gpus", "--json", "--pair-port", "29711"},
        {node_setup("two.json", gpus), node_setup("two.json", gpus)});
    ASSERT_LE(r.exit_code, 1) << r.err << r.out;
    const json j = json::parse(r.out);
    ASSERT_TRUE(j["pairs"].is_object()) << r.out.substr(0, 3000) << r.err;
    const json& round = j["pairs"]["rounds"][0];
    ASSERT_EQ(round["pairs"].size(), 1U) << j["pairs"].dump();
    EXPECT_EQ(round["pairs"][0], json::array({s_nodes->addresses()[0], s_nodes->addresses()[1]}));
    // Four ranks over two nodes: the slowest rank's 40 GB/s algbw, busbw 40 × 2(4-1)/4 = 60.
    EXPECT_NEAR(round["gbps"][0].get<double>(), 60, 0.5) << j["pairs"].dump();
    EXPECT_EQ(j["pairs"]["slow_nodes"].size(), 0U) << "one pair is measured against itself";
}

TEST_F(FleetMultiNode, APairWhoseAllReduceFailsSaysWhyOnWhichNode)
{
    const std::string gpus = "export FAKE_CUDA_DEVICE_COUNT=2;";
    const auto r = fleet({"-H", hosts(), "--deep", "--only", "gpus", "--json"},
        {node_setup("two.json", gpus), node_setup("two.json", gpus + " export FAKE_NCCL_FAIL_IN=ncclCommInitRank;")});
    ASSERT_LE(r.exit_code, 1) << r.err << r.out;
    const json j = json::parse(r.out);
    ASSERT_TRUE(j["pairs"].is_object()) << r.err;
    EXPECT_EQ(j["pairs"]["rounds"][0]["gbps"][0], -1);
    ASSERT_EQ(j["pairs"]["failed"].size(), 1U) << j["pairs"].dump();
    EXPECT_EQ(j["pairs"]["failed"][0]["host"], s_nodes->addresses()[1]);
    EXPECT_NE(j["pairs"]["failed"][0]["why"].get<std::string>().find("ncclCommInitRank (ranks 2 of 4) failed"),
        std::string::npos)
        << j["pairs"]["failed"].dump();
}

TEST_F(FleetMultiNode, AHostTheLauncherCannotReachIsNamedWithWhatItSaid)
{
    const std::string absent = s_nodes->addresses()[0].substr(0, s_nodes->addresses()[0].rfind('.')) + ".77";
    const auto r = fleet({"-H", s_nodes->addresses()[0] + "," + absent, "--only", "gpus", "--json"},
        {node_setup("two.json"), node_setup("two.json")});
    ASSERT_EQ(r.exit_code, 1) << r.err << r.out;
    const json j = json::parse(r.out);
    ASSERT_EQ(j["nodes"].size(), 2U);
    EXPECT_EQ(j["nodes"][1]["host"], absent);
    EXPECT_EQ(j["nodes"][1]["answer"], "unreachable");
    EXPECT_EQ(j["nodes"][1]["why"], "agent: unknown host " + absent);
    EXPECT_EQ(j["summary"]["not_answering"].get<int>() >= 1, true);
}

namespace {

/// gpudoctor fleet --deep across four nodes, two fake GPUs each: the rounds of node pairs.
class FleetFourNodes : public NodesSuite<4> {
protected:
    void SetUp() override
    {
        if (!s_skip.empty()) {
            GTEST_SKIP() << "cannot simulate four nodes: " << s_skip;
        }
        TopologyXml xml("node");
        xml.numa(xml.package(), 0, 2);
        m_xml = xml.write(m_dir / "node.xml");
        std::ofstream(m_dir / "two.json") << test_support::healthy_gpu_node(2).dump();
    }

    void TearDown() override
    {
        if (s_nodes != nullptr) {
            s_nodes->kill_processes();
        }
    }

    /// The rsh agent: node n runs with its hostname, the shared topology, the fake NVML fixture
    /// and `setup[n]`.
    std::string write_agent(const std::vector<std::string>& setup) const
    {
        std::string script = "#!/bin/sh\nhost=$1; shift\ncase \"$host\" in\n";
        for (unsigned n = 0; n < 4; ++n) {
            script +=
                s_nodes->addresses()[n] + ") ns='" + s_nodes->namespaces()[n] + "'; setup='" + setup[n] + "' ;;\n";
        }
        script += "*) echo \"agent: unknown host $host\" >&2; exit 1 ;;\nesac\n"
                  "exec ip netns exec \"$ns\" unshare --uts sh -c \"hostname $ns; export HWLOC_XMLFILE='" +
            m_xml.string() + "' HWLOC_THISSYSTEM=1 FAKE_NVML_FIXTURE='" + (m_dir / "two.json").string() +
            "' FAKE_CUDA_DEVICE_COUNT=2; $setup $*\"\n";
        const auto path = m_dir / "agent.sh";
        std::ofstream(path) << script;
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
        return path.string();
    }

    test_support::Finished fleet(std::vector<std::string> args, const std::vector<std::string>& setup)
    {
        const std::string agent = write_agent(setup);
        args.insert(args.begin(), {"fleet", "--launcher", "openmpi"});
        const std::string path = std::filesystem::path(GPURUN_PATH).parent_path().string() + ":" + std::getenv("PATH");
        const std::string subnet = s_nodes->subnet_cidr();
        return test_support::run_with(GPUDOCTOR_PATH, std::move(args),
            {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                {"OMPI_MCA_plm_rsh_agent", agent}, {"OMPI_MCA_oob_tcp_if_include", subnet},
                {"OMPI_MCA_btl_tcp_if_include", subnet}, {"HWLOC_XMLFILE", m_xml.string()}, {"HWLOC_THISSYSTEM", "1"},
                {"PATH", path}, {"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"GPUKIT_CUDA_LIBRARY", FAKE_CUDA_PATH},
                {"GPUKIT_NCCL_LIBRARY", FAKE_NCCL_PATH}, {"NO_COLOR", "1"},
                {"CUDA_VISIBLE_DEVICES", test_support::unset_var}},
            {}, std::chrono::seconds(90));
    }

    std::string hosts() const
    {
        std::string out;
        for (const auto& a : s_nodes->addresses()) {
            out += (out.empty() ? "" : ",") + a;
        }
        return out;
    }

    TempDir m_dir;
    std::filesystem::path m_xml;
};

} // namespace

TEST_F(FleetFourNodes, ASlowNodeIsToldFromItsPartnerInTheSecondRound)
{
    // Node 3's NCCL ranks run at 20 GB/s whatever their number in the communicator; the others' at 100.
    const std::string fast = "export FAKE_NCCL_ALGBW_GBPS=100;";
    const std::string slow = "export FAKE_NCCL_ALGBW_GBPS=20;";
    const auto r = fleet({"-H", hosts(), "--deep", "--only", "gpus", "--json"}, {fast, fast, slow, fast});
    ASSERT_LE(r.exit_code, 1) << r.err << r.out;
    const json j = json::parse(r.out);
    ASSERT_TRUE(j["pairs"].is_object()) << r.err;
    const json& pairs = j["pairs"];
    const auto& a = s_nodes->addresses();
    ASSERT_EQ(pairs["rounds"].size(), 2U) << pairs.dump();
    EXPECT_EQ(pairs["rounds"][0]["pairs"], json::array({json::array({a[0], a[1]}), json::array({a[2], a[3]})}));
    EXPECT_NEAR(pairs["rounds"][0]["gbps"][0].get<double>(), 150, 0.5) << "100 GB/s algbw over 4 ranks";
    EXPECT_NEAR(pairs["rounds"][0]["gbps"][1].get<double>(), 30, 0.5);
    EXPECT_EQ(pairs["rounds"][1]["pairs"], json::array({json::array({a[2], a[0]}), json::array({a[3], a[1]})}));
    EXPECT_EQ(pairs["slow_nodes"], json::array({a[2]}));
    EXPECT_TRUE(pairs["slow_links"].empty());
    EXPECT_TRUE(pairs["unresolved"].empty());
    EXPECT_EQ(j["nodes"][2]["exit_code"], 0) << "a warning: fit unless --strict";
    const auto strict = fleet(
        {"-H", hosts(), "--deep", "--only", "gpus", "--strict", "--healthy-hostfile", (m_dir / "healthy").string()},
        {fast, fast, slow, fast});
    EXPECT_EQ(strict.exit_code, 1) << strict.err;
    EXPECT_NE(strict.out.find("fleet.slow_node " + a[2] + ": slow beside good nodes"), std::string::npos) << strict.out;
    EXPECT_EQ(
        test_support::file_text(m_dir / "healthy"), a[0] + " slots=2\n" + a[1] + " slots=2\n" + a[3] + " slots=2\n");
}
