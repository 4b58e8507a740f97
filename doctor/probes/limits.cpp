#include "base/sysroot.hpp"
#include "doctor/probes/table.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <sstream>
#include <sys/resource.h>
#include <sys/statfs.h>

namespace doctor::probes {

namespace {

constexpr double gib_bytes = 1024.0 * 1024.0 * 1024.0;

// The byte count of a tmpfs `size=` option ("65536k", "16g", "1073741824"), or nullopt for a
// percentage or anything unreadable. The kernel prints it as "<n>k" in /proc/mounts.
std::optional<unsigned long long> tmpfs_size(const std::string& text)
{
    unsigned long long n = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, n);
    if (ec != std::errc() || ptr == text.data()) {
        return std::nullopt;
    }
    std::string suffix(ptr, end);
    if (suffix.empty()) {
        return n;
    }
    if (suffix.size() != 1) {
        return std::nullopt;
    }
    int shift = 0;
    switch (suffix[0]) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    default:
        return std::nullopt; // '%' of RAM, or garbage
    }
    return n << shift;
}

// /dev/shm: from the mount options when the size is there, else from statfs.
facts::ShmFacts shm_facts(const base::Sysroot& root)
{
    facts::ShmFacts shm;
    shm.exists = root.exists("/dev/shm");
    shm.mounted = false;
    if (auto mounts = root.read("/proc/mounts")) {
        std::istringstream in(*mounts);
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string device, mount_point, fstype, options;
            if (!(fields >> device >> mount_point >> fstype >> options) || mount_point != "/dev/shm") {
                continue;
            }
            // The last mount on /dev/shm is the one in effect.
            shm.mounted = true;
            shm.fstype = fstype;
            shm.options = options;
        }
    } else {
        shm.mounts_unreadable = true;
    }
    if (shm.options) {
        std::istringstream opts(*shm.options);
        std::string opt;
        while (std::getline(opts, opt, ',')) {
            if (opt.rfind("size=", 0) != 0) {
                continue;
            }
            if (auto bytes = tmpfs_size(opt.substr(5))) {
                if (*bytes == 0) {
                    shm.unlimited = true; // tmpfs size=0: no limit
                } else {
                    shm.bytes = *bytes;
                }
                shm.source = "mount options";
            }
        }
    }
    if (!shm.bytes && !shm.unlimited && shm.exists) {
        struct statfs st { };
        const std::string path = root.path("/dev/shm").string();
        if (statfs(path.c_str(), &st) == 0) {
            shm.bytes = static_cast<unsigned long long>(st.f_blocks) * static_cast<unsigned long long>(st.f_frsize);
            shm.source = "statfs";
        } else {
            shm.error = fmt::format("statfs {}: {}", path, std::strerror(errno));
        }
    }
    return shm;
}

nlohmann::json rlimit_value(rlim_t v)
{
    return v == RLIM_INFINITY ? nlohmann::json("unlimited") : nlohmann::json(static_cast<unsigned long long>(v));
}

facts::RLimitFacts rlimit_facts(int resource)
{
    rlimit rl{};
    facts::RLimitFacts out;
    if (getrlimit(resource, &rl) != 0) {
        out.error = fmt::format("getrlimit: {}", std::strerror(errno));
    } else {
        out.soft = rlimit_value(rl.rlim_cur);
        out.hard = rlimit_value(rl.rlim_max);
    }
    return out;
}

std::string size_text(double bytes)
{
    if (bytes >= gib_bytes) {
        return fmt::format("{:.1f} GiB", bytes / gib_bytes);
    }
    if (bytes >= 1024.0 * 1024.0) {
        return fmt::format("{:.0f} MiB", bytes / (1024.0 * 1024.0));
    }
    return fmt::format("{:.0f} KiB", bytes / 1024.0);
}

std::string limit_text(const std::optional<facts::LimitValue>& l, bool bytes)
{
    if (!l) {
        return "unknown";
    }
    if (l->unlimited) {
        return "unlimited";
    }
    return bytes ? size_text(static_cast<double>(l->value)) : std::to_string(l->value);
}

