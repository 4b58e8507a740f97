#include "doctor/engine/snapshot.hpp"

#include "base/error.hpp"

#include <cstdint>
#include <fmt/format.h>

namespace doctor::engine {

namespace {

using nlohmann::json;
using Ceilings = SnapshotCeilings;

/// The error of a collector that broke, when there: text of at most the string ceiling. (The
/// facts of the collectors read into a struct of their own are checked by doctor::facts.)
void read_error(const std::string& file, const std::string& collector, const json& collected)
{
    if (!collected.is_object()) {
        return; // judged as a collector of the wrong shape, where the probe that reads it is named
    }
    const auto it = collected.find("error");
    if (it != collected.end() && !it->is_null()) {
        std::string error;
        facts::Reader(file, collector).read(*it, error, "error");
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
            file, format.is_structured() || format.dump().size() > 200 ? facts::shown(format) : format.dump(),
            snapshot_format));
    }
    for (const auto& [collector, collected] : doc["facts"].items()) {
        read_error(file, collector, collected);
    }
    return Facts::read(doc["facts"], file);
}

} // namespace doctor::engine
