#pragma once

#include "tests/support/temp_dir.hpp"

#include <cstdlib>
#include <fstream>
#include <string>

namespace test_support {

/// Points the fake NVML library at a JSON fixture for the life of the object.
class FakeNvmlFixture {
public:
    FakeNvmlFixture(const TempDir& dir, const std::string& json)
    {
        m_path = (dir / "nvml.json").string();
        std::ofstream(m_path) << json;
        setenv("FAKE_NVML_FIXTURE", m_path.c_str(), 1);
    }
    ~FakeNvmlFixture() { unsetenv("FAKE_NVML_FIXTURE"); }
    FakeNvmlFixture(const FakeNvmlFixture&) = delete;
    FakeNvmlFixture& operator=(const FakeNvmlFixture&) = delete;
    const std::string& path() const { return m_path; }

private:
    std::string m_path;
};

/// Two A100s at 0000:07:00.0 and 0000:0f:00.0, the second with two MIG instances.
inline const char* two_gpu_fixture = R"({
  "driver": "550.54.15",
  "gpus": [
    {"bus_id": "00000000:07:00.0", "name": "NVIDIA A100-SXM4-80GB",
     "uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000", "memory_total": 85899345920},
    {"bus_id": "00000000:0F:00.0", "name": "NVIDIA A100-SXM4-80GB",
     "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000", "memory_total": 85899345920,
     "mig": ["MIG-11111111-0000-0000-0000-000000000000", "MIG-22222222-0000-0000-0000-000000000000"]}
  ]
})";

} // namespace test_support
