#pragma once

// The mpirun first in PATH, its flavour and version; for Open MPI its CUDA support and PML
// components; ucx_info's version (the "mpi" collector). For the mpi probe and fleet.

#include "doctor/facts/schema.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace doctor::facts {

/// How a command the collector ran went, within what was left of its deadline.
struct CommandRun {
    std::optional<std::string> not_run; ///< why it was not started: no time left, or the error starting it
    std::optional<int> exit_code;
    std::optional<bool> timed_out;
    std::optional<std::int64_t> timeout_ms; ///< the time it had, when it timed out

    /// The keys of a run, which each command's facts start with.
    static constexpr auto run_fields()
    {
        return std::tuple{field("not_run", &CommandRun::not_run, 0, Kind::text),
            field("exit_code", &CommandRun::exit_code), field("timed_out", &CommandRun::timed_out),
            field("timeout_ms", &CommandRun::timeout_ms)};
    }
};

/// `mpirun --version`.
struct MpirunVersion : CommandRun {
    std::optional<std::string> output; ///< its first 4 lines
    std::optional<std::string> flavour; ///< "Open MPI", "MPICH", "Intel MPI" or "unknown" (base::mpi_flavour)
    std::optional<std::string> version; ///< "4.1.5"; "" when the output has none

    static constexpr auto fields()
    {
        return std::tuple_cat(run_fields(),
            std::tuple{field("output", &MpirunVersion::output, 0, Kind::text),
                field("flavour", &MpirunVersion::flavour), field("version", &MpirunVersion::version)});
    }
};

/// Open MPI's build: from its component files (`source` "components", nothing run) or from
/// `ompi_info --parsable --all`.
struct OmpiInfo : CommandRun {
    std::optional<std::string> path; ///< the component directory read, or ompi_info; null: no ompi_info found
    std::optional<std::string> source; ///< "components" when read from the component files
    std::optional<std::string> version; ///< "4.1.5"
    std::optional<std::vector<std::string>> pml; ///< the PML components: "ob1", "ucx", ...
    std::optional<bool> pml_ucx;
    std::optional<bool> cuda_support; ///< built with CUDA; missing (or null) when not told
    std::optional<std::string> cuda_support_from; ///< which parameter or component said so
    std::optional<std::uint64_t> output_bytes; ///< the size of ompi_info's output

    static constexpr auto fields()
    {
        return std::tuple_cat(run_fields(),
            std::tuple{field("path", &OmpiInfo::path, 0, Kind::text), field("source", &OmpiInfo::source),
                field("version", &OmpiInfo::version), list("pml", &OmpiInfo::pml, Ceilings::devices, "PML components"),
                field("pml_ucx", &OmpiInfo::pml_ucx), field("cuda_support", &OmpiInfo::cuda_support),
                field("cuda_support_from", &OmpiInfo::cuda_support_from, 0, Kind::text),
                field("output_bytes", &OmpiInfo::output_bytes)});
    }
};

/// `ucx_info -v`.
struct UcxInfo : CommandRun {
    std::optional<std::string> path; ///< ucx_info; null when it is not in PATH
    std::optional<std::string> version; ///< "1.15.0"

    static constexpr auto fields()
    {
        return std::tuple_cat(run_fields(),
            std::tuple{field("path", &UcxInfo::path, 0, Kind::text), field("version", &UcxInfo::version)});
    }
};

/// The MPI the environment's PATH finds.
struct MpiFacts {
    std::optional<std::string> path_env; ///< PATH searched; null when unset
    std::optional<std::string> mpirun; ///< always written: null when no mpirun is in PATH
    std::optional<std::string> mpirun_real; ///< its real path, symbolic links resolved
    std::optional<MpirunVersion> mpirun_version; ///< when mpirun was found
    std::optional<OmpiInfo> ompi_info; ///< for Open MPI
    std::optional<UcxInfo> ucx;

    static constexpr auto fields()
    {
        return std::tuple{field("path_env", &MpiFacts::path_env, 0, Kind::text),
            nullable("mpirun", &MpiFacts::mpirun, Kind::text),
            field("mpirun_real", &MpiFacts::mpirun_real, 0, Kind::text),
            field("mpirun_version", &MpiFacts::mpirun_version), field("ompi_info", &MpiFacts::ompi_info),
            field("ucx", &MpiFacts::ucx)};
    }
};

} // namespace doctor::facts
