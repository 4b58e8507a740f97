#pragma once

// The one reader and writer of the facts. Each collector's facts are a struct whose `fields()` name
// its JSON keys; read() takes a snapshot's JSON into the struct, checking every type and ceiling
// and naming the field that is wrong, and write() is what a collector sends its parent and what
// `gpudoctor snapshot` prints. A fact that may be missing is a std::optional: a rule sees that it
// is missing and says so, where a default would have passed.

#include "base/error.hpp"
#include "base/pci_address.hpp"

#include <cstddef>
#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace doctor::facts {

/// Ceilings on what one node's facts may hold. The largest real nodes have 8 to 16 GPUs (an NVL72
/// rack shows 4 to 8 per node), so these leave room without letting a hand-made snapshot make
/// judging (which looks at every GPU pair) take gigabytes.
struct Ceilings {
    static constexpr std::size_t gpus = 1024; ///< GPUs (and GPU indexes, 0 to gpus - 1) per node
    static constexpr std::size_t pairs = gpus * (gpus - 1) / 2; ///< GPU pairs: NVML's "pairs", hwloc's "links"
    static constexpr std::size_t devices = 4096; ///< HCAs, NUMA nodes, PCI bridges, ports
    static constexpr std::size_t array = 1 << 20; ///< entries of any other list
    static constexpr std::size_t depth = 32; ///< nesting of JSON arrays and objects
    static constexpr std::size_t string = 4096; ///< bytes of a name, bus id or version the checks show
    static constexpr std::size_t text = 1 << 20; ///< bytes of a command's output or a file kept whole
};

/// What a value is, beyond its C++ type: a GPU index, a PCI address, long text.
enum class Kind { plain, gpu_index, bus_id, text };

/// One JSON key of a facts struct: the member it is read into, whether it must be there, how many
/// entries a list of it may hold, and how a missing optional value is written.
template <typename S, typename T> struct Field {
    const char* key;
    T S::*member;
    std::size_t most = 0; ///< a list's most entries (0: Ceilings::array)
    Kind kind = Kind::plain;
    /// Always written: `null` for an empty optional (left out by default), so that a snapshot
    /// without the key is not as gpudoctor writes it.
    bool null_when_missing = false;
    const char* what = "entries"; ///< what a list holds, for its ceiling's message: "GPUs"
};

template <typename S, typename T>
constexpr Field<S, T> field(const char* key, T S::*member, std::size_t most = 0, Kind kind = Kind::plain)
{
    return Field<S, T>{key, member, most, kind, false, "entries"};
}

/// A list of at most `most` entries, each a `what` ("GPUs", "GPU pairs").
template <typename S, typename T>
constexpr Field<S, T> list(const char* key, T S::*member, std::size_t most, const char* what, Kind kind = Kind::plain)
{
    return Field<S, T>{key, member, most, kind, false, what};
}

/// A value the collector always writes, as `null` when it has none.
template <typename S, typename T> constexpr Field<S, T> nullable(const char* key, T S::*member, Kind kind = Kind::plain)
{
    return Field<S, T>{key, member, 0, kind, true, "entries"};
}

/// Calls fn(key, member) for each field of `value`, a struct with fields(), in their order.
template <typename S, typename Fn> void each_field(S& value, Fn&& fn)
{
    std::apply([&](const auto&... f) { (fn(f.key, value.*(f.member)), ...); }, std::remove_const_t<S>::fields());
}

template <typename T> struct is_optional : std::false_type {
};
template <typename T> struct is_optional<std::optional<T>> : std::true_type {
};
template <typename T> struct is_vector : std::false_type {
};
template <typename T> struct is_vector<std::vector<T>> : std::true_type {
};
template <typename T> struct is_map : std::false_type {
};
template <typename T> struct is_map<std::map<std::string, T>> : std::true_type {
};
template <typename T>
concept Described = requires
{
    T::fields();
};

/// Reads facts of one collector, naming the file, the collector and the field in its errors:
/// "FILE: the nvml facts are not as gpudoctor snapshot writes them (gpus[3].bus_id is 12,
/// expected a string); write the snapshot again with 'gpudoctor snapshot > node.json'".
class Reader {
public:
    Reader(std::string origin, std::string collector) : m_origin(std::move(origin)), m_collector(std::move(collector))
    {
    }

    [[noreturn]] void bad(const std::string& path, const std::string& why) const;
    [[noreturn]] void too_many(const std::string& path, std::size_t count, std::size_t most, const char* what) const;

    template <typename T>
    void read(const nlohmann::json& j, T& out, const std::string& path, std::size_t most = 0, Kind kind = Kind::plain,
        const char* what = "entries") const;

private:
    template <typename S> void read_struct(const nlohmann::json& j, S& out, const std::string& path) const;
    void read_string(const nlohmann::json& j, std::string& out, const std::string& path, Kind kind) const;
    template <typename N> void read_number(const nlohmann::json& j, N& out, const std::string& path, Kind kind) const;

    std::string m_origin;
    std::string m_collector;
};

/// A value as an error message shows it: strings quoted and cut short, lists and objects by kind.
std::string shown(const nlohmann::json& value);

template <typename T> nlohmann::json write(const T& value);

template <typename S> nlohmann::json write_struct(const S& value)
{
    nlohmann::json out = nlohmann::json::object();
    std::apply(
        [&](const auto&... f) {
            (
                [&] {
                    const auto& v = value.*(f.member);
                    if constexpr (is_optional<std::decay_t<decltype(v)>>::value) {
                        if (!v) {
                            if (f.null_when_missing) {
                                out[f.key] = nullptr;
                            }
                            return;
                        }
                    }
                    out[f.key] = write(v);
                }(),
                ...);
        },
        S::fields());
    return out;
}

