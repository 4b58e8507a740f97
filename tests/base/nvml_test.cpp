#include "base/error.hpp"
#include "base/nvml.hpp"
#include "tests/support/fake_nvml_fixture.hpp"

#include <gtest/gtest.h>

using test_support::FakeNvmlFixture;
using test_support::TempDir;

namespace {

std::string load_error(const std::string& file)
{
    try {
        base::Nvml::load(file);
    } catch (const base::Error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(Nvml, ReadsGpusThroughTheRealLoader)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, test_support::two_gpu_fixture);
    auto nvml = base::Nvml::load(FAKE_NVML_PATH);
    auto gpus = nvml.gpus();
    ASSERT_EQ(gpus.size(), 2U);
    EXPECT_EQ(gpus[0].bus_id.to_string(), "0000:07:00.0");
    EXPECT_EQ(gpus[1].bus_id.to_string(), "0000:0f:00.0");
    EXPECT_EQ(gpus[0].name, "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(gpus[1].uuid, "GPU-bbbbbbbb-0000-0000-0000-000000000000");
    EXPECT_EQ(gpus[0].memory_total, 85899345920ULL);
    EXPECT_TRUE(gpus[0].mig_uuids.empty());
    ASSERT_EQ(gpus[1].mig_uuids.size(), 2U);
    EXPECT_EQ(gpus[1].mig_uuids[1], "MIG-22222222-0000-0000-0000-000000000000");
    EXPECT_EQ(nvml.driver_version(), "550.54.15");
}

TEST(Nvml, EnvironmentOverrideSelectsTheLibrary)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, test_support::two_gpu_fixture);
    setenv("GPUKIT_NVML_LIBRARY", FAKE_NVML_PATH, 1);
    EXPECT_EQ(base::Nvml::default_file(), FAKE_NVML_PATH);
    auto nvml = base::Nvml::load();
    EXPECT_EQ(nvml.gpus().size(), 2U);
    unsetenv("GPUKIT_NVML_LIBRARY");
    EXPECT_EQ(base::Nvml::default_file(), "libnvidia-ml.so.1");
}

TEST(Nvml, MissingLibraryIsAClearError)
{
    std::string message = load_error("/nonexistent/libnvidia-ml.so.1");
    EXPECT_NE(message.find("cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos) << message;
}

TEST(Nvml, LibraryWithoutARequiredSymbolIsRefusedByName)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, test_support::two_gpu_fixture);
    std::string message = load_error(FAKE_NVML_NO_PCI_PATH);
    EXPECT_NE(message.find("lacks nvmlDeviceGetPciInfo_v2"), std::string::npos) << message;
}

TEST(Nvml, MissingOptionalSymbolsMeanFeatureAbsent)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, test_support::two_gpu_fixture);
    auto nvml = base::Nvml::load(FAKE_NVML_MINIMAL_PATH);
    EXPECT_EQ(nvml.api().uuid, nullptr);
    auto gpus = nvml.gpus();
    ASSERT_EQ(gpus.size(), 2U);
    EXPECT_EQ(gpus[1].bus_id.to_string(), "0000:0f:00.0");
    EXPECT_TRUE(gpus[0].name.empty());
    EXPECT_TRUE(gpus[0].uuid.empty());
    EXPECT_FALSE(gpus[0].memory_total);
    EXPECT_FALSE(nvml.driver_version());
}

TEST(Nvml, InitFailureCarriesNvmlsOwnErrorString)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, R"({"init_error": 9, "gpus": []})");
    std::string message = load_error(FAKE_NVML_PATH);
    EXPECT_NE(message.find("nvmlInit_v2 failed"), std::string::npos) << message;
    EXPECT_NE(message.find("Driver Not Loaded"), std::string::npos) << message;
}

