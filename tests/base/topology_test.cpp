#include "base/error.hpp"
#include "base/gpu_inventory.hpp"
#include "base/process.hpp"
#include "base/topology.hpp"
#include "tests/support/layouts.hpp"

#include <fstream>
#include <gtest/gtest.h>

using base::CpuSet;
using test_support::T;
using test_support::TempDir;

namespace {

std::vector<unsigned> gpu_numa(const base::NodeLayout& layout, const std::string& bus)
{
    const auto* fn = layout.find_pci(*base::PciAddress::parse(bus));
    EXPECT_NE(fn, nullptr) << bus;
    return fn != nullptr ? fn->locality.numa : std::vector<unsigned>{};
}

} // namespace

TEST(Topology, TwoSocketsFourGpusEach)
{
    TempDir dir;
    auto layout = test_support::load_layout(test_support::two_sockets_four_gpus_each(), dir);
    EXPECT_EQ(layout.hostname, "twosocket");
    EXPECT_EQ(layout.allowed.to_list(), "0-31");
    ASSERT_EQ(layout.cores.size(), 16U);
    EXPECT_EQ(layout.cores[0], (CpuSet{0, 16})) << "SMT siblings belong to one core";
    ASSERT_EQ(layout.packages.size(), 2U);
    EXPECT_EQ(layout.packages[1].cpus.to_list(), "8-15,24-31");

    auto gpus = base::gpus_from_topology(layout);
    ASSERT_EQ(gpus.size(), 8U);
    for (unsigned i = 0; i < 8; ++i) {
        EXPECT_EQ(gpus[i].physical_index, i);
        EXPECT_EQ(gpus[i].locality.numa, std::vector<unsigned>{i < 4 ? 0U : 1U}) << i;
        EXPECT_EQ(gpus[i].locality.source, "hwloc");
        EXPECT_EQ(gpus[i].hca, i < 4 ? "mlx5_0" : "mlx5_1");
        EXPECT_EQ(gpus[i].name, "GA100 [A100 SXM4 40GB]");
        EXPECT_EQ(gpus[i].selector, std::to_string(i)) << "no UUID: select by PCI-order index";
    }
    EXPECT_EQ(gpus[4].locality.cpus.to_list(), "8-15,24-31");
}

TEST(Topology, Nps4GpuZeroOnNumaThree)
{
    TempDir dir;
    auto layout = test_support::load_layout(test_support::nps4_four_gpus(), dir);
    EXPECT_EQ(layout.numa_nodes.size(), 8U);
    auto gpus = base::gpus_from_topology(layout);
    ASSERT_EQ(gpus.size(), 4U);
    EXPECT_EQ(gpus[0].bus_id.to_string(), "0000:03:00.0");
    EXPECT_EQ(gpus[0].locality.numa, std::vector<unsigned>{3});
    EXPECT_EQ(gpus[0].locality.cpus.to_list(), "12-15");
    EXPECT_EQ(gpus[1].locality.numa, std::vector<unsigned>{1});
    EXPECT_EQ(gpus[2].locality.numa, std::vector<unsigned>{7});
    EXPECT_EQ(gpus[3].locality.numa, std::vector<unsigned>{5});
    EXPECT_EQ(gpus[0].hca, "mlx5_0") << "the HCA in the same PCIe switch";
    EXPECT_EQ(gpus[1].hca, "mlx5_1");
    EXPECT_EQ(gpus[3].hca, "mlx5_3");
}

TEST(Topology, NumaOsIndexesZeroAndEight)
{
    T t("lassen");
    t.package();
    t.package();
    t.numa(0, 0, 4, 4);
    t.numa(1, 8, 4, 4);
    t.gpu(T::at_package(0), "0004:04:00.0");
    t.gpu(T::at_package(1), "0035:03:00.0");
    TempDir dir;
    auto layout = test_support::load_layout(t, dir);
    EXPECT_EQ(gpu_numa(layout, "0004:04:00.0"), std::vector<unsigned>{0});
    EXPECT_EQ(gpu_numa(layout, "0035:03:00.0"), std::vector<unsigned>{8});
    ASSERT_EQ(layout.numa_nodes.size(), 2U);
    EXPECT_EQ(layout.numa_nodes[1].os_index, 8U);
}

TEST(Topology, GpuUnderAPackageWhoseCpusAreAllDisallowed)
{
    T t("cgroup");
    t.package();
    t.package();
    t.numa(0, 0, 4);
    t.numa(1, 1, 4);
    t.gpu(T::at_package(1), "0000:81:00.0");
    t.allow_only({0, 1, 2, 3});
    TempDir dir;
    auto layout = test_support::load_layout(t, dir);
    EXPECT_EQ(layout.allowed.to_list(), "0-3");
    const auto* gpu = layout.find_pci(*base::PciAddress::parse("0000:81:00.0"));
    ASSERT_NE(gpu, nullptr);
    EXPECT_EQ(gpu->locality.cpus.to_list(), "0-3") << "walk up to an ancestor with allowed CPUs";
    EXPECT_EQ(gpu->locality.numa, std::vector<unsigned>{0});
}

TEST(Topology, GpuMemoryNumaNodesAreNotCpuNodes)
{
    T t("power9");
    t.package();
    t.numa(0, 0, 4, 4);
    t.gpu_memory_numa(0, 253);
    t.gpu_memory_numa(0, 254);
    t.gpu(T::at_package(0), "0004:04:00.0");
    TempDir dir;
    auto layout = test_support::load_layout(t, dir);
    ASSERT_EQ(layout.numa_nodes.size(), 3U);
    EXPECT_TRUE(layout.numa_nodes[1].gpu_memory);
    EXPECT_FALSE(layout.numa_nodes[1].has_cpus());
    EXPECT_EQ(layout.cpu_numa_nodes().size(), 1U);
    EXPECT_EQ(gpu_numa(layout, "0004:04:00.0"), std::vector<unsigned>{0});
}

