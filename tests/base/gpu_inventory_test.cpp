#include "base/error.hpp"
#include "base/gpu_inventory.hpp"
#include "base/nvml.hpp"
#include "tests/support/fake_nvml_fixture.hpp"
#include "tests/support/layouts.hpp"

#include <fstream>
#include <gtest/gtest.h>

using base::Gpu;
using test_support::T;
using test_support::TempDir;

namespace {

std::vector<Gpu> four_gpus()
{
    std::vector<Gpu> all(4);
    const char* uuids[] = {"GPU-aaaa1111", "GPU-aaaa2222", "GPU-bbbb3333", "GPU-cccc4444"};
    for (unsigned i = 0; i < 4; ++i) {
        all[i].physical_index = i;
        all[i].bus_id = base::PciAddress{0, static_cast<std::uint8_t>(0x10 * (i + 1)), 0, 0};
        all[i].uuid = uuids[i];
        all[i].selector = uuids[i];
    }
    all[3].mig_uuids = {"MIG-dddd0001", "MIG-dddd0002"};
    return all;
}

std::string select_error(const std::vector<Gpu>& all, const std::string& cvd)
{
    try {
        base::select_visible(all, cvd);
    } catch (const base::Error& e) {
        return e.what();
    }
    return "";
}

void write_file(const std::filesystem::path& path, const std::string& text)
{
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
}

} // namespace

TEST(SelectVisible, IndexesPickAndOrderThePool)
{
    auto pool = base::select_visible(four_gpus(), "2,0");
    ASSERT_EQ(pool.size(), 2U);
    EXPECT_EQ(pool[0].physical_index, 2U);
    EXPECT_EQ(pool[1].physical_index, 0U);
    EXPECT_EQ(pool[0].selector, "2") << "the incoming entry selects the GPU in isolate mode";
}

TEST(SelectVisible, UuidsAndUniquePrefixes)
{
    auto pool = base::select_visible(four_gpus(), "GPU-cccc4444, GPU-bbbb");
    ASSERT_EQ(pool.size(), 2U);
    EXPECT_EQ(pool[0].physical_index, 3U);
    EXPECT_EQ(pool[1].physical_index, 2U);
    EXPECT_EQ(pool[1].selector, "GPU-bbbb");
    EXPECT_NE(select_error(four_gpus(), "GPU-aaaa").find("more than one"), std::string::npos);
}

TEST(SelectVisible, MigInstancesMapToTheirParentGpu)
{
    auto by_instance = base::select_visible(four_gpus(), "MIG-dddd0002");
    ASSERT_EQ(by_instance.size(), 1U);
    EXPECT_EQ(by_instance[0].physical_index, 3U);
    EXPECT_EQ(by_instance[0].selector, "MIG-dddd0002");
    auto by_parent = base::select_visible(four_gpus(), "MIG-GPU-bbbb3333/1/0");
    ASSERT_EQ(by_parent.size(), 1U);
    EXPECT_EQ(by_parent[0].physical_index, 2U);
}

TEST(SelectVisible, EmptyMeansNoGpus)
{
    EXPECT_TRUE(base::select_visible(four_gpus(), "").empty());
}

TEST(SelectVisible, BadEntriesAreErrorsThatNameThem)
{
    std::string e = select_error(four_gpus(), "0,7");
    EXPECT_NE(e.find("entry '7'"), std::string::npos) << e;
    EXPECT_NE(e.find("0000:40:00.0"), std::string::npos) << "lists the node's GPUs: " << e;
    EXPECT_NE(select_error(four_gpus(), "1,1").find("second time"), std::string::npos);
    EXPECT_NE(select_error(four_gpus(), "GPU-ffff").find("matches no GPU UUID"), std::string::npos);
    EXPECT_NE(select_error(four_gpus(), "MIG-eeee").find("no MIG instance"), std::string::npos);
    EXPECT_NE(select_error(four_gpus(), "gpu0").find("neither"), std::string::npos);
    EXPECT_NE(select_error(four_gpus(), "0,,1").find("is empty"), std::string::npos);
    auto no_uuids = four_gpus();
    for (auto& g : no_uuids) {
        g.uuid.clear();
    }
    EXPECT_NE(select_error(no_uuids, "GPU-aaaa1111").find("only known through NVML"), std::string::npos);
}

