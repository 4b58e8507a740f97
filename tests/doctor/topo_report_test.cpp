#include "doctor/probes/topo_matrix.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/topology_xml.hpp"

#include <fstream>
#include <gtest/gtest.h>

using T = test_support::TopologyXml;

namespace {

// Package 0: a switch with GPUs 1a and 1b and mlx5_0, GPU 20 on the same host bridge; package 1:
// GPU 90 (whose nearest, and only, NIC is mlx5_0 in package 0).
test_support::TopologyXml two_packages()
{
    T t("topo");
    t.package();
    t.package();
    unsigned n0 = t.numa(0, 0, 4);
    unsigned n1 = t.numa(1, 1, 4);
    unsigned sw = t.pci_switch(T::at_numa(n0));
    t.gpu(T::at_switch(sw), "0000:1a:00.0");
    t.gpu(T::at_switch(sw), "0000:1b:00.0");
    t.hca(T::at_switch(sw), "0000:1c:00.0", "mlx5_0");
    t.gpu(T::at_numa(n0), "0000:20:00.0");
    t.gpu(T::at_numa(n1), "0000:90:00.0");
    return t;
}

} // namespace

TEST(TopoReport, PrintsTheMatrixFromATopologyFileWithoutAskingNvml)
{
    test_support::TempDir dir;
    auto xml = two_packages().write(dir / "topo.xml");
    // A fake NVML that would crash if asked: --topology must never load it.
    std::ofstream(dir / "nvml.json") << R"({"crash_in": "nvmlInit_v2", "gpus": []})";
    auto r = test_support::run({GPUDOCTOR_PATH, "topo", "--topology", xml.string()},
        {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", (dir / "nvml.json").string()}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string expected_head = "        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity  NIC\n"
                                      "GPU0     X       PIX     PHB     SYS    0-3             0              mlx5_0\n"
                                      "GPU1     PIX     X       PHB     SYS    0-3             0              mlx5_0\n"
                                      "GPU2     PHB     PHB     X       SYS    0-3             0              mlx5_0\n"
                                      "GPU3     SYS     SYS     SYS     X      4-7             1              mlx5_0\n";
    EXPECT_EQ(r.out.substr(0, expected_head.size()), expected_head) << r.out;
    EXPECT_NE(r.out.find("  PIX  = Connection traversing at most a single PCIe bridge"), std::string::npos);
    EXPECT_NE(r.out.find("Source: hwloc PCI tree"), std::string::npos);
    EXPECT_NE(r.out.find("NVML is not asked"), std::string::npos) << r.out;
}

TEST(TopoReport, JsonHasTheMatrixAndLocalities)
{
    test_support::TempDir dir;
    auto xml = two_packages().write(dir / "topo.xml");
    auto r = test_support::run({GPUDOCTOR_PATH, "topo", "--json", "--topology", xml.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["source"], "hwloc");
    ASSERT_EQ(doc["gpus"].size(), 4U);
    EXPECT_EQ(doc["gpus"][3]["bus_id"], "0000:90:00.0");
    EXPECT_EQ(doc["gpus"][3]["numa"], nlohmann::json::array({1}));
    EXPECT_EQ(doc["gpus"][3]["nic"], "mlx5_0") << "the node's only NIC is the nearest, even across packages";
    EXPECT_EQ(doc["matrix"][0][1], "PIX");
    EXPECT_EQ(doc["matrix"][3][0], "SYS");
    EXPECT_EQ(doc["legend"]["NODE"],
        "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node");
}

TEST(TopoReport, UsesNvmlWhenItAnswers)
{
    test_support::TempDir dir;
    std::ofstream(dir / "nvml.json") << R"({
      "gpus": [
        {"bus_id": "00000000:07:00.0", "name": "A100", "nvlinks": ["00000000:0F:00.0", "00000000:0F:00.0"]},
        {"bus_id": "00000000:0F:00.0", "name": "A100", "nvlinks": ["00000000:07:00.0", "00000000:07:00.0"]},
        {"bus_id": "00000000:87:00.0", "name": "A100", "nvlinks": []}
      ],
      "ancestor": {"0-1": 30, "0-2": 50, "1-2": 40}
    })";
    auto r = test_support::run({GPUDOCTOR_PATH, "topo", "--json", "--sysroot", dir.path().string()},
        {{"GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH}, {"FAKE_NVML_FIXTURE", (dir / "nvml.json").string()}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["source"], "nvml");
    ASSERT_EQ(doc["matrix"].size(), 3U);
    EXPECT_EQ(doc["matrix"][0][1], "NV2");
    EXPECT_EQ(doc["matrix"][0][2], "SYS");
    EXPECT_EQ(doc["matrix"][2][1], "NODE");
    EXPECT_EQ(doc["gpus"][2]["bus_id"], "0000:87:00.0");
}

TEST(TopoReport, ABadTopologyFileIsAnInputError)
{
    test_support::TempDir dir;
    std::ofstream(dir / "bad.xml") << "not xml";
    auto r = test_support::run({GPUDOCTOR_PATH, "topo", "--topology", (dir / "bad.xml").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("cannot read topology"), std::string::npos) << r.err;
}

TEST(TopoReport, NvmlAncestorLevelsMapToTheLegend)
{
    EXPECT_EQ(doctor::probes::link_from_ancestor(0), "PIX");
    EXPECT_EQ(doctor::probes::link_from_ancestor(10), "PIX");
    EXPECT_EQ(doctor::probes::link_from_ancestor(20), "PXB");
    EXPECT_EQ(doctor::probes::link_from_ancestor(30), "PHB");
    EXPECT_EQ(doctor::probes::link_from_ancestor(40), "NODE");
    EXPECT_EQ(doctor::probes::link_from_ancestor(50), "SYS");
    EXPECT_EQ(doctor::probes::link_from_ancestor(7), "?");
}

TEST(TopoReport, NoGpuSaysWhy)
{
    doctor::probes::TopoMatrix m;
    m.notes.push_back("no NVIDIA driver");
    EXPECT_EQ(doctor::probes::render_topo_text(m), "No NVIDIA GPU found.\n  no NVIDIA driver\n");
}

TEST(TopoReport, NoGpuOnThisMachineWithoutNvmlCouldNotRun)
{
    // Exit statuses are one table for every subcommand: NVML needed and missing is 3, as for
    // monitor. A topology file without GPUs is an answer (0).
    auto r = test_support::run({GPUDOCTOR_PATH, "topo"}, {{"GPUKIT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
    if (r.out.rfind("No NVIDIA GPU found.", 0) != 0) {
        GTEST_SKIP() << "hwloc sees an NVIDIA GPU on this machine";
    }
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("gpudoctor topo: no GPU found, and NVML is unavailable: cannot load "
                         "/nonexistent/libnvidia-ml.so.1"),
        std::string::npos)
        << r.err;

    test_support::TempDir dir;
    test_support::TopologyXml cpu("cpunode");
    cpu.package();
    cpu.numa(0, 0, 4);
    cpu.write(dir / "cpu.xml");
    r = test_support::run({GPUDOCTOR_PATH, "topo", "--topology", (dir / "cpu.xml").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
}
