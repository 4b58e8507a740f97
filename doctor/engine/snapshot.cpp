#include "doctor/engine/snapshot.hpp"

#include "base/error.hpp"
#include "base/pci_address.hpp"

#include <climits>
#include <cstdint>
#include <fmt/format.h>
#include <functional>

namespace doctor::engine {

namespace {

using nlohmann::json;
using Ceilings = SnapshotCeilings;

/// A value as an error message shows it: strings quoted and cut short, lists and objects by kind.
std::string shown(const json& value)
{
    if (value.is_string()) {
        return base::quote_input(value.get_ref<const std::string&>());
    }
    if (value.is_array()) {
        return "a list";
    }
    if (value.is_object()) {
        return "an object";
    }
    return value.dump();
}

/// Checks the facts of one collector, naming the file, the collector and the field in its errors.
class FactsReader {
public:
    FactsReader(const std::string& file, const std::string& collector) : m_file(file), m_collector(collector) { }

    [[noreturn]] void bad(const std::string& field, const std::string& why) const
    {
        throw base::Error(fmt::format("{}: the {} facts are not as gpudoctor snapshot writes them ({} {}); write "
                                      "the snapshot again with 'gpudoctor snapshot > node.json'",
            m_file, m_collector, field, why));
    }

    /// The entries of the list `key` of `parent` (none when absent or null), each checked by `entry`.
    void each(const json& parent, const char* key, const std::string& field, std::size_t ceiling, const char* what,
        const std::function<void(const json&, const std::string&)>& entry) const
    {
        auto it = parent.find(key);
        if (it == parent.end() || it->is_null()) {
            return;
        }
        if (!it->is_array()) {
            bad(field, fmt::format("is {}, expected a list", shown(*it)));
        }
        if (it->size() > ceiling) {
            throw base::Error(fmt::format("{}: the {} facts list {} {} ({}), more than the {} a snapshot of one node "
                                          "may hold; write the snapshot on that node with 'gpudoctor snapshot > "
                                          "node.json'",
                m_file, m_collector, it->size(), what, field, ceiling));
        }
        for (std::size_t i = 0; i < it->size(); ++i) {
            entry((*it)[i], fmt::format("{}[{}]", field, i));
        }
    }

    /// `value` must be an object, as the checks read their fields by name.
    void object(const json& value, const std::string& field) const
    {
        if (!value.is_object()) {
            bad(field, fmt::format("is {}, expected an object", shown(value)));
        }
    }

    /// The count `key` of `object`, when there: a whole number from 0 to `most`.
    void count(const json& object, const char* key, const std::string& field, std::uint64_t most = UINT64_MAX,
        const char* what = "a count") const
    {
        auto it = object.find(key);
        if (it == object.end() || it->is_null()) {
            return;
        }
        if (!it->is_number_unsigned() || it->get<std::uint64_t>() > most) {
            bad(field + "." + key,
                most == UINT64_MAX ? fmt::format("is {}, expected {}, 0 or more", shown(*it), what)
                                   : fmt::format("is {}, expected {} from 0 to {}", shown(*it), what, most));
        }
    }

    /// A GPU index, NVML's or hwloc's: 0 up to the GPU ceiling.
    void gpu_index(const json& object, const char* key, const std::string& field) const
    {
        count(object, key, field, Ceilings::gpus - 1, "a GPU index");
    }

    /// The text `key` of `object`, when there: a string of at most the string ceiling.
    void text(const json& object, const char* key, const std::string& field) const
    {
        auto it = object.find(key);
        if (it == object.end() || it->is_null()) {
            return;
        }
        if (!it->is_string()) {
            bad(field + "." + key, fmt::format("is {}, expected a string", shown(*it)));
        }
        if (it->get_ref<const std::string&>().size() > Ceilings::string) {
            bad(field + "." + key,
                fmt::format(
                    "is {} bytes long, more than {}", it->get_ref<const std::string&>().size(), Ceilings::string));
        }
    }

