#include "base/topology.hpp"
#include "doctor/probes/topo_matrix.hpp"
#include "tests/support/doctor_support.hpp"
#include "tests/support/fake_nvml_fixture.hpp"
#include "tests/support/layouts.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/topology_xml.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

using doctor::engine::Severity;
using test_support::T;

namespace {

// Topology facts of an XML topology, collected the way gpudoctor does.
nlohmann::json topology_facts(const test_support::TopologyXml& t, const test_support::TempDir& dir)
{
    doctor::engine::CollectContext ctx;
    ctx.topology_file = t.write(dir / "topo.xml").string();
    return test_support::collector_named("topology").collect(ctx);
}

std::string link_of(const nlohmann::json& topology, const std::string& a, const std::string& b)
{
    for (const auto& l : topology["links"]) {
        if ((l["a"] == a && l["b"] == b) || (l["a"] == b && l["b"] == a)) {
            return l["link"];
        }
    }
    return "missing";
}

const nlohmann::json no_nvml = {{"driver_file", nullptr}, {"nvml_loaded", false}, {"nvml_error", "no library"}};

// One package with two host bridges (one at the NUMA node, one at the package), a PCIe switch
// holding two GPUs, a GPU beside them, a GPU on the second host bridge; a second package with one
// GPU.
test_support::TopologyXml mixed_node()
{
    T t("mixed");
    t.package();
    t.package();
    unsigned n0 = t.numa(0, 0, 4);
    t.numa(1, 1, 4);
    unsigned sw = t.pci_switch(T::at_numa(n0));
    t.gpu(T::at_switch(sw), "0000:1a:00.0");
    t.gpu(T::at_switch(sw), "0000:1b:00.0");
    t.gpu(T::at_numa(n0), "0000:20:00.0");
    t.gpu(T::at_package(0), "0000:30:00.0");
    t.gpu(T::at_package(1), "0000:90:00.0");
    t.hca(T::at_switch(sw), "0000:1c:00.0", "mlx5_0");
    return t;
}

} // namespace

TEST(TopologyCollector, ClassifiesGpuPairsFromThePciTree)
{
    test_support::TempDir dir;
    auto facts = topology_facts(mixed_node(), dir);
    ASSERT_EQ(facts["gpus"].size(), 5U);
    EXPECT_EQ(link_of(facts, "0000:1a:00.0", "0000:1b:00.0"), "PIX") << "one switch";
    EXPECT_EQ(link_of(facts, "0000:1a:00.0", "0000:20:00.0"), "PHB") << "same host bridge";
    EXPECT_EQ(link_of(facts, "0000:20:00.0", "0000:30:00.0"), "NODE") << "two host bridges, one NUMA node";
    EXPECT_EQ(link_of(facts, "0000:1a:00.0", "0000:90:00.0"), "SYS") << "across packages";
    EXPECT_EQ(facts["gpus"][0]["pci_path"][0], "0000:f0:1f.0");
    EXPECT_EQ(facts["gpus"][0]["pci_path"][1], "HostBridge");
    EXPECT_EQ(facts["gpus"][0]["hca"], "mlx5_0");
    EXPECT_EQ(facts["gpus"][4]["numa"], nlohmann::json::array({1}));
}

TEST(TopologyCollector, PciLinkFromLayoutSeparatesNumaNodesOfOnePackage)
{
    // NPS4: GPUs in switches on NUMA 3 and 1 of package 0, and on NUMA 7 of package 1.
    test_support::TempDir dir;
    auto layout = test_support::load_layout(test_support::nps4_four_gpus(), dir);
    auto gpu = [&](const char* bus) { return *layout.find_pci(*base::PciAddress::parse(bus)); };
    EXPECT_EQ(base::pci_link(layout, gpu("0000:03:00.0"), gpu("0000:44:00.0")), base::PciLink::sys);
    EXPECT_EQ(base::pci_link(layout, gpu("0000:03:00.0"), gpu("0000:84:00.0")), base::PciLink::sys);
    EXPECT_EQ(base::pci_link(layout, gpu("0000:03:00.0"), gpu("0000:03:00.0")), base::PciLink::self);
    base::PciFunction bare;
    EXPECT_EQ(base::pci_link(layout, gpu("0000:03:00.0"), bare), base::PciLink::unknown);
}

