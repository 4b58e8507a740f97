// Writes share/gpukit/topologies/dgx-a100-like.xml: a synthetic GPU server shaped like an NVIDIA
// DGX A100 (2 sockets in NPS4 mode, 8 NUMA nodes, 8 GPUs whose NUMA nodes do not follow PCI order,
// 8 InfiniBand HCAs next to them, NVSwitches and a BMC VGA that are not GPUs). It is not a
// capture of a real machine.
#include "tests/support/topology_xml.hpp"

#include <iostream>

int main(int argc, char** argv)
{
    using T = test_support::TopologyXml;
    T t("dgx-demo");
    t.linux_smt_numbering();
    unsigned numa[8];
    for (unsigned p = 0; p < 2; ++p) {
        t.package();
        for (unsigned n = 0; n < 4; ++n) {
            numa[p * 4 + n] = t.numa(p, p * 4 + n, 16, 2);
        }
    }
    // GPU pairs and their HCAs behind PCIe switches: GPU 0,1 -> NUMA 3; 2,3 -> 1; 4,5 -> 7; 6,7 -> 5.
    struct Pair {
        unsigned numa;
        const char* gpus[2];
        const char* hcas[2];
        const char* hca_names[2];
    };
    const Pair pairs[] = {
        {3, {"0000:07:00.0", "0000:0f:00.0"}, {"0000:0c:00.0", "0000:12:00.0"}, {"mlx5_0", "mlx5_1"}},
        {1, {"0000:47:00.0", "0000:4e:00.0"}, {"0000:4b:00.0", "0000:54:00.0"}, {"mlx5_2", "mlx5_3"}},
        {7, {"0000:87:00.0", "0000:90:00.0"}, {"0000:8d:00.0", "0000:94:00.0"}, {"mlx5_4", "mlx5_5"}},
        {5, {"0000:b7:00.0", "0000:bd:00.0"}, {"0000:ba:00.0", "0000:cc:00.0"}, {"mlx5_6", "mlx5_7"}},
    };
    for (const auto& pair : pairs) {
        for (int i = 0; i < 2; ++i) {
            unsigned sw = t.pci_switch(T::at_numa(numa[pair.numa]));
            t.gpu(T::at_switch(sw), pair.gpus[i]);
            t.hca(T::at_switch(sw), pair.hcas[i], pair.hca_names[i]);
        }
    }
    for (const char* nvswitch : {"0000:c4:00.0", "0000:c5:00.0", "0000:c6:00.0", "0000:c7:00.0"}) {
        t.pci(T::at_numa(numa[4]), nvswitch, 0x10de, 0x1af1, 0x0680);
    }
    t.pci(T::at_numa(numa[0]), "0000:e2:00.0", 0x1a03, 0x2000, 0x0300);
    if (argc > 1) {
        t.write(argv[1]);
    } else {
        std::cout << t.xml();
    }
    return 0;
}
