#include "doctor/engine/facts.hpp"

namespace doctor::engine {

const nlohmann::json* collector_facts(const Facts& facts, const std::string& collector)
{
    return facts.raw(collector);
}

std::string collector_error(const Facts& facts, const std::string& collector)
{
    return facts.error(collector);
}

} // namespace doctor::engine
