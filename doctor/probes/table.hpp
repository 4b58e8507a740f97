#pragma once

#include "doctor/engine/probe.hpp"

#include <string>
#include <vector>

/// Every collector and probe of gpudoctor check; table.cpp puts them in order.
namespace doctor::probes {

// The checks speak the check engine's vocabulary.
using engine::CollectContext;
using engine::Collector;
using engine::collector_error;
using engine::collector_facts;
using engine::compare_versions;
using engine::DeepFloor;
using engine::Facts;
using engine::Finding;
using engine::FindingCode;
using engine::Findings;
using engine::Policy;
using engine::Probe;
using engine::progress_line;
using engine::Severity;

/// The one explicit table of probes, in display order.
const std::vector<Probe>& probe_table();
/// The one explicit table of collectors.
const std::vector<Collector>& collector_table();

/// The collectors the probes need, in table order, without repeats; "host" always.
std::vector<const Collector*> collectors_for(const std::vector<const Probe*>& probes);

/// Probes named by `--only` / `--skip` (names or name prefixes, comma-separated). Deep probes
/// are left out unless `deep` is set or `--only` names them. Throws base::Error with a
/// did-you-mean for a word that matches no probe.
std::vector<const Probe*> select_probes(const std::string& only, const std::string& skip, bool deep = false);

Collector host_collector(); // hostname, kernel, CPUs, /proc/cmdline
Collector nvml_collector(); // driver files, NVML: GPUs, health, P2P, links
Collector topology_collector(); // hwloc: GPU and NIC locality
Collector libraries_collector(); // libcuda, cudart, cuDNN, cuBLAS, NCCL via dlopen: versions
Collector frameworks_collector(); // python3: torch, tensorflow, jax, horovod, mxnet builds
Collector pci_collector(); // sysfs: IOMMU mode, VM or not, PCIe ACS on bridges above GPUs
Collector network_collector(); // sysfs: InfiniBand/RoCE ports, GPUDirect RDMA module
Collector limits_collector(); // /dev/shm size, memlock and open-files limits
Collector env_collector(); // NCCL/CUDA/MPI variables, network interfaces
Collector mpi_collector(); // mpirun --version, ompi_info, ucx_info
Collector affinity_collector(); // this process's CPU affinity and its GPU from the launcher's env
Collector bandwidth_collector(); // deep: timed copies through the CUDA driver API
Collector allreduce_collector(); // deep: a timed NCCL all-reduce over every GPU, and NCCL's log

Probe driver_probe();
Probe gpus_probe();
Probe libraries_probe();
Probe frameworks_probe();
Probe topology_probe();
Probe p2p_probe();
Probe network_probe();
Probe nccl_env_probe();
Probe limits_probe();
Probe mpi_probe();
Probe binding_probe();
Probe bandwidth_probe();
Probe allreduce_probe();

} // namespace doctor::probes