TEST(TopologyProbe, WarnsAboutPairsAcrossSocketsWithoutNvlink)
{
    test_support::TempDir dir;
    nlohmann::json facts = {
        {"nvml", no_nvml}, {"topology", topology_facts(test_support::two_sockets_four_gpus_each(), dir)}};
    auto findings = test_support::judge_one("topology", facts);
    const auto* across = test_support::find_code(findings, "topology.gpu_pairs_across_sockets");
    ASSERT_NE(across, nullptr);
    EXPECT_EQ(across->severity, Severity::warn);
    EXPECT_NE(across->message.find("16 of 28 GPU pairs"), std::string::npos) << across->message;
    EXPECT_FALSE(across->remedy.empty());
    EXPECT_EQ(test_support::find_code(findings, "topology.ok"), nullptr);
}

TEST(TopologyProbe, PassesWithASummaryWhenEverythingIsLocal)
{
    test_support::TempDir dir;
    T t("one");
    t.package();
    unsigned n = t.numa(0, 0, 4);
    unsigned sw = t.pci_switch(T::at_numa(n));
    t.gpu(T::at_switch(sw), "0000:1a:00.0");
    t.gpu(T::at_switch(sw), "0000:1b:00.0");
    nlohmann::json facts = {{"nvml", no_nvml}, {"topology", topology_facts(t, dir)}};
    auto findings = test_support::judge_one("topology", facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].code, "topology.ok");
    EXPECT_EQ(findings[0].severity, Severity::pass);
    EXPECT_NE(findings[0].message.find("1×PIX"), std::string::npos) << findings[0].message;
    EXPECT_NE(findings[0].message.find("NUMA 0: gpu 0 1"), std::string::npos) << findings[0].message;
}

TEST(TopologyProbe, NvlinkedPairsAcrossSocketsAreFineAndUnknownLocalityWarns)
{
    nlohmann::json nvml = {{"driver_file", "NVRM version: 550.54.15"}, {"nvml_loaded", true},
        {"gpus",
            {{{"index", 0}, {"bus_id", "0000:1a:00.0"}, {"name", "H100"},
                 {"nvlinks", {"0000:9a:00.0", "0000:9a:00.0"}}},
                {{"index", 1}, {"bus_id", "0000:9a:00.0"}, {"name", "H100"},
                    {"nvlinks", {"0000:1a:00.0", "0000:1a:00.0"}}},
                {{"index", 2}, {"bus_id", "0000:9b:00.0"}, {"name", "H100"}, {"nvlinks", nlohmann::json::array()}}}},
        {"pairs",
            {{{"a", 0}, {"b", 1}, {"ancestor", 50}}, {{"a", 0}, {"b", 2}, {"ancestor", 50}},
                {{"a", 1}, {"b", 2}, {"ancestor", 10}}}}};
    nlohmann::json topology = {{"source", "live"},
        {"gpus",
            {{{"index", 0}, {"bus_id", "0000:1a:00.0"}, {"cpus", "0-3"}, {"numa", {0}}},
                {{"index", 1}, {"bus_id", "0000:9a:00.0"}, {"cpus", "4-7"}, {"numa", {1}}, {"hca", "mlx5_1"}},
                {{"index", 2}, {"bus_id", "0000:9b:00.0"}, {"cpus", ""}, {"numa", nlohmann::json::array()}}}}};
    const nlohmann::json facts = {{"nvml", nvml}, {"topology", topology}};
    const auto m = doctor::probes::topo_matrix(test_support::facts_of(facts));
    ASSERT_EQ(m.source, "nvml");
    EXPECT_EQ(m.link[0][1], "NV2");
    EXPECT_EQ(m.link[1][0], "NV2");
    EXPECT_EQ(m.link[0][2], "SYS");
    EXPECT_EQ(m.link[2][1], "PIX");
    EXPECT_EQ(m.gpus[1].nic, "mlx5_1");
    auto findings = test_support::judge_one("topology", facts);
    const auto* across = test_support::find_code(findings, "topology.gpu_pairs_across_sockets");
    ASSERT_NE(across, nullptr);
    EXPECT_NE(across->message.find("1 of 3 GPU pairs are SYS"), std::string::npos) << across->message;
    EXPECT_NE(across->message.find(": 0-2"), std::string::npos) << across->message;
    const auto* numa = test_support::find_code(findings, "topology.gpu_numa_unknown");
    ASSERT_NE(numa, nullptr);
    EXPECT_EQ(numa->subject, "gpu 2 (0000:9b:00.0)");
}