    /// The PCI address `key` of `object`, when there ("0000:1b:00.0" or another spelling NVML, CUDA or hwloc use).
    void bus_id(const json& object, const char* key, const std::string& field) const
    {
        text(object, key, field);
        auto it = object.find(key);
        if (it != object.end() && it->is_string() && !base::PciAddress::parse(it->get_ref<const std::string&>())) {
            bad(field + "." + key, fmt::format("is {}, expected a PCI address such as 0000:1b:00.0", shown(*it)));
        }
    }

private:
    const std::string& m_file;
    const std::string& m_collector;
};

void read_topology(const json& topology, const FactsReader& r)
{
    for (const char* key : {"source", "hostname", "allowed_cpus"}) {
        r.text(topology, key, "topology");
    }
    r.count(topology, "cores", "topology");
    r.each(topology, "numa_nodes", "numa_nodes", Ceilings::devices, "NUMA nodes",
        [&](const json& n, const std::string& field) {
            r.object(n, field);
            r.count(n, "os_index", field);
            r.text(n, "cpus", field);
            r.count(n, "memory", field);
        });
    r.each(topology, "gpus", "gpus", Ceilings::gpus, "GPUs", [&](const json& g, const std::string& field) {
        r.object(g, field);
        r.gpu_index(g, "index", field);
        r.bus_id(g, "bus_id", field);
        r.text(g, "name", field);
        r.text(g, "cpus", field);
        r.text(g, "hca", field);
        r.each(g, "numa", field + ".numa", Ceilings::devices, "NUMA nodes of one GPU",
            [&](const json& node, const std::string& at) {
                if (!node.is_number_unsigned()) {
                    r.bad(at, fmt::format("is {}, expected a NUMA node number, 0 or more", shown(node)));
                }
            });
    });
    r.each(topology, "links", "links", Ceilings::pairs, "GPU pairs", [&](const json& l, const std::string& field) {
        r.object(l, field);
        r.bus_id(l, "a", field);
        r.bus_id(l, "b", field);
        r.text(l, "link", field);
    });
    r.each(topology, "hcas", "hcas", Ceilings::devices, "HCAs", [&](const json& h, const std::string& field) {
        r.object(h, field);
        r.text(h, "name", field);
        r.bus_id(h, "bus_id", field);
        r.text(h, "cpus", field);
    });
}

void read_pci(const json& pci, const FactsReader& r)
{
    r.each(pci, "gpus", "gpus", Ceilings::gpus, "GPUs", [&](const json& g, const std::string& field) {
        r.object(g, field);
        r.bus_id(g, "bus_id", field);
        r.text(g, "iommu_type", field);
    });
    r.each(pci, "bridges", "bridges", Ceilings::devices, "PCI bridges", [&](const json& b, const std::string& field) {
        r.object(b, field);
        r.bus_id(b, "bus_id", field);
        r.text(b, "acs_control", field);
    });
}

/// The collectors whose values the checks read and show; the others' facts are judged by shape.
struct CollectorReader {
    const char* collector;
    void (*read)(const json& facts, const FactsReader& r);
};
constexpr CollectorReader collector_readers[] = {{"topology", read_topology}, {"pci", read_pci}};

/// The facts of one collector that the checks read, against the ceilings.
void read_collector(const std::string& file, const std::string& collector, const json& facts)
{
    if (!facts.is_object()) {
        return; // judged as a collector of the wrong shape, where the probe that reads it is named
    }
    const FactsReader r(file, collector);
    r.text(facts, "error", collector);
    for (const auto& reader : collector_readers) {
        if (collector == reader.collector) {
            reader.read(facts, r);
        }
    }
}

/// nlohmann's own tree builder (the one json::parse uses) with the snapshot's ceilings: it counts
/// the entries of every list and the nesting as the text is read, and stops at the first past its
/// ceiling (base::Error) with only that much built. A syntax error throws, as json::parse does.
class BoundedTree {
public:
    using Dom = nlohmann::detail::json_sax_dom_parser<json>;

