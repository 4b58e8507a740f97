#pragma once

// Which deep-learning frameworks the node's python3 has, whether they are GPU builds and what they
// see (the "frameworks" collector; each framework's facts are what share/gpukit/frameworks.py
// printed). For the frameworks probe and fleet.

#include "doctor/facts/schema.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace doctor::facts {

/// One answer of the frameworks script: a value; null (Python's None: torch.version.cuda of a
/// CPU build); or "unknown" (this version lacks the call, or it raised: the error is in the
/// framework's `errors`). Held as std::optional<Answer<T>>, empty when the key is missing.
template <typename T> struct Answer {
    std::optional<T> value; ///< empty for null and "unknown"
    bool unknown = false; ///< "unknown"

    bool none() const { return !value && !unknown; }
};

/// The value of an answer, when the script gave one (not null, "unknown" or missing).
template <typename T> std::optional<T> known(const std::optional<Answer<T>>& answer)
{
    return answer ? answer->value : std::nullopt;
}

template <typename T> void to_json(nlohmann::json& out, const Answer<T>& answer)
{
    out = answer.value ? write(*answer.value) : answer.unknown ? nlohmann::json("unknown") : nlohmann::json(nullptr);
}

/// Reads an answer: null, "unknown" or a T (for nlohmann::json, as horovod's nccl_built: a number
/// or true/false).
template <typename T>
void read_answer(const Reader& reader, const nlohmann::json& j, std::optional<Answer<T>>& out, const std::string& path,
    std::size_t most)
{
    Answer<T> answer;
    if (j.is_string() && j.get_ref<const std::string&>() == "unknown") {
        answer.unknown = true;
    } else if (!j.is_null()) {
        T value{};
        if constexpr (std::is_same_v<T, nlohmann::json>) {
            if (!j.is_boolean() && !j.is_number_integer()) {
                reader.bad(path, fmt::format("is {}, expected a number, true or false", shown(j)));
            }
            value = j;
        } else {
            reader.read(j, value, path, most);
        }
        answer.value = std::move(value);
    }
    out = std::move(answer);
}

// The schema reads a missing key and null alike into an empty std::optional; an answer keeps null
// (a CPU build's torch.version.cuda) apart from a missing key, so it is read here.
template <>
inline void Reader::read(const nlohmann::json& j, std::optional<Answer<bool>>& out, const std::string& path,
    std::size_t most, Kind, const char*) const
{
    read_answer(*this, j, out, path, most);
}
template <>
inline void Reader::read(const nlohmann::json& j, std::optional<Answer<std::int64_t>>& out, const std::string& path,
    std::size_t most, Kind, const char*) const
{
    read_answer(*this, j, out, path, most);
}
template <>
inline void Reader::read(const nlohmann::json& j, std::optional<Answer<std::string>>& out, const std::string& path,
    std::size_t most, Kind, const char*) const
{
    read_answer(*this, j, out, path, most);
}
template <>
inline void Reader::read(const nlohmann::json& j, std::optional<Answer<std::vector<std::string>>>& out,
    const std::string& path, std::size_t most, Kind, const char*) const
{
    read_answer(*this, j, out, path, most);
}
template <>
inline void Reader::read(const nlohmann::json& j, std::optional<Answer<nlohmann::json>>& out, const std::string& path,
    std::size_t most, Kind, const char*) const
{
    read_answer(*this, j, out, path, most);
}

/// What every framework's facts hold.
struct FrameworkEntry {
    bool installed = false; ///< the module is there (importlib finds it)
    std::optional<std::string> import_error; ///< it is installed but did not import, or python3 died importing it
    std::optional<bool> timed_out; ///< python3 timed out while checking it
    std::optional<Answer<std::string>> version;
    std::optional<std::map<std::string, std::string>> errors; ///< the calls that raised, by key: their errors

    /// The keys every framework's facts start with.
    static constexpr auto entry_fields()
    {
        return std::tuple{field("installed", &FrameworkEntry::installed),
            field("import_error", &FrameworkEntry::import_error, 0, Kind::text),
            field("timed_out", &FrameworkEntry::timed_out), field("version", &FrameworkEntry::version),
            field("errors", &FrameworkEntry::errors, 0, Kind::text)};
    }
};

/// PyTorch.
struct TorchFacts : FrameworkEntry {
    std::optional<Answer<std::string>> cuda_build; ///< torch.version.cuda: "12.1"; null for a CPU build
    std::optional<Answer<std::string>> hip_build; ///< torch.version.hip: set for a ROCm build
    std::optional<Answer<bool>> cuda_available;
    std::optional<Answer<std::int64_t>> device_count;
    std::optional<std::string> cuda_warning; ///< the first warning CUDA gave while starting
    std::optional<Answer<std::int64_t>> cudnn_version; ///< 8902
    std::optional<Answer<std::string>> nccl_version; ///< "2.20.5", only for a CUDA build
    std::optional<Answer<bool>> nccl_available; ///< torch.distributed has its NCCL backend
    std::optional<Answer<bool>> mpi_available;

    static constexpr auto fields()
    {
        return std::tuple_cat(entry_fields(),
            std::tuple{field("cuda_build", &TorchFacts::cuda_build), field("hip_build", &TorchFacts::hip_build),
                field("cuda_available", &TorchFacts::cuda_available), field("device_count", &TorchFacts::device_count),
                field("cuda_warning", &TorchFacts::cuda_warning, 0, Kind::text),
                field("cudnn_version", &TorchFacts::cudnn_version), field("nccl_version", &TorchFacts::nccl_version),
                field("nccl_available", &TorchFacts::nccl_available),
                field("mpi_available", &TorchFacts::mpi_available)});
    }
};

