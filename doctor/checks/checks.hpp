#pragma once

#include "doctor/probe.hpp"

/// Every collector and probe of gpudoctor; doctor/probe_table.cpp puts them in order.
namespace doctor::checks {

Collector host_collector();      // hostname, kernel, CPUs, /proc/cmdline
Collector nvml_collector();      // driver files, NVML: GPUs, health, P2P, links
Collector topology_collector();  // hwloc: GPU and NIC locality

Probe driver_probe();
Probe gpus_probe();

} // namespace doctor::checks