template <typename T> nlohmann::json write(const T& value)
{
    if constexpr (is_optional<T>::value) {
        return value ? write(*value) : nlohmann::json(nullptr);
    } else if constexpr (is_vector<T>::value) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& v : value) {
            out.push_back(write(v));
        }
        return out;
    } else if constexpr (is_map<T>::value) {
        nlohmann::json out = nlohmann::json::object();
        for (const auto& [k, v] : value) {
            out[k] = write(v);
        }
        return out;
    } else if constexpr (Described<T>) {
        return write_struct(value);
    } else {
        return nlohmann::json(value);
    }
}

template <typename T>
void Reader::read(
    const nlohmann::json& j, T& out, const std::string& path, std::size_t most, Kind kind, const char* what) const
{
    if constexpr (is_optional<T>::value) {
        if (j.is_null()) {
            out.reset();
            return;
        }
        typename T::value_type v{};
        read(j, v, path, most, kind, what);
        out = std::move(v);
    } else if constexpr (is_vector<T>::value) {
        if (!j.is_array()) {
            bad(path, fmt::format("is {}, expected a list", shown(j)));
        }
        const std::size_t limit = most != 0 ? most : Ceilings::array;
        if (j.size() > limit) {
            too_many(path, j.size(), limit, what);
        }
        out.resize(j.size());
        for (std::size_t i = 0; i < j.size(); ++i) {
            read(j[i], out[i], fmt::format("{}[{}]", path, i), 0, kind);
        }
    } else if constexpr (is_map<T>::value) {
        if (!j.is_object()) {
            bad(path, fmt::format("is {}, expected an object", shown(j)));
        }
        for (const auto& [k, v] : j.items()) {
            if (k.size() > Ceilings::string) {
                bad(path, fmt::format("has a key of {} bytes, more than {}", k.size(), Ceilings::string));
            }
            read(v, out[k], fmt::format("{}.{}", path, k), 0, kind);
        }
    } else if constexpr (Described<T>) {
        read_struct(j, out, path);
    } else if constexpr (std::is_same_v<T, std::string>) {
        read_string(j, out, path, kind);
    } else if constexpr (std::is_same_v<T, bool>) {
        if (!j.is_boolean()) {
            bad(path, fmt::format("is {}, expected true or false", shown(j)));
        }
        out = j.get<bool>();
    } else if constexpr (std::is_arithmetic_v<T>) {
        read_number(j, out, path, kind);
    } else if constexpr (std::is_same_v<T, nlohmann::json>) {
        out = j;
    } else {
        static_assert(sizeof(T) == 0, "a type the facts do not hold");
    }
}

template <typename S> void Reader::read_struct(const nlohmann::json& j, S& out, const std::string& path) const
{
    if (!j.is_object()) {
        bad(path, fmt::format("is {}, expected an object", shown(j)));
    }
    std::apply(
        [&](const auto&... f) {
            (
                [&] {
                    auto& member = out.*(f.member);
                    using M = std::decay_t<decltype(member)>;
                    const std::string at = path.empty() ? std::string(f.key) : path + "." + f.key;
                    const auto it = j.find(f.key);
                    if (it == j.end() && (f.null_when_missing || !is_optional<M>::value)) {
                        bad(at, "is missing");
                    }
                    if (it == j.end()) {
                        return;
                    }
                    if (it->is_null() && !is_optional<M>::value) {
                        bad(at, "is null");
                    }
                    read(*it, member, at, f.most, f.kind, f.what);
                }(),
                ...);
        },
        S::fields());
}

template <typename N>
void Reader::read_number(const nlohmann::json& j, N& out, const std::string& path, Kind kind) const
{
    if constexpr (std::is_floating_point_v<N>) {
        if (!j.is_number()) {
            bad(path, fmt::format("is {}, expected a number", shown(j)));
        }
        out = j.get<N>();
    } else {
        // A whole number in N's range (JSON made in C++ keeps a signed 0; text gives unsigned).
        const bool non_negative = j.is_number_unsigned() || (j.is_number_integer() && j.get<std::int64_t>() >= 0);
        const bool fits = std::is_unsigned_v<N>
            ? non_negative && j.get<std::uint64_t>() <= std::numeric_limits<N>::max()
            : j.is_number_integer() &&
                (j.is_number_unsigned()
                        ? j.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<N>::max())
                        : j.get<std::int64_t>() >= std::numeric_limits<N>::min() &&
                            j.get<std::int64_t>() <= std::numeric_limits<N>::max());
        if (kind == Kind::gpu_index && (!fits || !non_negative || j.get<std::uint64_t>() >= Ceilings::gpus)) {
            bad(path, fmt::format("is {}, expected a GPU index from 0 to {}", shown(j), Ceilings::gpus - 1));
        }
        if (!fits) {
            bad(path,
                fmt::format(
                    "is {}, expected {}", shown(j), std::is_unsigned_v<N> ? "a count, 0 or more" : "a whole number"));
        }
        out = j.get<N>();
    }
}

/// The facts of one collector as they came: read into T, or the error the collector ran into (a
/// timeout, a crash), or not collected at all (a snapshot made with --only).
template <typename T> struct Collected {
    std::optional<T> facts;
    std::string error; ///< "" unless the collector broke
    bool present() const { return facts.has_value(); }
    bool broken() const { return !error.empty(); }
    const T* get() const { return facts ? &*facts : nullptr; }
};

} // namespace doctor::facts
