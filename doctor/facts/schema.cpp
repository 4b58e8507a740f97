#include "doctor/facts/schema.hpp"

#include "base/input_file.hpp"

namespace doctor::facts {

std::string shown(const nlohmann::json& value)
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

void Reader::bad(const std::string& path, const std::string& why) const
{
    throw base::Error(fmt::format("{}: the {} facts are not as gpudoctor snapshot writes them ({} {}); write the "
                                  "snapshot again with 'gpudoctor snapshot > node.json'",
        m_origin, m_collector, path.empty() ? m_collector : path, why));
}

void Reader::too_many(const std::string& path, std::size_t count, std::size_t most, const char* what) const
{
    throw base::Error(fmt::format("{}: the {} facts list {} {} ({}), more than the {} a snapshot of one node may "
                                  "hold; write the snapshot on that node with 'gpudoctor snapshot > node.json'",
        m_origin, m_collector, count, what, path, most));
}

void Reader::read_string(const nlohmann::json& j, std::string& out, const std::string& path, Kind kind) const
{
    if (!j.is_string()) {
        bad(path, fmt::format("is {}, expected a string", shown(j)));
    }
    const auto& text = j.get_ref<const std::string&>();
    const std::size_t most = kind == Kind::text ? Ceilings::text : Ceilings::string;
    if (text.size() > most) {
        bad(path, fmt::format("is {} bytes long, more than {}", text.size(), most));
    }
    if (kind == Kind::bus_id && !base::PciAddress::parse(text)) {
        bad(path, fmt::format("is {}, expected a PCI address such as 0000:1b:00.0", shown(j)));
    }
    out = text;
}

} // namespace doctor::facts