namespace {

// Three processes, so that a wrong stride shows from the second entry on.
const char* three_processes = R"({"gpus": [
  {"bus_id": "00000000:07:00.0", "processes": [
    {"pid": 1111, "used_memory": 1073741824}, {"pid": 2222, "used_memory": 2147483648}, 3333]}]})";

} // namespace

TEST(Nvml, ProcessListAtEveryStructSize)
{
    // Which call and entry size the loader picks from the symbols a driver has, as nvitop does, and
    // the pids and memory it reads back through the real loader.
    struct Driver {
        const char* library;
        const char* symbol;
        unsigned size;
    };
    for (const Driver& d : {Driver{FAKE_NVML_PATH, "nvmlDeviceGetComputeRunningProcesses_v3", 24},
             Driver{FAKE_NVML_PROC32_PATH, "nvmlDeviceGetComputeRunningProcesses_v3", 32},
             Driver{FAKE_NVML_PROC_V2_PATH, "nvmlDeviceGetComputeRunningProcesses_v2", 24},
             Driver{FAKE_NVML_PROC_V1_PATH, "nvmlDeviceGetComputeRunningProcesses", 16}}) {
        SCOPED_TRACE(d.library);
        TempDir dir;
        FakeNvmlFixture fixture(dir, three_processes);
        auto nvml = base::Nvml::load(d.library);
        EXPECT_STREQ(nvml.api().running_processes_symbol, d.symbol);
        EXPECT_EQ(nvml.api().process_info_size, d.size);
        const auto processes = nvml.compute_processes(nvml.handle(0));
        EXPECT_EQ(
            processes, (std::vector<base::NvmlProcess>{{1111, 1ULL << 30}, {2222, 2ULL << 30}, {3333, 256ULL << 20}}));
        EXPECT_EQ(nvml.process_info_size(), d.size);
        unsigned int count = 0;
        EXPECT_EQ(
            nvml.api().running_processes(nvml.handle(0), &count, nullptr), base::nvml_abi::error_insufficient_size);
        EXPECT_EQ(count, 3U) << "the count alone, as gpudoctor's gpus probe asks";
    }
}

TEST(Nvml, DriverThatWritesLargerEntriesThanItsSymbolsSayIsReadAsWritten)
{
    // A 535.43-535.86-like driver without the symbols that identify it: the loader expects 24-byte
    // entries, sees 32-byte ones written and reads those.
    TempDir dir;
    FakeNvmlFixture fixture(dir, three_processes);
    auto nvml = base::Nvml::load(FAKE_NVML_PROC_UNDECLARED32_PATH);
    EXPECT_EQ(nvml.api().process_info_size, 24U);
    const auto processes = nvml.compute_processes(nvml.handle(0));
    ASSERT_EQ(processes.size(), 3U);
    EXPECT_EQ(processes[1].pid, 2222U);
    EXPECT_EQ(processes[2].pid, 3333U);
    EXPECT_EQ(nvml.process_info_size(), 32U);
}

TEST(Nvml, ProcessListErrorsNameTheCall)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, R"({"gpus": [{"bus_id": "00000000:07:00.0", "processes": 2, "processes_error": 4}]})");
    auto nvml = base::Nvml::load(FAKE_NVML_PATH);
    try {
        nvml.compute_processes(nvml.handle(0));
        FAIL() << "no error";
    } catch (const base::Error& e) {
        EXPECT_STREQ(e.what(), "nvmlDeviceGetComputeRunningProcesses_v3 failed: Unknown Error (NVML error 4)");
    }
    FakeNvmlFixture none(dir, R"({"gpus": [{"bus_id": "00000000:07:00.0"}]})");
    auto empty = base::Nvml::load(FAKE_NVML_PATH);
    EXPECT_TRUE(empty.compute_processes(empty.handle(0)).empty());
    auto minimal = base::Nvml::load(FAKE_NVML_MINIMAL_PATH);
    EXPECT_EQ(minimal.api().running_processes, nullptr);
    EXPECT_THROW(minimal.compute_processes(minimal.handle(0)), base::Error);
}
