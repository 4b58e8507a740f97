#include "base/pci_address.hpp"
#include "base/sysroot.hpp"
#include "doctor/probes/table.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <regex>

namespace doctor::probes {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t extended_config_size = 4096;
constexpr std::size_t first_extended_capability = 0x100;
constexpr std::uint16_t acs_capability_id = 0x000d;

std::uint32_t read_u32(const std::string& bytes, std::size_t at)
{
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at])) |
        static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 8 |
        static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 2])) << 16 |
        static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 3])) << 24;
}

// ACS facts of one bridge from its config space: not readable, with the reason, when the file is
// short (extended config space needs root); no ACS without the capability; else the ACS Control
// register and its redirect bits.
facts::PciBridge acs_of(const std::string& bdf, const base::Sysroot& root, const fs::path& dir)
{
    facts::PciBridge out;
    out.bus_id = bdf;
    // `dir` is the bridge's resolved directory on the host; its config is read as every sysfs file
    // is, through the sysroot (a regular file, at most 16 MiB).
    std::error_code ec;
    const fs::path relative = dir.lexically_relative(fs::weakly_canonical(root.root(), ec));
    std::optional<std::string> config;
    if (!ec && !relative.empty() && *relative.begin() != "..") {
        config = root.read("/" + relative.string() + "/config");
    }
    if (!config) {
        out.reason = "config missing";
        return out;
    }
    if (config->size() < extended_config_size) {
        out.reason = "unreadable (needs root)";
        out.config_bytes = config->size();
        return out;
    }
    out.readable = true;
    out.acs = false;
    std::size_t offset = first_extended_capability;
    for (int guard = 0; guard < 256 && offset >= first_extended_capability && offset + 8 <= config->size(); ++guard) {
        const std::uint32_t header = read_u32(*config, offset);
        if (header == 0 || header == 0xffffffff) {
            break;
        }
        if ((header & 0xffff) == acs_capability_id) {
            const std::uint16_t control = static_cast<std::uint16_t>(read_u32(*config, offset + 4) >> 16);
            out.acs = true;
            out.acs_offset = static_cast<unsigned>(offset);
            out.acs_control = fmt::format("0x{:04x}", control);
            out.source_validation = (control & 0x1) != 0;
            out.request_redirect = (control & 0x4) != 0;
            out.completion_redirect = (control & 0x8) != 0;
            break;
        }
        offset = (header >> 20) & 0xffc;
    }
    return out;
}

bool is_bdf(const std::string& name)
{
    static const std::regex bdf(R"([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])");
    return std::regex_match(name, bdf);
}

// The IOMMU as the kernel set it up: group types and the boot options that chose them.
facts::PciIommu iommu_facts(const base::Sysroot& root, const std::optional<std::string>& cmdline)
{
    facts::PciIommu out;
    std::error_code ec;
    for (fs::directory_iterator it(root.path("/sys/kernel/iommu_groups"), ec), end; !ec && it != end;
         it.increment(ec)) {
        ++out.groups;
        std::string group = it->path().filename().string();
        if (auto type = root.read_line("/sys/kernel/iommu_groups/" + group + "/type")) {
            ++out.types[*type];
        }
    }
    if (cmdline) {
        std::istringstream words(*cmdline);
        for (std::string w; words >> w;) {
            if (w.rfind("iommu", 0) == 0 || w.rfind("intel_iommu", 0) == 0 || w.rfind("amd_iommu", 0) == 0) {
                out.cmdline_options.push_back(w);
            }
        }
    }
    return out;
}

// Whether this is a virtual machine, and what says so.
facts::PciVm vm_facts(const base::Sysroot& root)
{
    static const char* const vendors[] = {"QEMU", "KVM", "Amazon EC2", "Microsoft", "Google", "VMware", "Xen",
        "innotek", "VirtualBox", "Parallels", "OpenStack", "Bochs"};
    facts::PciVm out;
    for (auto [file, into] : {std::pair{"/sys/class/dmi/id/sys_vendor", &out.sys_vendor},
             std::pair{"/sys/class/dmi/id/product_name", &out.product_name}}) {
        auto value = root.read_line(file);
        if (!value) {
            continue;
        }
        *into = *value;
        for (const char* v : vendors) {
            if (value->find(v) != std::string::npos) {
                out.virtual_machine = true;
                out.evidence = fmt::format("{} is '{}'", file, *value);
            }
        }
    }
    if (!out.virtual_machine) {
        if (auto cpuinfo = root.read("/proc/cpuinfo")) {
            static const std::regex flag(R"(^flags\s*:.*\bhypervisor\b)", std::regex::multiline);
            if (std::regex_search(*cpuinfo, flag)) {
                out.virtual_machine = true;
                out.evidence = "/proc/cpuinfo has the hypervisor flag";
            }
        }
    }
    return out;
}

} // namespace

// What decides whether GPU peer-to-peer traffic takes the short path: the IOMMU mode, whether
// this is a VM, and PCIe ACS on the bridges above each NVIDIA GPU (sysfs, config space).
Collector pci_collector()
{
    return {"pci", [](const CollectContext& ctx) {
                base::Sysroot root(ctx.sysroot);
                facts::PciFacts out;
                out.iommu = iommu_facts(root, root.read_line("/proc/cmdline"));
                out.vm = vm_facts(root);
                std::map<std::string, fs::path> bridges;
                std::error_code ec;
                const fs::path devices = root.path("/sys/bus/pci/devices");
                std::vector<std::string> names;
                for (fs::directory_iterator it(devices, ec), end; !ec && it != end; it.increment(ec)) {
                    names.push_back(it->path().filename().string());
                }
                std::sort(names.begin(), names.end());
                for (const auto& bdf : names) {
                    const std::string dir = "/sys/bus/pci/devices/" + bdf;
                    auto vendor = root.read_line(dir + "/vendor");
                    auto cls = root.read_line(dir + "/class");
                    if (!vendor || *vendor != "0x10de" || !cls ||
                        (cls->rfind("0x0302", 0) != 0 && cls->rfind("0x0300", 0) != 0)) {
                        continue;
                    }
                    facts::PciGpu gpu;
                    gpu.bus_id = bdf;
                    gpu.upstream_bridges.emplace();
                    std::error_code real_ec;
                    fs::path real = fs::canonical(devices / bdf, real_ec);
                    if (!real_ec) {
                        for (fs::path p = real.parent_path(); p.has_filename() && is_bdf(p.filename().string());
                             p = p.parent_path()) {
                            gpu.upstream_bridges->push_back(p.filename().string());
                            bridges.emplace(p.filename().string(), p);
                        }
                    }
                    if (auto group = fs::read_symlink(devices / bdf / "iommu_group", real_ec); !real_ec) {
                        gpu.iommu_group = group.filename().string();
                        gpu.iommu_type =
                            root.read_line("/sys/kernel/iommu_groups/" + group.filename().string() + "/type");
                    }
                    out.gpus.push_back(std::move(gpu));
                }
                for (const auto& [bdf, dir] : bridges) {
                    out.bridges.push_back(acs_of(bdf, root, dir));
                }
                return facts::write(out);
            }};
}

} // namespace doctor::probes
