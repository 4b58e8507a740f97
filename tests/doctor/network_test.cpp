#include "tests/support/doctor_support.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/topology_xml.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using doctor::engine::Severity;
using test_support::codes_with;
using test_support::find_code;
using test_support::judge_one;

namespace {

class NetworkCollector : public ::testing::Test {
protected:
    void write(const std::string& path, const std::string& text)
    {
        auto file = m_root / path;
        std::filesystem::create_directories(file.parent_path());
        std::ofstream(file) << text;
    }
    void port(const std::string& dev, int n, const std::string& state, const std::string& phys, const std::string& rate,
        const std::string& layer = "InfiniBand")
    {
        const std::string base = "sys/class/infiniband/" + dev + "/ports/" + std::to_string(n) + "/";
        write(base + "state", state + "\n");
        write(base + "phys_state", phys + "\n");
        write(base + "rate", rate + "\n");
        write(base + "link_layer", layer + "\n");
    }
    nlohmann::json collect()
    {
        doctor::engine::CollectContext ctx;
        ctx.sysroot = m_root.path().string();
        return test_support::collector_named("network").collect(ctx);
    }
    test_support::TempDir m_root;
};

nlohmann::json port_facts(
    int n, const char* state, const char* phys, nlohmann::json rate, const char* layer = "InfiniBand")
{
    return {{"port", n}, {"state", state}, {"phys_state", phys}, {"rate", rate}, {"link_layer", layer}};
}

nlohmann::json up(int n = 1, const char* rate = "200 Gb/sec (4X HDR)")
{
    return port_facts(n, "4: ACTIVE", "5: LinkUp", rate);
}

nlohmann::json down(int n = 1)
{
    return port_facts(n, "1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)");
}

// Lists are vectors, not json: `{up()}` as a json is an array under g++ but a copy of the one
// element under clang.
nlohmann::json device(const std::string& name, const std::vector<nlohmann::json>& ports)
{
    return {{"name", name}, {"ports", ports}, {"netdevs", nlohmann::json::array()}};
}

const nlohmann::json peermem_loaded = {
    {"files", {{{"file", "/sys/module/nvidia_peermem/version"}, {"version", "1.0"}}}}, {"modules", {"nvidia_peermem"}}};
const nlohmann::json no_peermem = {{"files", nlohmann::json::array()}, {"modules", nlohmann::json::array()}};

// An HCA of the topology facts on these NUMA nodes.
nlohmann::json hca(const std::string& name, const std::string& bus_id, std::vector<unsigned> numa = {})
{
    return {{"name", name}, {"bus_id", bus_id}, {"numa", numa}};
}

// The topology facts of this machine with these GPUs and HCAs.
nlohmann::json topology(const nlohmann::json& gpus, const std::vector<nlohmann::json>& hcas)
{
    return {{"source", "live"}, {"gpus", gpus}, {"hcas", hcas}};
}

// Two GPUs, each with an HCA on its side.
const nlohmann::json two_gpu_topology =
    topology({{{"index", 0}, {"bus_id", "0000:17:00.0"}, {"numa", nlohmann::json::array({0})}, {"hca", "mlx5_0"}},
                 {{"index", 1}, {"bus_id", "0000:b1:00.0"}, {"numa", nlohmann::json::array({1})}, {"hca", "mlx5_1"}}},
        {hca("mlx5_0", "0000:18:00.0", {0}), hca("mlx5_1", "0000:b2:00.0", {1})});

nlohmann::json facts(const std::vector<nlohmann::json>& devices, nlohmann::json peermem = peermem_loaded,
    nlohmann::json topology = two_gpu_topology)
{
    return {{"network", {{"infiniband", devices}, {"peermem", peermem}}}, {"topology", topology}};
}

std::vector<std::string> problems(const std::vector<doctor::engine::Finding>& findings)
{
    auto out = codes_with(findings, Severity::warn);
    auto fails = codes_with(findings, Severity::fail);
    out.insert(out.end(), fails.begin(), fails.end());
    return out;
}

} // namespace

