#include "base/cpu_set.hpp"
#include "doctor/probes/table.hpp"

#include <sched.h>
#include <vector>

namespace doctor::probes {

// This process's CPU affinity and which GPU it is meant for, as gpurun and MPI launchers tell it
// through the environment. For `gpudoctor check --only binding` run on every rank.
Collector affinity_collector()
{
    return {"affinity", [](const CollectContext& ctx) {
                facts::AffinityFacts out;
                cpu_set_t mask;
                CPU_ZERO(&mask);
                if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
                    std::vector<unsigned> cpus;
                    for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
                        if (CPU_ISSET(cpu, &mask)) {
                            cpus.push_back(cpu);
                        }
                    }
                    out.cpus = base::CpuSet(std::move(cpus)).to_list();
                }
                for (const char* name : {"GPURUN_GPU_BUS_ID", "GPURUN_GPU", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                         "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}) {
                    if (const char* value = ctx.getenv(name); value != nullptr) {
                        out.env[name] = value;
                    }
                }
                return facts::write(out);
            }};
}

} // namespace doctor::probes
