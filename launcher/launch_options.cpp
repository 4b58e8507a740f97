#include "launcher/launch_options.hpp"

namespace launcher {

const char* to_string(BindMode mode)
{
    switch (mode) {
    case BindMode::numa:
        return "numa";
    case BindMode::socket:
        return "socket";
    case BindMode::cores:
        return "cores";
    case BindMode::none:
        return "none";
    }
    return "?";
}

const char* to_string(GpuVisibility visibility)
{
    return visibility == GpuVisibility::all ? "all" : "isolate";
}

const char* to_string(base::MemoryPolicy policy)
{
    switch (policy) {
    case base::MemoryPolicy::none:
        return "none";
    case base::MemoryPolicy::preferred:
        return "preferred";
    case base::MemoryPolicy::strict:
        return "strict";
    }
    return "?";
}

const char* to_string(NcclCheckMode mode)
{
    switch (mode) {
    case NcclCheckMode::off:
        return "off";
    case NcclCheckMode::end:
        return "end";
    case NcclCheckMode::init:
        return "init";
    }
    return "?";
}

const char* to_string(Profiler profiler)
{
    return profiler == Profiler::nsys ? "nsys" : "none";
}

const char* to_string(EnforceMode mode)
{
    return mode == EnforceMode::kill ? "kill" : "warn";
}

const char* to_string(NicBinding binding)
{
    switch (binding) {
    case NicBinding::ucx:
        return "ucx";
    case NicBinding::nccl:
        return "nccl";
    case NicBinding::none:
        return "none";
    }
    return "?";
}

} // namespace launcher