/// A soft or hard limit as the facts have it, for a message.
std::string shown(const std::optional<nlohmann::json>& v)
{
    return v ? facts::shown(*v) : std::string("missing");
}

void judge_shm(const facts::ShmFacts& shm, const Policy& policy, Findings& out)
{
    const std::string subject = "/dev/shm";
    const nlohmann::json seen = facts::write(shm);
    if (!shm.exists) {
        out.add("limits.shm_missing", subject,
            "does not exist: NCCL's shared-memory transport and PyTorch DataLoader workers "
            "need it",
            seen);
        return;
    }
    if (shm.unlimited.value_or(false)) {
        out.add("limits.shm_ok", subject, "no size limit (tmpfs size=0)", seen);
        return;
    }
    if (!shm.bytes) {
        out.add("limits.shm_unknown", subject, fmt::format("size not checked: {}", shm.error.value_or("size unknown")),
            seen);
        return;
    }
    const double bytes = static_cast<double>(*shm.bytes);
    const double min = policy.min_shm_gib * gib_bytes;
    if (bytes < min) {
        out.add("limits.shm_small", subject,
            fmt::format("{}, below {} (policy limits.min_shm_gib): NCCL's shared-memory "
                        "transport and DataLoader workers run out of room ('Bus error', 'unhandled "
                        "system error')",
                size_text(bytes), size_text(min)),
            seen);
        return;
    }
    out.add("limits.shm_ok", subject, fmt::format("{}, at least {}", size_text(bytes), size_text(min)), seen);
}

void judge_memlock(const facts::RLimitFacts& memlock, const Policy& policy, Findings& out)
{
    const std::string subject = "locked memory (ulimit -l)";
    const nlohmann::json seen = facts::write(memlock);
    if (memlock.error) {
        out.add("limits.memlock_unknown", subject, fmt::format("memlock not checked: {}", *memlock.error), seen);
        return;
    }
    const auto soft = facts::limit_value(memlock.soft);
    const auto hard = facts::limit_value(memlock.hard);
    if (!soft) {
        out.add("limits.memlock_unknown", subject,
            fmt::format("memlock not checked: unreadable soft limit {}", shown(memlock.soft)), seen);
        return;
    }
    if (policy.memlock_unlimited && !soft->unlimited) {
        out.add("limits.memlock_limited", subject,
            fmt::format("limited to {} (hard {}): InfiniBand/RoCE memory registration "
                        "fails or NCCL falls back ('NET/IB : Unable to register memory')",
                limit_text(soft, true), limit_text(hard, true)),
            seen);
        return;
    }
    out.add("limits.memlock_ok", subject,
        fmt::format("{}{}", limit_text(soft, true),
            policy.memlock_unlimited ? "" : " (policy limits.memlock_unlimited is off)"),
        seen);
}

void judge_nofile(const facts::RLimitFacts& nofile, const Policy& policy, Findings& out)
{
    const std::string subject = "open files (ulimit -n)";
    nlohmann::json seen = facts::write(nofile);
    if (nofile.error) {
        out.add("limits.nofile_unknown", subject, fmt::format("open files limit not checked: {}", *nofile.error), seen);
        return;
    }
    const auto soft = facts::limit_value(nofile.soft);
    const auto hard = facts::limit_value(nofile.hard);
    if (!soft) {
        out.add("limits.nofile_unknown", subject,
            fmt::format("open files limit not checked: unreadable soft limit {}", shown(nofile.soft)), seen);
        return;
    }
    if (!soft->unlimited && soft->value < policy.min_nofile) {
        // The remedy names the policy's minimum.
        seen["min"] = policy.min_nofile;
        out.add("limits.nofile_low", subject,
            fmt::format("{} (hard {}), below {} (policy limits.min_nofile): many "
                        "ranks, DataLoader workers and NCCL sockets fail with 'Too many open files'",
                limit_text(soft, false), limit_text(hard, false), policy.min_nofile),
            seen);
        return;
    }
    out.add(
        "limits.nofile_ok", subject, fmt::format("{}, at least {}", limit_text(soft, false), policy.min_nofile), seen);
}

} // namespace

