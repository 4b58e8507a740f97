#include "doctor/facts/node.hpp"

namespace doctor::facts {

namespace {

/// Reads one collector's JSON into `into`: its facts, or its error.
template <typename T>
void read_into(Collected<T>& into, const nlohmann::json& j, const std::string& collector, const std::string& origin)
{
    if (j.is_object() && j.contains("error")) {
        const auto& e = j["error"];
        into.error = e.is_string() ? e.get<std::string>() : e.dump();
        return;
    }
    T value{};
    Reader(origin, collector).read(j, value, "");
    into.facts = std::move(value);
}

/// Writes the facts of one collector read into its struct (those of a broken one stay as they came).
template <typename T> void write_into(nlohmann::json& out, const char* collector, const Collected<T>& from)
{
    if (from.facts) {
        out[collector] = write_struct(*from.facts);
    }
}

} // namespace

NodeFacts NodeFacts::read(const nlohmann::json& document, const std::string& origin)
{
    NodeFacts out;
    if (!document.is_object()) {
        throw base::Error(
            fmt::format("{}: the facts are {}, expected an object of each collector's facts", origin, shown(document)));
    }
    for (const auto& [collector, facts] : document.items()) {
        out.add(collector, facts, origin);
    }
    return out;
}

void NodeFacts::add(const std::string& collector, const nlohmann::json& facts, const std::string& origin)
{
    m_raw[collector] = facts;
    each_field(*this, [&](const char* name, auto& slot) {
        if (collector == name) {
            read_into(slot, facts, collector, origin);
        }
    });
}

void NodeFacts::add_error(const std::string& collector, const std::string& error)
{
    add(collector, nlohmann::json{{"error", error}}, "");
}

nlohmann::json NodeFacts::write() const
{
    nlohmann::json out = m_raw;
    each_field(*this, [&](const char* name, const auto& slot) { write_into(out, name, slot); });
    return out;
}

bool NodeFacts::has(std::string_view collector) const
{
    return m_raw.contains(collector);
}

std::string NodeFacts::error(std::string_view collector) const
{
    const auto it = m_raw.find(collector);
    if (it == m_raw.end() || !it->is_object()) {
        return "";
    }
    const auto e = it->find("error");
    return e != it->end() && e->is_string() ? e->get<std::string>() : "";
}

const nlohmann::json* NodeFacts::raw(std::string_view collector) const
{
    const auto it = m_raw.find(collector);
    return it == m_raw.end() ? nullptr : &*it;
}

} // namespace doctor::facts
