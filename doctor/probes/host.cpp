#include "base/sysroot.hpp"
#include "doctor/probes/table.hpp"

#include <sys/utsname.h>
#include <thread>
#include <unistd.h>

namespace doctor::probes {

Collector host_collector()
{
    return {"host", [](const CollectContext& ctx) {
                nlohmann::json out;
                char name[256] = {};
                gethostname(name, sizeof name - 1);
                out["hostname"] = name;
                utsname u{};
                if (uname(&u) == 0) {
                    out["kernel"] = u.release;
                    out["machine"] = u.machine;
                }
                out["cpus_online"] = std::thread::hardware_concurrency();
                base::Sysroot root(ctx.sysroot);
                auto cmdline = root.read_line("/proc/cmdline");
                out["cmdline"] = cmdline ? nlohmann::json(*cmdline) : nlohmann::json(nullptr);
                out["sysroot"] = ctx.sysroot;
                out["in_container"] = root.exists("/.dockerenv") || root.exists("/run/.containerenv");
                return out;
            }};
}

} // namespace doctor::probes
