#include "probes/error.hpp"
#include "probes/nvml.hpp"
#include "tests/support/fake_nvml_fixture.hpp"

#include <gtest/gtest.h>

using test_support::FakeNvmlFixture;
using test_support::TempDir;

namespace {

std::string load_error(const std::string& file)
{
    try {
        probes::Nvml::load(file);
    } catch (const probes::Error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(Nvml, ReadsGpusThroughTheRealLoader)
{
    TempDir dir;
    FakeNvmlFixture fixture(dir, test_support::two_gpu_fixture);
    auto nvml = probes::Nvml::load(FAKE_NVML_PATH);
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
    EXPECT_EQ(probes::Nvml::default_file(), FAKE_NVML_PATH);
    auto nvml = probes::Nvml::load();
    EXPECT_EQ(nvml.gpus().size(), 2U);
    unsetenv("GPUKIT_NVML_LIBRARY");
    EXPECT_EQ(probes::Nvml::default_file(), "libnvidia-ml.so.1");
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
    auto nvml = probes::Nvml::load(FAKE_NVML_MINIMAL_PATH);
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
