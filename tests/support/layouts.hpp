#pragma once

#include "base/node_layout.hpp"
#include "base/topology.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/topology_xml.hpp"

namespace test_support {

using T = TopologyXml;

/// 2 sockets x 8 cores x 2 threads (Linux numbering: 0-15 then 16-31), NUMA 0 and 1, four GPUs
/// and one HCA per socket.
inline TopologyXml two_sockets_four_gpus_each()
{
    T t("twosocket");
    t.linux_smt_numbering();
    t.package();
    t.package();
    unsigned n0 = t.numa(0, 0, 8, 2);
    unsigned n1 = t.numa(1, 1, 8, 2);
    (void)n0;
    (void)n1;
    for (const char* bus : {"0000:1a:00.0", "0000:1b:00.0", "0000:3d:00.0", "0000:3e:00.0"}) {
        t.gpu(T::at_package(0), bus);
    }
    for (const char* bus : {"0000:88:00.0", "0000:89:00.0", "0000:b1:00.0", "0000:b2:00.0"}) {
        t.gpu(T::at_package(1), bus);
    }
    t.hca(T::at_package(0), "0000:5e:00.0", "mlx5_0");
    t.hca(T::at_package(1), "0000:d8:00.0", "mlx5_1");
    return t;
}

/// AMD NPS4: 2 sockets x 4 NUMA nodes x 4 cores; GPU 0 (PCI 03) sits on NUMA 3, GPU 1 (44) on
/// NUMA 1, GPU 2 (84) on NUMA 7, GPU 3 (c4) on NUMA 5, each beside an HCA in a PCIe switch.
inline TopologyXml nps4_four_gpus()
{
    T t("nps4");
    unsigned numa[8];
    for (unsigned p = 0; p < 2; ++p) {
        t.package();
        for (unsigned n = 0; n < 4; ++n) {
            numa[p * 4 + n] = t.numa(p, p * 4 + n, 4, 1);
        }
    }
    struct {
        unsigned node;
        const char* gpu;
        const char* hca_bus;
        const char* hca;
    } place[] = {{3, "0000:03:00.0", "0000:04:00.0", "mlx5_0"}, {1, "0000:44:00.0", "0000:43:00.0", "mlx5_1"},
        {7, "0000:84:00.0", "0000:83:00.0", "mlx5_2"}, {5, "0000:c4:00.0", "0000:c3:00.0", "mlx5_3"}};
    for (const auto& p : place) {
        unsigned sw = t.pci_switch(T::at_numa(numa[p.node]));
        t.gpu(T::at_switch(sw), p.gpu);
        t.hca(T::at_switch(sw), p.hca_bus, p.hca);
    }
    return t;
}

inline base::NodeLayout load_layout(const TopologyXml& t, const TempDir& dir, const std::string& name = "topo.xml")
{
    auto path = t.write(dir / name);
    return base::Topology::load_xml(path.string()).layout();
}

} // namespace test_support