TEST_F(NetworkCollector, ReadsPortsNetdevsAndPeermem)
{
    port("mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)");
    port("mlx5_1", 1, "1: DOWN", "3: Disabled", "10 Gb/sec (4X SDR)", "Ethernet");
    port("mlx5_1", 2, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet");
    port("mlx5_1", 10, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet");
    std::filesystem::create_directories(m_root / "sys/class/infiniband/mlx5_1/device/net/ens1f0");
    write("sys/module/nvidia_peermem/version", "1.1\n");
    write("proc/modules",
        "nvidia_peermem 16384 0 - Live 0x0000000000000000\n"
        "ib_core 425984 9 nvidia_peermem,rdma_ucm, Live 0x0000000000000000\n");
    auto f = collect();
    ASSERT_EQ(f["infiniband"].size(), 2U);
    const auto& mlx0 = f["infiniband"][0];
    EXPECT_EQ(mlx0["name"], "mlx5_0");
    EXPECT_EQ(mlx0["ports"][0]["state"], "4: ACTIVE");
    EXPECT_EQ(mlx0["ports"][0]["rate"], "200 Gb/sec (4X HDR)");
    const auto& mlx1 = f["infiniband"][1];
    ASSERT_EQ(mlx1["ports"].size(), 3U);
    EXPECT_EQ(mlx1["ports"][1]["port"], 2);
    EXPECT_EQ(mlx1["ports"][2]["port"], 10) << "ports in numeric order";
    EXPECT_EQ(mlx1["ports"][0]["link_layer"], "Ethernet");
    EXPECT_EQ(mlx1["netdevs"], nlohmann::json({"ens1f0"}));
    EXPECT_EQ(f["peermem"]["files"][0]["version"], "1.1");
    EXPECT_EQ(f["peermem"]["modules"], nlohmann::json({"nvidia_peermem"}));
    EXPECT_FALSE(f.contains("error"));
}

TEST_F(NetworkCollector, MissingFilesAreLeftOut)
{
    write("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
    std::filesystem::create_directories(m_root / "sys/class/infiniband/mlx5_0/ports/lid_junk");
    auto f = collect();
    ASSERT_EQ(f["infiniband"][0]["ports"].size(), 1U) << "only numeric port directories";
    EXPECT_EQ(f["infiniband"][0]["ports"][0], nlohmann::json({{"port", 1}, {"state", "4: ACTIVE"}}));
    EXPECT_TRUE(f["peermem"]["modules"].is_null()) << "no /proc/modules";
    auto findings = judge_one("network", {{"network", f}, {"topology", two_gpu_topology}});
    EXPECT_NE(find_code(findings, "network.port_down"), nullptr) << "no phys_state is not LinkUp";
}

TEST_F(NetworkCollector, NoInfinibandMeansNoDevices)
{
    auto f = collect();
    EXPECT_TRUE(f["infiniband"].empty());
    auto findings = judge_one("network", {{"network", f}, {"topology", topology(nlohmann::json::array(), {})}});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "network.no_rdma");
    EXPECT_EQ(findings[0].severity, Severity::pass);
}

TEST_F(NetworkCollector, NearestNicFromTheTopologyCollector)
{
    // Two sockets; GPU 0 and mlx5_0 on the first, GPU 1 alone on the second.
    using T = test_support::TopologyXml;
    T t("ibnode");
    t.package();
    t.package();
    t.numa(0, 0, 4);
    t.numa(1, 1, 4);
    t.gpu(T::at_numa(0), "0000:17:00.0");
    t.hca(T::at_numa(0), "0000:18:00.0", "mlx5_0");
    t.gpu(T::at_numa(1), "0000:b1:00.0");
    doctor::engine::CollectContext ctx;
    ctx.sysroot = m_root.path().string();
    ctx.topology_file = t.write(m_root / "topo.xml").string();
    port("mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)");
    write("sys/kernel/mm/memory_peers/nv_mem/version", "1.0\n");
    nlohmann::json all = {{"network", test_support::collector_named("network").collect(ctx)},
        {"topology", test_support::collector_named("topology").collect(ctx)}};
    auto findings = judge_one("network", all);
    EXPECT_EQ(problems(findings), (std::vector<std::string>{"network.gpu_no_near_nic"}));
    const auto* f = find_code(findings, "network.gpu_no_near_nic");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->subject.find("0000:b1:00.0"), std::string::npos) << f->subject;
    const auto* nic = find_code(findings, "network.gpu_nic");
    ASSERT_NE(nic, nullptr);
    EXPECT_NE(nic->message.find("-> mlx5_0"), std::string::npos) << nic->message;
    EXPECT_NE(find_code(findings, "network.gdr_ok"), nullptr);
    EXPECT_NE(find_code(findings, "network.port_ok"), nullptr);
}

TEST(NetworkRule, HealthyNode)
{
    auto findings = judge_one("network", facts({device("mlx5_0", {up()}), device("mlx5_1", {up()})}));
    EXPECT_TRUE(problems(findings).empty());
    EXPECT_EQ(codes_with(findings, Severity::pass),
        (std::vector<std::string>{"network.port_ok", "network.port_ok", "network.gdr_ok", "network.gpu_nic"}));
    EXPECT_EQ(findings[0].subject, "mlx5_0 port 1");
    EXPECT_NE(findings[0].message.find("200 Gb/sec"), std::string::npos);
    EXPECT_NE(findings[3].message.find("gpu 1 -> mlx5_1"), std::string::npos) << findings[3].message;
}

TEST(NetworkRule, OnePortDownWarnsWhileAnotherIsUp)
{
    auto findings = judge_one("network", facts({device("mlx5_0", {up()}), device("mlx5_1", {down()})}));
    const auto* f = find_code(findings, "network.port_down");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_EQ(f->subject, "mlx5_1 port 1");
    EXPECT_NE(f->message.find("DOWN (phys_state Polling)"), std::string::npos) << f->message;
    EXPECT_FALSE(f->remedy.empty());
}

TEST(NetworkRule, EveryPortDownFails)
{
    auto findings = judge_one("network", facts({device("mlx5_0", {down()}), device("mlx5_1", {down()})}));
    EXPECT_EQ(
        codes_with(findings, Severity::fail), (std::vector<std::string>{"network.port_down", "network.port_down"}));
    EXPECT_NE(findings[0].message.find("TCP sockets"), std::string::npos);
}

TEST(NetworkRule, ActiveStateWithoutLinkUpIsDown)
{
    // INIT + LinkUp: cabled, no subnet manager.
    auto findings =
        judge_one("network", facts({device("mlx5_0", {port_facts(1, "2: INIT", "5: LinkUp", "200 Gb/sec (4X HDR)")})}));
    const auto* f = find_code(findings, "network.port_down");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::fail);
    EXPECT_NE(f->message.find("INIT"), std::string::npos);
}