TEST(GpuInventory, NvmlGpusArePlacedWithTheTopology)
{
    TempDir dir;
    auto layout = test_support::load_layout(test_support::two_sockets_four_gpus_each(), dir);
    std::vector<base::NvmlGpu> nvml(2);
    nvml[0].bus_id = *base::PciAddress::parse("00000000:88:00.0");
    nvml[0].uuid = "GPU-b";
    nvml[1].bus_id = *base::PciAddress::parse("00000000:1A:00.0");
    nvml[1].uuid = "GPU-a";
    auto gpus = base::gpus_from_nvml(nvml, layout, base::Sysroot(dir.path()));
    ASSERT_EQ(gpus.size(), 2U);
    EXPECT_EQ(gpus[0].uuid, "GPU-a") << "PCI bus order, whatever order NVML enumerates in";
    EXPECT_EQ(gpus[0].locality.numa, std::vector<unsigned>{0});
    EXPECT_EQ(gpus[1].locality.numa, std::vector<unsigned>{1});
    EXPECT_EQ(gpus[1].hca, "mlx5_1");
    EXPECT_EQ(gpus[1].selector, "GPU-b");
}

TEST(GpuInventory, SysfsFallbackUnderASysroot)
{
    TempDir dir;
    auto layout = test_support::load_layout(test_support::nps4_four_gpus(), dir);
    auto root = dir / "root";
    write_file(root / "sys/bus/pci/devices/0000:99:00.0/local_cpulist", "20-23\n");
    write_file(root / "sys/bus/pci/devices/0000:99:00.0/numa_node", "5\n");
    write_file(root / "sys/bus/pci/devices/0000:9a:00.0/local_cpulist", "\n");
    write_file(root / "sys/bus/pci/devices/0000:9a:00.0/numa_node", "6\n");
    write_file(root / "sys/bus/pci/devices/0000:9b:00.0/numa_node", "-1\n");
    std::vector<base::NvmlGpu> nvml(3);
    nvml[0].bus_id = *base::PciAddress::parse("0000:99:00.0");
    nvml[1].bus_id = *base::PciAddress::parse("0000:9a:00.0");
    nvml[2].bus_id = *base::PciAddress::parse("0000:9b:00.0");
    auto gpus = base::gpus_from_nvml(nvml, layout, base::Sysroot(root));
    ASSERT_EQ(gpus.size(), 3U);
    EXPECT_EQ(gpus[0].locality.source, "sysfs");
    EXPECT_EQ(gpus[0].locality.cpus.to_list(), "20-23");
    EXPECT_EQ(gpus[0].locality.numa, std::vector<unsigned>{5});
    EXPECT_EQ(gpus[0].hca, "mlx5_3") << "nearest HCA by locality when hwloc lacks the device";
    EXPECT_EQ(gpus[1].locality.source, "sysfs") << "numa_node alone is enough";
    EXPECT_EQ(gpus[1].locality.cpus.to_list(), "24-27");
    EXPECT_FALSE(gpus[2].locality.known()) << "numa_node -1 and no cpulist: unknown";
}

TEST(GpuInventory, TopologyFileNeverAsksThisMachinesNvml)
{
    TempDir dir;
    test_support::FakeNvmlFixture fixture(dir, test_support::two_gpu_fixture);
    auto layout = test_support::load_layout(test_support::nps4_four_gpus(), dir);
    base::InventoryOptions options;
    options.from_topology_file = true;
    options.nvml_library = FAKE_NVML_PATH;
    auto inventory = base::discover_gpus(layout, options);
    EXPECT_EQ(inventory.source, "topology");
    EXPECT_EQ(inventory.pool.size(), 4U);
}