TEST(Topology, CpuOnlyNodeHasNoGpus)
{
    T t("cpuonly");
    t.package();
    t.numa(0, 0, 4);
    t.hca(T::at_package(0), "0000:01:00.0", "hfi1_0");
    TempDir dir;
    auto layout = test_support::load_layout(t, dir);
    EXPECT_TRUE(base::gpus_from_topology(layout).empty());
    ASSERT_EQ(layout.hcas.size(), 1U);
    EXPECT_EQ(layout.nearest_hca(CpuSet{0}), "hfi1_0");
}

TEST(Topology, NvswitchAudioAndBmcVgaAreNotGpus)
{
    T t("filters");
    t.package();
    t.numa(0, 0, 2);
    t.gpu(T::at_package(0), "0000:07:00.0");
    t.pci(T::at_package(0), "0000:c4:00.0", 0x10de, 0x1af1, 0x0680);
    t.pci(T::at_package(0), "0000:07:00.1", 0x10de, 0x1aef, 0x0403);
    t.pci(T::at_package(0), "0000:e2:00.0", 0x1a03, 0x2000, 0x0300);
    t.pci(T::at_package(0), "0000:08:00.0", 0x10de, 0x1eb8, 0x0300);
    TempDir dir;
    auto gpus = base::gpus_from_topology(test_support::load_layout(t, dir));
    ASSERT_EQ(gpus.size(), 2U);
    EXPECT_EQ(gpus[0].bus_id.to_string(), "0000:07:00.0");
    EXPECT_EQ(gpus[1].bus_id.to_string(), "0000:08:00.0") << "an NVIDIA VGA-class board is a GPU";
}

TEST(Topology, UuidAndModelFromAnNvmlOsDevice)
{
    T t("nvmlxml");
    t.package();
    t.numa(0, 0, 2);
    t.gpu(T::at_package(0), "0000:07:00.0", "GPU-12345678-aaaa-bbbb-cccc-0123456789ab");
    TempDir dir;
    auto gpus = base::gpus_from_topology(test_support::load_layout(t, dir));
    ASSERT_EQ(gpus.size(), 1U);
    EXPECT_EQ(gpus[0].uuid, "GPU-12345678-aaaa-bbbb-cccc-0123456789ab");
    EXPECT_EQ(gpus[0].name, "NVIDIA A100-SXM4-40GB");
    EXPECT_EQ(gpus[0].selector, gpus[0].uuid);
}

TEST(Topology, BadFilesAreErrorsNotCrashes)
{
    TempDir dir;
    auto expect_error = [](const std::string& path, const std::string& part) {
        try {
            base::Topology::load_xml(path);
            ADD_FAILURE() << "loaded " << path;
        } catch (const base::Error& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    expect_error((dir / "missing.xml").string(), "missing.xml");
    std::ofstream(dir / "junk.xml") << "this is not xml\n";
    expect_error((dir / "junk.xml").string(), "junk.xml");
    // hwloc 2.9 itself segfaults on objects without complete_cpuset.
    std::ofstream(dir / "crash.xml") << R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x3" complete_cpuset="0x3" allowed_cpuset="0x3" nodeset="0x1" complete_nodeset="0x1" allowed_nodeset="0x1">
    <object type="Package" os_index="0" cpuset="0x3" nodeset="0x1">
      <object type="NUMANode" os_index="0" cpuset="0x3" nodeset="0x1" local_memory="1000"/>
      <object type="PU" os_index="0" cpuset="0x1"/>
    </object>
  </object>
</topology>
)";
    expect_error((dir / "crash.xml").string(), "crash.xml");
}

TEST(Topology, LiveMachineLoadsAndBindsForReal)
{
    auto topology = base::Topology::load_live(false);
    EXPECT_TRUE(topology.is_this_system());
    auto layout = topology.layout();
    EXPECT_FALSE(layout.allowed.empty());
    EXPECT_FALSE(layout.cores.empty());
    EXPECT_FALSE(layout.hostname.empty());
    EXPECT_FALSE(base::cpu_binding().empty());
}

TEST(Topology, ShippedDemoTopologyIsTheWritersOutputAndPlansEightGpus)
{
    TempDir dir;
    auto fresh = dir / "demo.xml";
    auto r = base::run_command({WRITE_DEMO_TOPOLOGY, fresh.string()}, std::chrono::seconds(30));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto shipped = std::filesystem::path(GPUKIT_SOURCE_DIR) / "share/gpukit/topologies/dgx-a100-like.xml";
    auto slurp = [](const std::filesystem::path& p) {
        std::ifstream in(p);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    EXPECT_EQ(slurp(fresh), slurp(shipped)) << "regenerate with build/tests/write_demo_topology " << shipped;

    auto layout = base::Topology::load_xml(shipped.string()).layout();
    auto gpus = base::gpus_from_topology(layout);
    ASSERT_EQ(gpus.size(), 8U) << "NVSwitches and the BMC VGA are not GPUs";
    EXPECT_EQ(gpus[0].locality.numa, std::vector<unsigned>{3});
    EXPECT_EQ(gpus[7].locality.numa, std::vector<unsigned>{5});
    EXPECT_EQ(gpus[5].hca, "mlx5_5");
    EXPECT_EQ(layout.numa_nodes.size(), 8U);
    EXPECT_EQ(layout.cores.size(), 128U);
}
