#include "base/cuda.hpp"
#include "base/error.hpp"

#include <cstdlib>
#include <gtest/gtest.h>
#include <string>

namespace {

/// Sets the fake libcuda's FAKE_* variables for one test and removes them after.
class CudaTest : public ::testing::Test {
protected:
    void TearDown() override
    {
        for (const char* name :
            {"FAKE_CUDA_DRIVER_VERSION", "FAKE_CUDA_INIT_ERROR", "FAKE_CUDA_DEVICE_COUNT", "GPUKIT_CUDA_LIBRARY"}) {
            unsetenv(name);
        }
    }
    static void set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }
};

std::string load_error(const std::string& file)
{
    try {
        base::Cuda::load(file);
    } catch (const base::Error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_F(CudaTest, ReadsTheDriverVersionAndDevicesThroughTheRealLoader)
{
    set("FAKE_CUDA_DRIVER_VERSION", "12060");
    set("FAKE_CUDA_DEVICE_COUNT", "8");
    auto cuda = base::Cuda::load(FAKE_CUDA_PATH);
    EXPECT_EQ(cuda.file(), FAKE_CUDA_PATH);
    EXPECT_EQ(cuda.driver_version(), 12060);
    EXPECT_NO_THROW(cuda.init());
    EXPECT_EQ(cuda.device_count(), 8);
    EXPECT_NE(cuda.api().error_string, nullptr);
}

TEST_F(CudaTest, InitFailureNamesTheCallAndCudasOwnError)
{
    set("FAKE_CUDA_INIT_ERROR", "100");
    auto cuda = base::Cuda::load(FAKE_CUDA_PATH);
    EXPECT_EQ(cuda.driver_version(), 12040) << "the version is readable without cuInit";
    try {
        cuda.init();
        ADD_FAILURE() << "cuInit should have failed";
    } catch (const base::Error& e) {
        EXPECT_EQ(std::string(e.what()),
            std::string("cuInit failed in ") + FAKE_CUDA_PATH +
                ": CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected (CUDA error "
                "100)");
    }
    EXPECT_EQ(cuda.describe(4242), "CUDA error 4242");
}

TEST_F(CudaTest, EnvironmentOverrideSelectsTheLibrary)
{
    EXPECT_EQ(base::Cuda::default_file(), "libcuda.so.1");
    set("GPUKIT_CUDA_LIBRARY", FAKE_CUDA_PATH);
    EXPECT_EQ(base::Cuda::default_file(), FAKE_CUDA_PATH);
    EXPECT_EQ(base::Cuda::load().file(), FAKE_CUDA_PATH);
}

TEST_F(CudaTest, MissingLibraryIsAClearError)
{
    std::string message = load_error("/nonexistent/libcuda.so.1");
    EXPECT_NE(message.find("cannot load /nonexistent/libcuda.so.1"), std::string::npos) << message;
}

TEST_F(CudaTest, LibraryWithoutARequiredSymbolIsRefusedByName)
{
    std::string message = load_error(FAKE_CUDA_NO_COUNT_PATH);
    EXPECT_EQ(message,
        std::string(FAKE_CUDA_NO_COUNT_PATH) +
            " is not a usable CUDA driver library: it lacks cuDeviceGetCount; point "
            "GPUKIT_CUDA_LIBRARY at libcuda.so.1 from the NVIDIA driver");
}

TEST_F(CudaTest, VersionText)
{
    EXPECT_EQ(base::Cuda::version_text(12040), "12.4");
    EXPECT_EQ(base::Cuda::version_text(11080), "11.8");
    EXPECT_EQ(base::Cuda::version_text(13000), "13.0");
    EXPECT_EQ(base::Cuda::version_text(12060), "12.6");
}