TEST(GpuInventory, NvmlFirstThenCudaVisibleDevices)
{
    TempDir dir;
    test_support::FakeNvmlFixture fixture(dir, test_support::two_gpu_fixture);
    T t("nvmlnode");
    t.package();
    t.numa(0, 0, 4);
    t.gpu(T::at_package(0), "0000:07:00.0");
    t.gpu(T::at_package(0), "0000:0f:00.0");
    auto layout = test_support::load_layout(t, dir);
    base::InventoryOptions options;
    options.nvml_library = FAKE_NVML_PATH;
    options.visible_devices = "GPU-bbbbbbbb";
    auto inventory = base::discover_gpus(layout, options);
    EXPECT_EQ(inventory.source, "nvml");
    EXPECT_TRUE(inventory.visible_devices_set);
    ASSERT_EQ(inventory.pool.size(), 1U);
    EXPECT_EQ(inventory.pool[0].bus_id.to_string(), "0000:0f:00.0");
    EXPECT_EQ(inventory.pool[0].name, "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(inventory.pool[0].locality.source, "hwloc");
}

TEST(GpuInventory, MissingNvmlFallsBackToPciDevicesAndSaysWhy)
{
    TempDir dir;
    auto layout = test_support::load_layout(test_support::nps4_four_gpus(), dir);
    base::InventoryOptions options;
    options.nvml_library = (dir / "no-such-libnvidia-ml.so.1").string();
    auto inventory = base::discover_gpus(layout, options);
    EXPECT_EQ(inventory.source, "topology");
    EXPECT_EQ(inventory.pool.size(), 4U);
    ASSERT_FALSE(inventory.notes.empty());
    EXPECT_NE(inventory.notes[0].find("NVML not used"), std::string::npos);
    EXPECT_NE(inventory.notes[0].find("no-such-libnvidia-ml"), std::string::npos);
}

// NVML is asked in a child: one that hangs or crashes in the driver costs a deadline and a note.
TEST(GpuInventory, AnNvmlThatHangsOrCrashesIsANoteNotTheEnd)
{
    TempDir dir;
    auto layout = test_support::load_layout(test_support::nps4_four_gpus(), dir);
    base::InventoryOptions options;
    options.nvml_library = FAKE_NVML_PATH;
    options.nvml_timeout = std::chrono::milliseconds(500);
    {
        test_support::FakeNvmlFixture fixture(dir, R"({"gpus": [{}], "hang_in": "nvmlDeviceGetCount_v2"})");
        const auto start = std::chrono::steady_clock::now();
        auto inventory = base::discover_gpus(layout, options);
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
        EXPECT_EQ(inventory.source, "topology");
        EXPECT_EQ(inventory.pool.size(), 4U);
        ASSERT_FALSE(inventory.notes.empty());
        EXPECT_NE(inventory.notes[0].find("NVML not used (NVML did not answer in 0.5 s"), std::string::npos)
            << inventory.notes[0];
    }
    {
        test_support::FakeNvmlFixture fixture(dir, R"({"gpus": [{}], "crash_in": "nvmlInit_v2"})");
        auto inventory = base::discover_gpus(layout, options);
        EXPECT_EQ(inventory.source, "topology");
        ASSERT_FALSE(inventory.notes.empty());
        EXPECT_NE(inventory.notes[0].find("NVML crashed (Segmentation fault)"), std::string::npos)
            << inventory.notes[0];
    }
    {
        test_support::FakeNvmlFixture fixture(dir, test_support::two_gpu_fixture);
        const auto gpus = base::nvml_gpus_guarded(FAKE_NVML_PATH, std::chrono::seconds(10));
        ASSERT_EQ(gpus.size(), 2U);
        EXPECT_EQ(gpus[1].bus_id.to_string(), "0000:0f:00.0");
        EXPECT_EQ(gpus[1].uuid, "GPU-bbbbbbbb-0000-0000-0000-000000000000");
        EXPECT_EQ(gpus[1].name, "NVIDIA A100-SXM4-80GB");
    }
}
