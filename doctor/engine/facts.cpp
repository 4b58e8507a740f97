#include "doctor/engine/facts.hpp"

namespace doctor::engine {

const nlohmann::json* collector_facts(const Facts& facts, const std::string& collector)
{
    if (!facts.is_object()) {
        return nullptr;
    }
    auto it = facts.find(collector);
    return it == facts.end() ? nullptr : &*it;
}

std::string collector_error(const Facts& facts, const std::string& collector)
{
    const nlohmann::json* f = collector_facts(facts, collector);
    if (f == nullptr || !f->is_object()) {
        return "";
    }
    auto it = f->find("error");
    return it != f->end() && it->is_string() ? it->get<std::string>() : "";
}

} // namespace doctor::engine
