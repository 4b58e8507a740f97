#include "tests/support/topology_xml.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

namespace test_support {

namespace {

// hwloc bitmap string: comma-separated 32-bit words, most significant first.
std::string bitmap(const std::set<unsigned>& bits)
{
    if (bits.empty()) {
        return "0x0";
    }
    unsigned words = *bits.rbegin() / 32 + 1;
    std::string out;
    for (unsigned w = words; w-- > 0;) {
        std::uint32_t value = 0;
        for (unsigned b = 0; b < 32; ++b) {
            if (bits.count(w * 32 + b) != 0) {
                value |= 1U << b;
            }
        }
        out += fmt::format("{}0x{:08x}", out.empty() ? "" : ",", value);
    }
    return out;
}

std::string sets(const std::set<unsigned>& cpus, const std::set<unsigned>& nodes)
{
    return fmt::format(
        R"(cpuset="{0}" complete_cpuset="{0}" nodeset="{1}" complete_nodeset="{1}")", bitmap(cpus), bitmap(nodes));
}

} // namespace

unsigned TopologyXml::package()
{
    return m_packages++;
}

unsigned TopologyXml::numa(unsigned package, unsigned os_index, unsigned cores, unsigned smt)
{
    m_numa.push_back(Numa{package, os_index, cores, smt, false});
    return static_cast<unsigned>(m_numa.size() - 1);
}

void TopologyXml::gpu_memory_numa(unsigned package, unsigned os_index)
{
    m_numa.push_back(Numa{package, os_index, 0, 1, true});
}

unsigned TopologyXml::pci_switch(Attach where)
{
    m_switches.push_back(Switch{where});
    return static_cast<unsigned>(m_switches.size() - 1);
}

void TopologyXml::pci(Attach where, const std::string& bus_id, std::uint16_t vendor, std::uint16_t device,
    std::uint16_t class_id, std::vector<std::pair<std::string, int>> os_devices,
    std::vector<std::pair<std::string, std::string>> infos)
{
    m_pci.push_back(Pci{where, bus_id, vendor, device, class_id, std::move(os_devices), std::move(infos)});
}

void TopologyXml::gpu(Attach where, const std::string& bus_id, const std::string& uuid)
{
    if (uuid.empty()) {
        pci(where, bus_id, 0x10de, 0x20b0, 0x0302, {}, {{"PCIDevice", "GA100 [A100 SXM4 40GB]"}});
    } else {
        pci(where, bus_id, 0x10de, 0x20b0, 0x0302, {{"nvml" + bus_id.substr(5, 2), 1}},
            {{"PCIDevice", "GA100 [A100 SXM4 40GB]"}, {"GPUModel", "NVIDIA A100-SXM4-40GB"}, {"NVIDIAUUID", uuid}});
    }
}

void TopologyXml::hca(Attach where, const std::string& bus_id, const std::string& name)
{
    pci(where, bus_id, 0x15b3, 0x101b, 0x0207, {{name, 3}});
}

std::string TopologyXml::xml() const
{
    // Assign PUs: cores are numbered in NUMA order; PU numbers per the numbering mode.
    unsigned total_cores = 0;
    for (const auto& n : m_numa) {
        total_cores += n.cores;
    }
    struct CoreInfo {
        unsigned os_index;
        std::vector<unsigned> pus;
    };
    std::vector<std::vector<CoreInfo>> numa_cores(m_numa.size());
    unsigned core_index = 0;
    unsigned next_pu = 0;
    for (std::size_t i = 0; i < m_numa.size(); ++i) {
        for (unsigned c = 0; c < m_numa[i].cores; ++c, ++core_index) {
            CoreInfo core{core_index, {}};
            for (unsigned t = 0; t < m_numa[i].smt; ++t) {
                core.pus.push_back(m_linux_smt ? core_index + t * total_cores : next_pu++);
            }
            numa_cores[i].push_back(std::move(core));
        }
    }
    auto numa_cpus = [&](std::size_t i) {
        std::set<unsigned> out;
        for (const auto& core : numa_cores[i]) {
            out.insert(core.pus.begin(), core.pus.end());
        }
        return out;
    };
    std::vector<std::set<unsigned>> pkg_cpus(m_packages), pkg_nodes(m_packages);
    std::set<unsigned> all_cpus, all_nodes;
    for (std::size_t i = 0; i < m_numa.size(); ++i) {
        auto cpus = numa_cpus(i);
        if (m_numa[i].gpu_memory) {
            // hwloc gives GPU-memory nodes the cpuset of their package.
            continue;
        }
        pkg_cpus.at(m_numa[i].package).insert(cpus.begin(), cpus.end());
        all_cpus.insert(cpus.begin(), cpus.end());
    }
    for (std::size_t i = 0; i < m_numa.size(); ++i) {
        pkg_nodes.at(m_numa[i].package).insert(m_numa[i].os_index);
        all_nodes.insert(m_numa[i].os_index);
    }
    std::set<unsigned> allowed = all_cpus;
    if (m_allowed) {
        allowed = std::set<unsigned>(m_allowed->begin(), m_allowed->end());
    }

    unsigned gp = 1;
    std::string out;
    auto io_below = [&](Attach::Kind kind, unsigned index, const std::string& indent) {
        std::string s;
        std::vector<const Pci*> devices;
        for (const auto& p : m_pci) {
            if (p.where.kind == kind && p.where.index == index) {
                devices.push_back(&p);
            }
        }
        std::vector<unsigned> switches;
        for (unsigned sw = 0; sw < m_switches.size(); ++sw) {
            if (m_switches[sw].where.kind == kind && m_switches[sw].where.index == index) {
                switches.push_back(sw);
            }
        }
        if (devices.empty() && switches.empty()) {
            return s;
        }
        auto device_xml = [&](const Pci& p, const std::string& in) {
            std::string d = fmt::format("{}<object type=\"PCIDev\" gp_index=\"{}\" pci_busid=\"{}\" pci_type=\"{:04x} "
                                        "[{:04x}:{:04x}] [{:04x}:0000] a1\" pci_link_speed=\"0.000000\"",
                in, gp++, p.bus_id, p.class_id, p.vendor, p.device, p.vendor);
            std::vector<std::pair<std::string, std::string>> pci_infos, os_infos;
            for (const auto& info : p.infos) {
                (info.first.rfind("PCI", 0) == 0 ? pci_infos : os_infos).push_back(info);
            }
            if (p.os_devices.empty() && pci_infos.empty()) {
                return d + "/>\n";
            }
            d += ">\n";
            for (const auto& [k, v] : pci_infos) {
                d += fmt::format("{}  <info name=\"{}\" value=\"{}\"/>\n", in, k, v);
            }
            bool first = true;
            for (const auto& [name, type] : p.os_devices) {
                d += fmt::format(
                    "{}  <object type=\"OSDev\" gp_index=\"{}\" name=\"{}\" osdev_type=\"{}\"", in, gp++, name, type);
                if (first && !os_infos.empty()) {
                    d += ">\n";
                    for (const auto& [k, v] : os_infos) {
                        d += fmt::format("{}    <info name=\"{}\" value=\"{}\"/>\n", in, k, v);
                    }
                    d += in + "  </object>\n";
                } else {
                    d += "/>\n";
                }
                first = false;
            }
            return d + in + "</object>\n";
        };
        s += fmt::format("{}<object type=\"Bridge\" gp_index=\"{}\" bridge_type=\"0-1\" depth=\"0\" "
                         "bridge_pci=\"0000:[00-ff]\">\n",
            indent, gp++);
        for (const Pci* p : devices) {
            s += device_xml(*p, indent + "  ");
        }
        for (unsigned sw : switches) {
            s += fmt::format("{}  <object type=\"Bridge\" gp_index=\"{}\" bridge_type=\"1-1\" depth=\"1\" "
                             "bridge_pci=\"0000:[00-ff]\" pci_busid=\"0000:{:02x}:1f.0\" pci_type=\"0604 [10b5:8747] "
                             "[0000:0000] ca\" pci_link_speed=\"0.000000\">\n",
                indent, gp++, 0xf0 + sw);
            for (const auto& p : m_pci) {
                if (p.where.kind == Attach::Kind::pci_switch && p.where.index == sw) {
                    s += device_xml(p, indent + "    ");
                }
            }
            s += indent + "  </object>\n";
        }
        s += indent + "</object>\n";
        return s;
    };

    out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
           "<topology version=\"2.0\">\n";
    out += fmt::format("  <object type=\"Machine\" gp_index=\"{}\" os_index=\"0\" {} allowed_cpuset=\"{}\" "
                       "allowed_nodeset=\"{}\">\n",
        gp++, sets(all_cpus, all_nodes), bitmap(allowed), bitmap(all_nodes));
    out += fmt::format("    <info name=\"HostName\" value=\"{}\"/>\n", m_hostname);
    for (unsigned p = 0; p < m_packages; ++p) {
        out += fmt::format("    <object type=\"Package\" gp_index=\"{}\" os_index=\"{}\" {}>\n", gp++, p,
            sets(pkg_cpus[p], pkg_nodes[p]));
        std::vector<std::size_t> nodes;
        for (std::size_t i = 0; i < m_numa.size(); ++i) {
            if (m_numa[i].package == p) {
                nodes.push_back(i);
            }
        }
        std::size_t cpu_nodes =
            std::count_if(nodes.begin(), nodes.end(), [&](std::size_t i) { return !m_numa[i].gpu_memory; });
        const bool grouped = cpu_nodes > 1;
        for (std::size_t i : nodes) {
            const auto& n = m_numa[i];
            auto cpus = n.gpu_memory ? pkg_cpus[p] : numa_cpus(i);
            std::string in = grouped && !n.gpu_memory ? "        " : "      ";
            if (grouped && !n.gpu_memory) {
                out += fmt::format("      <object type=\"Group\" gp_index=\"{}\" {} kind=\"1001\" subkind=\"0\">\n",
                    gp++, sets(cpus, {n.os_index}));
            }
            out += fmt::format("{}<object type=\"NUMANode\" gp_index=\"{}\" os_index=\"{}\" {}{} "
                               "local_memory=\"{}\"/>\n",
                in, gp++, n.os_index, sets(cpus, {n.os_index}), n.gpu_memory ? " subtype=\"GPUMemory\"" : "",
                68719476736ULL);
            if (!n.gpu_memory) {
                for (const auto& core : numa_cores[i]) {
                    std::set<unsigned> pus(core.pus.begin(), core.pus.end());
                    out += fmt::format("{}<object type=\"Core\" gp_index=\"{}\" os_index=\"{}\" cpuset=\"{}\" "
                                       "complete_cpuset=\"{}\">\n",
                        in, gp++, core.os_index, bitmap(pus), bitmap(pus));
                    for (unsigned pu : core.pus) {
                        out += fmt::format("{}  <object type=\"PU\" gp_index=\"{}\" os_index=\"{}\" cpuset=\"{}\" "
                                           "complete_cpuset=\"{}\"/>\n",
                            in, gp++, pu, bitmap({pu}), bitmap({pu}));
                    }
                    out += in + "</object>\n";
                }
                out += io_below(Attach::Kind::numa, static_cast<unsigned>(i), in);
            }
            if (grouped && !n.gpu_memory) {
                out += "      </object>\n";
            }
        }
        out += io_below(Attach::Kind::package, p, "      ");
        out += "    </object>\n";
    }
    out += io_below(Attach::Kind::machine, 0, "    ");
    out += "  </object>\n</topology>\n";
    return out;
}

std::filesystem::path TopologyXml::write(const std::filesystem::path& path) const
{
    std::ofstream outf(path);
    outf << xml();
    if (!outf) {
        throw std::runtime_error("cannot write " + path.string());
    }
    return path;
}

} // namespace test_support
