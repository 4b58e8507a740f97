#include "tests/support/doctor_support.hpp"
#include "tests/support/temp_dir.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <optional>
#include <string>

using doctor::engine::Severity;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& text)
{
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

void put_u32(std::string& bytes, std::size_t at, std::uint32_t value)
{
    for (int i = 0; i < 4; ++i) {
        bytes[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
    }
}

// A 4 KiB config space: an AER capability at 0x100 pointing to an ACS capability at 0x148 with
// this ACS Control value (nullopt: no ACS capability).
std::string config_space(std::optional<std::uint16_t> acs_control)
{
    std::string bytes(4096, '\0');
    put_u32(bytes, 0x00, 0x874710b5); // vendor/device of a PLX switch port
    const std::uint32_t next = acs_control ? 0x148 : 0;
    put_u32(bytes, 0x100, 0x0001U | (1U << 16) | (next << 20)); // AER, version 1
    if (acs_control) {
        put_u32(bytes, 0x148, 0x000dU | (1U << 16)); // ACS, version 1, last
        put_u32(bytes, 0x14c, 0x005fU | (static_cast<std::uint32_t>(*acs_control) << 16)); // cap | control
    }
    return bytes;
}

// A sysroot: root port 00:01.0 > switch upstream 01:00.0 > downstream 02:00.0 and 02:01.0 > GPUs
// 03:00.0 and 04:00.0, sysfs-style (devices tree plus bus/pci/devices symlinks).
struct SysrootFixture {
    test_support::TempDir dir;
    fs::path bridge(const std::string& bdf) const
    {
        static const std::map<std::string, std::string> paths = {{"0000:00:01.0", "pci0000:00/0000:00:01.0"},
            {"0000:01:00.0", "pci0000:00/0000:00:01.0/0000:01:00.0"},
            {"0000:02:00.0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0"},
            {"0000:02:01.0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0"}};
        return dir / ("sys/devices/" + paths.at(bdf));
    }
    explicit SysrootFixture(std::optional<std::uint16_t> acs_control, bool root = true)
    {
        for (const char* b : {"0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0"}) {
            write(bridge(b) / "config", root ? config_space(acs_control) : config_space(acs_control).substr(0, 64));
        }
        add_gpu("0000:03:00.0", bridge("0000:02:00.0"));
        add_gpu("0000:04:00.0", bridge("0000:02:01.0"));
    }
    void add_gpu(const std::string& bdf, const fs::path& parent)
    {
        fs::path dev = parent / bdf;
        write(dev / "vendor", "0x10de\n");
        write(dev / "class", "0x030200\n");
        fs::create_directories(dir / "sys/bus/pci/devices");
        fs::path rel = fs::relative(dev, dir / "sys/bus/pci/devices");
        fs::create_directory_symlink(rel, dir / "sys/bus/pci/devices" / bdf);
    }
    void iommu(const std::string& type, unsigned groups = 3)
    {
        for (unsigned g = 0; g < groups; ++g) {
            write(dir / ("sys/kernel/iommu_groups/" + std::to_string(g) + "/type"), type + "\n");
        }
    }
    nlohmann::json collect() const
    {
        doctor::engine::CollectContext ctx;
        ctx.sysroot = dir.path().string();
        return test_support::collector_named("pci").collect(ctx);
    }
};

const nlohmann::json no_nvml = {{"driver_file", nullptr}, {"nvml_loaded", false}, {"nvml_error", "no library"}};

nlohmann::json nvml_two_gpus(int read, int write_status, int ancestor, bool nvlink = false)
{
    nlohmann::json links = nvlink ? nlohmann::json::array({"0000:04:00.0"}) : nlohmann::json::array();
    return {{"driver_file", "NVRM"}, {"nvml_loaded", true},
        {"gpus",
            {{{"index", 0}, {"bus_id", "0000:03:00.0"}, {"nvlinks", links}},
                {{"index", 1}, {"bus_id", "0000:04:00.0"}, {"nvlinks", nlohmann::json::array()}}}},
        {"pairs", {{{"a", 0}, {"b", 1}, {"p2p_read", read}, {"p2p_write", write_status}, {"ancestor", ancestor}}}}};
}

} // namespace

TEST(P2pCollector, ReadsAcsFromTheBridgesAboveEachGpu)
{
    SysrootFixture s(0x001d);
    auto facts = s.collect();
    ASSERT_EQ(facts["gpus"].size(), 2U);
    EXPECT_EQ(
        facts["gpus"][0]["upstream_bridges"], nlohmann::json::array({"0000:02:00.0", "0000:01:00.0", "0000:00:01.0"}));
    ASSERT_EQ(facts["bridges"].size(), 4U);
    for (const auto& b : facts["bridges"]) {
        EXPECT_TRUE(b["readable"].get<bool>());
        EXPECT_TRUE(b["acs"].get<bool>());
        EXPECT_EQ(b["acs_offset"], 0x148);
        EXPECT_EQ(b["acs_control"], "0x001d");
        EXPECT_TRUE(b["request_redirect"].get<bool>());
        EXPECT_TRUE(b["completion_redirect"].get<bool>());
    }
}

TEST(P2pCollector, ABridgeConfigThatIsNotARegularFileIsNotRead)
{
    // A sysroot whose config is /dev/zero (or a FIFO) was read without end; it is "missing" now.
    SysrootFixture s(0x001d);
    fs::remove(s.bridge("0000:00:01.0") / "config");
    fs::create_symlink("/dev/zero", s.bridge("0000:00:01.0") / "config");
    const auto facts = s.collect();
    ASSERT_EQ(facts["bridges"].size(), 4U);
    EXPECT_EQ(facts["bridges"][0]["bus_id"], "0000:00:01.0");
    EXPECT_FALSE(facts["bridges"][0]["readable"].get<bool>());
    EXPECT_EQ(facts["bridges"][0]["reason"], "config missing");
    EXPECT_TRUE(facts["bridges"][1]["readable"].get<bool>());
}

TEST(P2pProbe, AcsRedirectOnBareMetalFails)
{
    SysrootFixture s(0x001d);
    s.iommu("identity");
    nlohmann::json facts = {{"nvml", nvml_two_gpus(0, 0, 10)}, {"pci", s.collect()}};
    auto findings = test_support::judge_one("p2p", facts);
    EXPECT_NE(test_support::find_code(findings, "p2p.ok"), nullptr);
    auto fails = test_support::codes_with(findings, Severity::fail);
    ASSERT_EQ(fails.size(), 4U);
    const auto* acs = test_support::find_code(findings, "p2p.acs_enabled");
    EXPECT_EQ(acs->subject, "bridge 0000:00:01.0");
    EXPECT_NE(acs->message.find("ACS Control 0x001d"), std::string::npos) << acs->message;
    EXPECT_NE(acs->remedy.find("setpci -s 0000:00:01.0 ECAP_ACS+6.w=0000"), std::string::npos);
    const auto* iommu = test_support::find_code(findings, "p2p.iommu_ok");
    ASSERT_NE(iommu, nullptr);
    EXPECT_NE(iommu->message.find("passthrough"), std::string::npos);
}

TEST(P2pProbe, AcsWithoutRedirectOrWithoutCapabilityPasses)
{
    for (std::optional<std::uint16_t> control :
        {std::optional<std::uint16_t>(0x0001), std::optional<std::uint16_t>()}) {
        SysrootFixture s(control);
        nlohmann::json facts = {{"nvml", nvml_two_gpus(0, 0, 10)}, {"pci", s.collect()}};
        auto findings = test_support::judge_one("p2p", facts);
        EXPECT_TRUE(test_support::codes_with(findings, Severity::fail).empty());
        const auto* off = test_support::find_code(findings, "p2p.acs_off");
        ASSERT_NE(off, nullptr);
        EXPECT_NE(off->message.find("4 bridge(s)"), std::string::npos);
        EXPECT_NE(test_support::find_code(findings, "p2p.iommu_ok"), nullptr) << "no IOMMU groups: off";
    }
}

TEST(P2pProbe, AcsInsideAVmIsExpected)
{
    SysrootFixture s(0x001d);
    write(s.dir / "sys/class/dmi/id/sys_vendor", "QEMU\n");
    s.iommu("DMA");
    nlohmann::json facts = {{"nvml", nvml_two_gpus(0, 0, 10)}, {"pci", s.collect()}};
    auto findings = test_support::judge_one("p2p", facts);
    EXPECT_TRUE(test_support::codes_with(findings, Severity::fail).empty());
    EXPECT_TRUE(test_support::codes_with(findings, Severity::warn).empty()) << "translated IOMMU in a VM";
    const auto* vm = test_support::find_code(findings, "p2p.acs_in_vm");
    ASSERT_NE(vm, nullptr);
    EXPECT_EQ(vm->severity, Severity::pass);
    EXPECT_NE(vm->message.find("sys_vendor is 'QEMU'"), std::string::npos) << vm->message;
}

TEST(P2pProbe, HypervisorFlagMeansVm)
{
    SysrootFixture s(0x001d);
    write(s.dir / "proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme sse2 hypervisor avx\n");
    auto facts = s.collect();
    EXPECT_TRUE(facts["vm"]["virtual"].get<bool>());
}

TEST(P2pProbe, UnreadableConfigSpaceIsASkipNotAPass)
{
    SysrootFixture s(0x001d, false);
    nlohmann::json facts = {{"nvml", nvml_two_gpus(0, 0, 10)}, {"pci", s.collect()}};
    auto findings = test_support::judge_one("p2p", facts);
    EXPECT_EQ(test_support::find_code(findings, "p2p.acs_enabled"), nullptr);
    EXPECT_EQ(test_support::find_code(findings, "p2p.acs_off"), nullptr);
    const auto* skip = test_support::find_code(findings, "p2p.acs_unreadable");
    ASSERT_NE(skip, nullptr);
    EXPECT_EQ(skip->severity, Severity::skip);
    EXPECT_NE(skip->message.find("needs root"), std::string::npos);
}

TEST(P2pProbe, TranslatedIommuOnBareMetalWarns)
{
    SysrootFixture s(0x0000);
    s.iommu("DMA-FQ");
    write(s.dir / "proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on quiet\n");
    nlohmann::json facts = {{"nvml", nvml_two_gpus(0, 0, 10)}, {"pci", s.collect()}};
    auto findings = test_support::judge_one("p2p", facts);
    const auto* warn = test_support::find_code(findings, "p2p.iommu_translated");
    ASSERT_NE(warn, nullptr);
    EXPECT_EQ(warn->severity, Severity::warn);
    EXPECT_NE(warn->message.find("intel_iommu=on"), std::string::npos) << warn->message;
    EXPECT_NE(warn->remedy.find("iommu=pt"), std::string::npos);
}

TEST(P2pProbe, MissingPeerAccessFailsWithTheStatusName)
{
    SysrootFixture s(0x0000);
    nlohmann::json facts = {{"nvml", nvml_two_gpus(0, 1, 20)}, {"pci", s.collect()}};
    auto findings = test_support::judge_one("p2p", facts);
    const auto* fail = test_support::find_code(findings, "p2p.unavailable");
    ASSERT_NE(fail, nullptr);
    EXPECT_EQ(fail->severity, Severity::fail);
    EXPECT_NE(fail->message.find("read OK, write CHIPSET_NOT_SUPPORTED"), std::string::npos) << fail->message;
    EXPECT_EQ(test_support::find_code(findings, "p2p.ok"), nullptr);
}

TEST(P2pProbe, NoPeerAccessAcrossSocketsOfAPcieOnlyNodeIsAWarning)
{
    SysrootFixture s(0x0000);
    nlohmann::json facts = {{"nvml", nvml_two_gpus(3, 3, 50)}, {"pci", s.collect()}};
    auto findings = test_support::judge_one("p2p", facts);
    const auto* warn = test_support::find_code(findings, "p2p.unavailable_across_sockets");
    ASSERT_NE(warn, nullptr);
    EXPECT_EQ(warn->severity, Severity::warn);
    EXPECT_NE(warn->message.find("IOH_TOPOLOGY_NOT_SUPPORTED"), std::string::npos);
    // The same pair with an NVLink on the node is a real failure.
    facts["nvml"] = nvml_two_gpus(3, 3, 50, true);
    findings = test_support::judge_one("p2p", facts);
    EXPECT_NE(test_support::find_code(findings, "p2p.unavailable"), nullptr);
}

TEST(P2pProbe, SkipsWithoutGpus)
{
    test_support::TempDir dir;
    doctor::engine::CollectContext ctx;
    ctx.sysroot = dir.path().string();
    nlohmann::json facts = {{"nvml", no_nvml}, {"pci", test_support::collector_named("pci").collect(ctx)}};
    auto findings = test_support::judge_one("p2p", facts);
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].severity, Severity::skip);
    EXPECT_EQ(findings[0].code, "p2p.skip");
}