TEST(NetworkRule, SlowPortWarnsAgainstThePolicy)
{
    auto findings = judge_one("network", facts({device("mlx5_0", {up(1, "56 Gb/sec (4X FDR)")})}));
    const auto* f = find_code(findings, "network.rate_low");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_NE(f->message.find("56 Gb/s (InfiniBand), below 100 Gb/s"), std::string::npos) << f->message;

    auto policy = doctor::engine::Policy::defaults();
    policy.ib_min_rate_gbps = 40;
    findings = judge_one("network", facts({device("mlx5_0", {up(1, "56 Gb/sec (4X FDR)")})}), policy);
    EXPECT_TRUE(problems(findings).empty());
    findings = judge_one("network", facts({device("mlx5_0", {up(1, "2.5 Gb/sec (1X SDR)")})}), policy);
    EXPECT_NE(find_code(findings, "network.rate_low"), nullptr);
}

TEST(NetworkRule, GarbageRateOrStateIsSkippedNotPassed)
{
    for (const nlohmann::json& rate :
        {nlohmann::json("fast"), nlohmann::json(nullptr), nlohmann::json(""), nlohmann::json("200")}) {
        auto findings =
            judge_one("network", facts({device("mlx5_0", {port_facts(1, "4: ACTIVE", "5: LinkUp", rate)})}));
        const auto* f = find_code(findings, "network.rate_unknown");
        ASSERT_NE(f, nullptr) << rate.dump();
        EXPECT_EQ(f->severity, Severity::skip);
        EXPECT_EQ(find_code(findings, "network.port_ok"), nullptr);
    }
    nlohmann::json no_state = up();
    no_state["state"] = nullptr;
    auto findings = judge_one("network", facts({device("mlx5_0", {no_state})}));
    EXPECT_EQ(codes_with(findings, Severity::skip), (std::vector<std::string>{"network.port_unknown"}));
    findings = judge_one("network", facts({device("mlx5_0", {})}));
    EXPECT_NE(find_code(findings, "network.port_unknown"), nullptr);
    // A rate that is no text is not as the collector writes it: bad input, not a skip.
    EXPECT_NE(test_support::error_of([] {
        test_support::facts_of(facts({device("mlx5_0", {port_facts(1, "4: ACTIVE", "5: LinkUp", 42)})}));
    }).find("(infiniband[0].ports[0].rate is 42, expected a string)"),
        std::string::npos);
}

