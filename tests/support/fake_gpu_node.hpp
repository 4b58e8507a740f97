#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace test_support {

/// A fake NVML fixture: `count` healthy A100s at buses 07, 0f, 47, 4e, 87, 90, b7, bd (the demo
/// topology's order), persistence on, ECC on and clean, PCIe Gen4 x16, idle. Tests change fields.
inline nlohmann::json healthy_gpu_node(unsigned count = 8)
{
    static const char* buses[] = {"07", "0f", "47", "4e", "87", "90", "b7", "bd"};
    nlohmann::json gpus = nlohmann::json::array();
    for (unsigned i = 0; i < count && i < 8; ++i) {
        gpus.push_back({{"bus_id", std::string("00000000:") + buses[i] + ":00.0"}, {"name", "NVIDIA A100-SXM4-80GB"},
            {"uuid", "GPU-0000000" + std::to_string(i) + "-1111-2222-3333-444444444444"},
            {"memory_total", 85899345920ULL}, {"compute_mode", 0}, {"persistence", 1}, {"processes", 0},
            {"ecc",
                {{"enabled", 1}, {"corrected", 0}, {"uncorrected", 0}, {"corrected_volatile", 0},
                    {"uncorrected_volatile", 0}}},
            {"retired_pages", {{"single", 0}, {"double", 0}, {"pending", 0}}},
            {"remapped_rows", {{"corrected", 0}, {"uncorrected", 0}, {"pending", 0}, {"failure", 0}}},
            {"clock_event_reasons", 1}, {"pcie", {{"gen", 4}, {"max_gen", 4}, {"width", 16}, {"max_width", 16}}},
            {"utilization", 0}});
    }
    return {{"driver", "550.54.15"}, {"cuda_driver_version", 12040}, {"gpus", gpus}};
}

} // namespace test_support