TEST(TopologyProbe, NvswitchLinksCountForEveryPair)
{
    nlohmann::json gpus = nlohmann::json::array();
    for (int i = 0; i < 4; ++i) {
        gpus.push_back({{"index", i}, {"bus_id", fmt::format("0000:{:02x}:00.0", 0x10 + i)},
            {"nvlinks", nlohmann::json::array({"0000:c1:00.0", "0000:c2:00.0", "0000:c3:00.0"})}});
    }
    nlohmann::json facts = {{"nvml", {{"driver_file", "x"}, {"nvml_loaded", true}, {"gpus", gpus}}},
        {"topology", {{"source", "live"}, {"gpus", nlohmann::json::array()}}}};
    const auto m = doctor::probes::topo_matrix(test_support::facts_of(facts));
    EXPECT_EQ(m.link[0][3], "NV3");
    EXPECT_EQ(m.link[2][1], "NV3");
    EXPECT_EQ(m.nvlinks(0, 3), 3U);
}

TEST(TopologyProbe, SkipsWithoutGpus)
{
    T t("cpu");
    t.package();
    t.numa(0, 0, 2);
    test_support::TempDir dir;
    nlohmann::json facts = {{"nvml", no_nvml}, {"topology", topology_facts(t, dir)}};
    auto findings = test_support::judge_one("topology", facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].severity, Severity::skip);
    EXPECT_NE(findings[0].message.find("no NVIDIA driver"), std::string::npos) << findings[0].message;
}

TEST(TopologyProbe, TopologyFileIsNeverMixedWithThisMachinesNvml)
{
    test_support::TempDir dir;
    nlohmann::json nvml = {{"driver_file", "x"}, {"nvml_loaded", true},
        {"gpus", {{{"index", 0}, {"bus_id", "0000:07:00.0"}}}}, {"pairs", nlohmann::json::array()}};
    nlohmann::json facts = {{"nvml", nvml}, {"topology", topology_facts(mixed_node(), dir)}};
    const auto m = doctor::probes::topo_matrix(test_support::facts_of(facts));
    EXPECT_EQ(m.source, "hwloc");
    EXPECT_EQ(m.gpus.size(), 5U);
}

TEST(TopologyCollector, NvmlCollectorFeedsTheMatrixFromTheFakeLibrary)
{
    test_support::TempDir dir;
    test_support::FakeNvmlFixture fixture(dir, R"({
      "gpus": [
        {"bus_id": "00000000:07:00.0", "name": "A100", "uuid": "GPU-a", "nvlinks": ["00000000:0F:00.0"]},
        {"bus_id": "00000000:0F:00.0", "name": "A100", "uuid": "GPU-b", "nvlinks": ["00000000:07:00.0"]},
        {"bus_id": "00000000:87:00.0", "name": "A100", "uuid": "GPU-c", "nvlinks": []}
      ],
      "ancestor": {"0-1": 20, "0-2": 50, "1-2": 50}
    })");
    doctor::engine::CollectContext ctx;
    ctx.sysroot = dir.path().string();
    ctx.env["GPUKIT_NVML_LIBRARY"] = FAKE_NVML_PATH;
    nlohmann::json facts = {{"nvml", test_support::collector_named("nvml").collect(ctx)},
        {"topology", {{"source", "live"}, {"gpus", nlohmann::json::array()}}}};
    const auto m = doctor::probes::topo_matrix(test_support::facts_of(facts));
    ASSERT_EQ(m.gpus.size(), 3U);
    EXPECT_EQ(m.link[0][1], "NV1");
    EXPECT_EQ(m.link[0][2], "SYS");
    EXPECT_EQ(m.link[1][2], "SYS");
    auto findings = test_support::judge_one("topology", facts);
    const auto* across = test_support::find_code(findings, "topology.gpu_pairs_across_sockets");
    ASSERT_NE(across, nullptr);
    EXPECT_NE(across->message.find("0-2, 1-2"), std::string::npos) << across->message;
}