// /dev/shm size and this process's resource limits. The limits are those of gpudoctor itself,
// so it should run the way the job runs (in the container, under srun).
Collector limits_collector()
{
    return {"limits", [](const CollectContext& ctx) {
                base::Sysroot root(ctx.sysroot);
                return facts::write(
                    facts::LimitsFacts{shm_facts(root), rlimit_facts(RLIMIT_MEMLOCK), rlimit_facts(RLIMIT_NOFILE)});
            }};
}

Probe limits_probe()
{
    Probe p;
    p.name = "limits";
    p.summary = "/dev/shm size, locked-memory and open-files limits against the policy";
    p.collectors = {"limits"};
    p.codes = {
        {"limits.shm_ok", Severity::pass, "/dev/shm is big enough",
            "/dev/shm is at least the policy's limits.min_shm_gib.", ""},
        {"limits.shm_small", Severity::warn, "/dev/shm is smaller than the policy allows",
            "NCCL's shared-memory transport puts its buffers in /dev/shm, and PyTorch DataLoader workers pass "
            "batches through it. Docker's default of 64 MB is far too small: jobs die with 'Bus error' or NCCL "
            "'unhandled system error ... failed to extend /dev/shm'.",
            "give the container a bigger /dev/shm (docker: --shm-size=16g or --ipc=host; Kubernetes: "
            "an emptyDir with medium: Memory at /dev/shm); on a host: mount -o remount,size=16G /dev/shm"},
        {"limits.shm_missing", Severity::fail, "/dev/shm does not exist",
            "Without /dev/shm NCCL cannot set up its shared-memory transport and Python multiprocessing fails.",
            "mount a tmpfs on /dev/shm (docker: --shm-size=16g or --ipc=host; Kubernetes: an emptyDir "
            "with medium: Memory mounted at /dev/shm)"},
        {"limits.shm_unknown", Severity::skip, "/dev/shm size not checked",
            "Neither the mount options nor statfs gave the size of /dev/shm.", ""},
        {"limits.memlock_ok", Severity::pass, "locked-memory limit is fine",
            "The locked-memory limit is unlimited (or the policy does not require it).", ""},
        {"limits.memlock_limited", Severity::warn, "locked memory is limited",
            "InfiniBand and RoCE (and GPUDirect RDMA) pin the buffers they register; with a locked-memory limit "
            "registration fails and NCCL reports 'NET/IB : Unable to register memory' or falls back to sockets. "
            "These are the limits of the gpudoctor process: run it the way the job runs (in the container, under "
            "srun) to see the job's.",
            "raise it where the job starts (ulimit -l unlimited) where the hard limit allows it; else set '* - memlock "
            "unlimited' in /etc/security/limits.conf, LimitMEMLOCK=infinity for slurmd or the service that starts "
            "jobs, or docker run --ulimit memlock=-1"},
        {"limits.memlock_unknown", Severity::skip, "locked-memory limit not checked",
            "getrlimit(RLIMIT_MEMLOCK) gave no answer.", ""},
        {"limits.nofile_ok", Severity::pass, "open-files limit is fine",
            "The open-files limit is at least limits.min_nofile.", ""},
        {"limits.nofile_low", Severity::warn, "open-files limit is low",
            "Many ranks per node, DataLoader workers and NCCL's sockets each hold file descriptors; a low limit "
            "fails with 'Too many open files'.",
            "raise it where the job starts (ulimit -n {min}) where the hard limit allows it; else raise the hard "
            "limit: '* - nofile {min}' in /etc/security/limits.conf, LimitNOFILE= for slurmd, or docker run --ulimit "
            "nofile={min}:{min}"},
        {"limits.nofile_unknown", Severity::skip, "open-files limit not checked",
            "getrlimit(RLIMIT_NOFILE) gave no answer.", ""},
    };
    p.judge = [](const Facts& facts, const Policy& policy, Findings& out) {
        const facts::LimitsFacts& limits = *facts.limits().get();
        judge_shm(limits.shm, policy, out);
        judge_memlock(limits.memlock, policy, out);
        judge_nofile(limits.nofile, policy, out);
    };
    return p;
}

} // namespace doctor::probes
