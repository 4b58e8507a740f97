#pragma once

#include "base/cuda.hpp"

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace base {

/// How copies are timed. Each sample queues `copies` copies of `bytes` between two events on one
/// stream and divides the bytes by the events' elapsed time, as nvbandwidth does; one sample is
/// run first as warm-up and thrown away; the median of `samples` is reported.
struct CopySettings {
    std::size_t bytes = std::size_t{256} << 20;
    unsigned copies = 8;
    unsigned samples = 5;
    unsigned latency_copies = 100; ///< 4-byte peer copies timed for the latency
};

/// GB/s (10^9 bytes per second) of the timed samples.
struct Rate {
    std::vector<double> samples_gbps;
    double median_gbps = 0;
    double min_gbps = 0;
    double max_gbps = 0;
};

/// The median of the values (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

/// The rate of copies that moved `bytes` each in the elapsed milliseconds of each sample: the
/// arithmetic every bandwidth number goes through. Samples with no elapsed time are dropped;
/// none left is a base::Error.
Rate rate_of(const std::vector<double>& elapsed_ms, std::size_t bytes_per_sample);

/// One GPU's copies: host→device and device→host through pinned host memory, and a copy within
/// the device's own memory (bytes / time, as nvbandwidth's device-local copy counts it).
struct GpuCopies {
    int index = 0; ///< CUDA device ordinal
    std::string name;
    std::string bus_id; ///< "0000:07:00.0", lower case
    std::string placement; ///< where the host buffer's thread ran (PlaceNear's note), or ""
    std::optional<Rate> h2d;
    std::optional<Rate> d2h;
    std::optional<Rate> d2d;
    std::string error; ///< why a measurement is missing (allocation failed, a copy failed)
};

/// Copies from one GPU's memory to another's, where CUDA allows peer access both ways.
struct PeerCopies {
    int src = 0;
    int dst = 0;
    bool access = false; ///< cuDeviceCanAccessPeer in both directions
    std::optional<Rate> bandwidth;
    std::optional<double> latency_us; ///< median over samples of one 4-byte copy's time
    std::string error;
};

struct BandwidthReport {
    CopySettings settings;
    int cuda_driver_version = 0;
    std::vector<GpuCopies> gpus;
    std::vector<PeerCopies> peers; ///< every ordered pair (src != dst), by src then dst
};

/// A CUDA device as the driver names it.
struct CudaDevice {
    int index = 0; ///< CUDA device ordinal
    std::string name;
    std::string bus_id; ///< "0000:07:00.0", lower case
};
/// Every device CUDA sees (needs cuInit and the copy symbols). Throws base::Error.
std::vector<CudaDevice> cuda_devices(const Cuda& cuda);

/// Called with a short line saying what runs now ("GPU 2/8: host → device").
using Progress = std::function<void(const std::string&)>;
/// Called before a GPU's host copies, to put this thread next to it (CPU and memory binding);
/// returns a note for the report, or "".
using PlaceNear = std::function<std::string(const GpuCopies&)>;

/// Measures every CUDA device through the driver API: initialises CUDA, then for each device in
/// turn H2D, D2H and D2D, then every ordered pair with peer access. A GPU or pair whose
/// measurement fails keeps the error and the others go on. Throws base::Error when CUDA cannot
/// start at all (cuInit, no copy symbols, no device). Runs for seconds: call it from a child
/// process with a deadline (gpudoctor's runner), since a wedged driver never returns.
BandwidthReport measure_bandwidth(
    const Cuda& cuda, const CopySettings& settings, const Progress& progress = {}, const PlaceNear& place_near = {});

/// {"settings":{...}, "cuda_driver_version":N, "gpus":[{index,name,bus_id,h2d:{median_gbps,min_gbps,
/// max_gbps,samples_gbps},d2h,d2d,error}], "peers":[{src,dst,access,bandwidth,latency_us,error}]}.
nlohmann::json to_json(const BandwidthReport& report);

/// The theoretical one-direction rate of a PCIe link in GB/s: per-lane transfer rate (GT/s, as
/// sysfs max_link_speed says: 2.5, 5, 8, 16, 32, 64) after line encoding, times the width.
/// nullopt for a rate it does not know.
std::optional<double> pcie_link_gbps(double gt_per_s, unsigned width);

} // namespace base