    BoundedTree(json& root, const std::string& file) : m_dom(root), m_file(file) { }

    bool null() { return value() && m_dom.null(); }
    bool boolean(bool v) { return value() && m_dom.boolean(v); }
    bool number_integer(json::number_integer_t v) { return value() && m_dom.number_integer(v); }
    bool number_unsigned(json::number_unsigned_t v) { return value() && m_dom.number_unsigned(v); }
    bool number_float(json::number_float_t v, const json::string_t& s) { return value() && m_dom.number_float(v, s); }
    bool string(json::string_t& v) { return value() && m_dom.string(v); }
    bool binary(json::binary_t& v) { return value() && m_dom.binary(v); }
    bool start_object(std::size_t n) { return open(false) && m_dom.start_object(n); }
    bool key(json::string_t& k) { return m_dom.key(k); }
    bool end_object() { return close() && m_dom.end_object(); }
    bool start_array(std::size_t n) { return open(true) && m_dom.start_array(n); }
    bool end_array() { return close() && m_dom.end_array(); }
    template <class Exception> bool parse_error(std::size_t at, const std::string& token, const Exception& e)
    {
        return m_dom.parse_error(at, token, e);
    }

private:
    struct Open {
        bool array;
        std::size_t entries;
    };

    // A value, or a list or object just opened, is one more entry of the list it is in.
    bool value()
    {
        if (!m_open.empty() && m_open.back().array && ++m_open.back().entries > Ceilings::array) {
            throw base::Error(fmt::format("{}: a list of the snapshot holds more than the {} entries it may hold; "
                                          "write the snapshot again with 'gpudoctor snapshot > node.json'",
                m_file, Ceilings::array));
        }
        return true;
    }

    bool open(bool array)
    {
        value();
        if (m_open.size() + 1 > Ceilings::depth) {
            throw base::Error(fmt::format("{}: the snapshot nests lists and objects more than {} deep; write the "
                                          "snapshot again with 'gpudoctor snapshot > node.json'",
                m_file, Ceilings::depth));
        }
        m_open.push_back(Open{array, 0});
        return true;
    }

    bool close()
    {
        m_open.pop_back();
        return true;
    }

    Dom m_dom;
    const std::string& m_file;
    std::vector<Open> m_open;
};

} // namespace

Facts read_snapshot(const std::string& text, const std::string& file)
{
    // Nesting and list lengths are bounded while the tree is built, so that nothing past them is
    // built. (nlohmann's parser with a callback can bound them too, but scans the enclosing list
    // at the end of every object in it: quadratic, 350 s for the 523,776 GPU pairs a snapshot may
    // hold.)
    json doc;
    BoundedTree tree(doc, file);
    try {
        json::sax_parse(text, &tree);
    } catch (const json::exception& e) {
        // parse_error, and out_of_range for a number beyond a double ("1e999").
        throw base::Error(fmt::format("{} is not a gpudoctor snapshot: {}", file, e.what()));
    }
    if (!doc.is_object() || !doc.contains("gpudoctor_snapshot") || !doc.contains("facts") ||
        !doc["facts"].is_object()) {
        throw base::Error(fmt::format("{} is not a gpudoctor snapshot: no \"gpudoctor_snapshot\" and \"facts\" "
                                      "keys; write one with 'gpudoctor snapshot > node.json'",
            file));
    }
    const auto& format = doc["gpudoctor_snapshot"];
    if (!format.is_number_unsigned() || format.get<std::uint64_t>() != snapshot_format) {
        throw base::Error(fmt::format("{}: snapshot format {}, but this gpudoctor reads format {}; write the "
                                      "snapshot with this version's 'gpudoctor snapshot'",
            file, format.is_structured() || format.dump().size() > 200 ? shown(format) : format.dump(),
            snapshot_format));
    }
    for (const auto& [collector, collected] : doc["facts"].items()) {
        read_collector(file, collector, collected);
    }
    return Facts::read(doc["facts"], file);
}

} // namespace doctor::engine