/// TensorFlow.
struct TensorflowFacts : FrameworkEntry {
    std::optional<Answer<bool>> cuda_build; ///< tf.test.is_built_with_cuda()
    std::optional<Answer<std::string>> cuda_version; ///< the build's CUDA: "12.3"
    std::optional<Answer<std::int64_t>> device_count; ///< physical GPU devices it lists

    static constexpr auto fields()
    {
        return std::tuple_cat(entry_fields(),
            std::tuple{field("cuda_build", &TensorflowFacts::cuda_build),
                field("cuda_version", &TensorflowFacts::cuda_version),
                field("device_count", &TensorflowFacts::device_count)});
    }
};

/// JAX.
struct JaxFacts : FrameworkEntry {
    std::optional<Answer<std::string>> jaxlib_version; ///< "0.4.30+cuda12.cudnn89" for the old CUDA wheels
    std::optional<std::string> cuda_plugin; ///< "jax_cuda12_plugin"; null when none is installed
    std::optional<Answer<std::string>> backend; ///< jax.default_backend()
    std::optional<Answer<std::vector<std::string>>> platforms; ///< each device's platform: "gpu", "cpu", "rocm"
    std::optional<std::string> cuda_warning; ///< the first warning JAX logged while starting

    static constexpr auto fields()
    {
        return std::tuple_cat(entry_fields(),
            std::tuple{field("jaxlib_version", &JaxFacts::jaxlib_version), field("cuda_plugin", &JaxFacts::cuda_plugin),
                field("backend", &JaxFacts::backend),
                field("platforms", &JaxFacts::platforms, Ceilings::devices, Kind::plain),
                field("cuda_warning", &JaxFacts::cuda_warning, 0, Kind::text)});
    }
};

/// One Horovod binding (horovod.torch, horovod.tensorflow, horovod.mxnet).
struct HorovodBinding {
    std::optional<std::string> import_error; ///< it does not load
    std::optional<Answer<nlohmann::json>> nccl_built; ///< the NCCL version built with (0: none); true/false before 0.21
    std::optional<Answer<bool>> mpi_built;
    std::optional<Answer<bool>> gloo_built;
    std::optional<std::map<std::string, std::string>> errors;

    static constexpr auto fields()
    {
        return std::tuple{field("import_error", &HorovodBinding::import_error, 0, Kind::text),
            field("nccl_built", &HorovodBinding::nccl_built), field("mpi_built", &HorovodBinding::mpi_built),
            field("gloo_built", &HorovodBinding::gloo_built), field("errors", &HorovodBinding::errors, 0, Kind::text)};
    }
};

/// Horovod.
struct HorovodFacts : FrameworkEntry {
    /// Its binding for each installed framework it supports, by framework ("torch"); {} when none is installed.
    std::optional<std::map<std::string, HorovodBinding>> bindings;

    static constexpr auto fields()
    {
        return std::tuple_cat(entry_fields(), std::tuple{field("bindings", &HorovodFacts::bindings)});
    }
};

/// Apache MXNet.
struct MxnetFacts : FrameworkEntry {
    std::optional<Answer<bool>> cuda_build; ///< its CUDA feature is enabled
    std::optional<Answer<std::int64_t>> device_count;

    static constexpr auto fields()
    {
        return std::tuple_cat(entry_fields(),
            std::tuple{field("cuda_build", &MxnetFacts::cuda_build), field("device_count", &MxnetFacts::device_count)});
    }
};

/// Each framework the script looked at; missing when it was not looked at.
struct FrameworkSet {
    std::optional<TorchFacts> torch;
    std::optional<TensorflowFacts> tensorflow;
    std::optional<JaxFacts> jax;
    std::optional<HorovodFacts> horovod;
    std::optional<MxnetFacts> mxnet;

    static constexpr auto fields()
    {
        return std::tuple{field("torch", &FrameworkSet::torch), field("tensorflow", &FrameworkSet::tensorflow),
            field("jax", &FrameworkSet::jax), field("horovod", &FrameworkSet::horovod),
            field("mxnet", &FrameworkSet::mxnet)};
    }
};

/// The interpreter and what it said of each framework.
struct FrameworksFacts {
    std::optional<std::string> python; ///< always written: the interpreter run, null when none was found
    std::optional<std::string> python_shim; ///< a pyenv shim looked past
    std::optional<std::string> python_error; ///< why there is no interpreter, or why it did not answer for all
    std::optional<std::string> python_executable; ///< its sys.executable
    std::optional<std::string> python_version; ///< "3.11.7"
    std::optional<std::string> cuda_visible_devices; ///< as the interpreter saw it; missing when unset
    std::optional<std::vector<std::string>> not_checked; ///< frameworks it did not reach
    std::optional<FrameworkSet> frameworks;

    static constexpr auto fields()
    {
        return std::tuple{nullable("python", &FrameworksFacts::python, Kind::text),
            field("python_shim", &FrameworksFacts::python_shim, 0, Kind::text),
            field("python_error", &FrameworksFacts::python_error, 0, Kind::text),
            field("python_executable", &FrameworksFacts::python_executable, 0, Kind::text),
            field("python_version", &FrameworksFacts::python_version),
            field("cuda_visible_devices", &FrameworksFacts::cuda_visible_devices, 0, Kind::text),
            list("not_checked", &FrameworksFacts::not_checked, Ceilings::devices, "frameworks"),
            field("frameworks", &FrameworksFacts::frameworks)};
    }
};

} // namespace doctor::facts