TEST(NetworkRule, NoPeermemWarnsOnlyWithGpus)
{
    auto findings = judge_one("network", facts({device("mlx5_0", {up()})}, no_peermem));
    const auto* f = find_code(findings, "network.no_peermem");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warn);
    EXPECT_NE(f->message.find("about half the bandwidth"), std::string::npos);
    EXPECT_NE(f->remedy.find("modprobe nvidia_peermem"), std::string::npos);

    findings = judge_one("network",
        facts({device("mlx5_0", {up()})}, no_peermem,
            topology(nlohmann::json::array(), {hca("mlx5_0", "0000:18:00.0")})));
    EXPECT_TRUE(problems(findings).empty()) << "a CPU node needs no GPUDirect RDMA";

    nlohmann::json legacy = {{"files", nlohmann::json::array()}, {"modules", {"nv_peer_mem"}}};
    findings = judge_one("network", facts({device("mlx5_0", {up()})}, legacy));
    EXPECT_NE(find_code(findings, "network.gdr_ok"), nullptr);
}

TEST(NetworkRule, NoRdmaAtAllPasses)
{
    auto findings = judge_one("network", facts({}, no_peermem, topology(two_gpu_topology["gpus"], {})));
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "network.no_rdma");
    EXPECT_EQ(findings[0].severity, Severity::pass);
}

TEST(NetworkRule, GpuWithoutANearNic)
{
    nlohmann::json topo = two_gpu_topology;
    topo["gpus"][1].erase("hca");
    topo["hcas"] = nlohmann::json::array({hca("mlx5_0", "0000:18:00.0")});
    auto findings = judge_one("network", facts({device("mlx5_0", {up()})}, peermem_loaded, topo));
    EXPECT_EQ(problems(findings), (std::vector<std::string>{"network.gpu_no_near_nic"}));
    EXPECT_EQ(find_code(findings, "network.gpu_no_near_nic")->subject, "gpu 1 (0000:b1:00.0)");
}

TEST(NetworkRule, NearestNicAcrossTheSocketIsNotOnTheGpusSide)
{
    nlohmann::json topo = two_gpu_topology;
    topo["gpus"][1]["hca"] = "mlx5_0"; // hwloc's nearest in the PCI tree, even across sockets
    topo["hcas"] = nlohmann::json::array({hca("mlx5_0", "0000:18:00.0", {0})});
    auto findings = judge_one("network", facts({device("mlx5_0", {up()})}, peermem_loaded, topo));
    const auto* f = find_code(findings, "network.gpu_no_near_nic");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("the nearest, mlx5_0, is on NUMA node 0"), std::string::npos) << f->message;
    EXPECT_NE(find_code(findings, "network.gpu_nic")->message.find("gpu 0 -> mlx5_0"), std::string::npos);

    topo["hcas"][0]["numa"] = nlohmann::json::array(); // locality unknown: not a warning
    findings = judge_one("network", facts({device("mlx5_0", {up()})}, peermem_loaded, topo));
    EXPECT_TRUE(problems(findings).empty());
}

TEST(NetworkRule, HcasUnknownToTheTopologySkipTheNearestNic)
{
    nlohmann::json topo = two_gpu_topology;
    topo["hcas"] = nlohmann::json::array();
    auto findings = judge_one("network", facts({device("mlx5_0", {up()})}, peermem_loaded, topo));
    EXPECT_EQ(codes_with(findings, Severity::skip), (std::vector<std::string>{"network.gpu_nic_unknown"}));
}

TEST(NetworkRule, BrokenTopologyCollectorIsAnErrorNotAPass)
{
    auto findings = judge_one("network",
        {{"network", {{"infiniband", nlohmann::json::array()}, {"peermem", no_peermem}}},
            {"topology", {{"error", "timed out after 10 s"}}}});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].severity, Severity::error);
}

TEST(NetworkRule, EveryCodeEmittedIsDocumented)
{
    const auto& probe = test_support::probe_named("network");
    std::vector<std::string> documented;
    for (const auto& c : probe.codes) {
        documented.push_back(c.code);
    }
    nlohmann::json topo = two_gpu_topology;
    topo["gpus"][1].erase("hca");
    for (const auto& f_in :
        {facts({device("mlx5_0", {up(), down(2), up(3, "1 Gb/sec"), up(4, "?")}), device("x", nlohmann::json::array())},
             no_peermem, topo),
            facts({}), facts({device("mlx5_0", {up()})}, peermem_loaded, topology(topo["gpus"], {}))}) {
        for (const auto& f : judge_one("network", f_in)) {
            EXPECT_NE(std::find(documented.begin(), documented.end(), f.code), documented.end()) << f.code;
            if (f.severity == Severity::warn || f.severity == Severity::fail) {
                EXPECT_FALSE(f.remedy.empty()) << f.code;
            }
        }
    }
}
