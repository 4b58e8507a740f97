// Writes gpudoctor(1) at build time: the page's text (man/gpudoctor.1.in) with its FINDING CODES
// section made from the code tables, so that the page and `gpudoctor explain` say the same.
//   gpudoctor_man_page TEMPLATE OUTPUT
#include "base/atomic_file.hpp"
#include "base/error.hpp"
#include "base/input_file.hpp"
#include "doctor/commands/codes.hpp"

#include <fmt/format.h>
#include <string>

namespace {

/// The line in the template that the section replaces.
constexpr const char* marker = ".\\\" @FINDING_CODES@\n";

} // namespace

int main(int argc, char** argv)
{
    if (argc != 3) {
        fmt::print(stderr, "usage: gpudoctor_man_page TEMPLATE OUTPUT\n");
        return 2;
    }
    try {
        std::string page = base::read_input_file(argv[1], "man page template");
        const std::size_t at = page.find(marker);
        if (at == std::string::npos || page.find(marker, at + 1) != std::string::npos) {
            throw base::Error(fmt::format("{}: expected the line {} once", argv[1], marker));
        }
        page.replace(at, std::string(marker).size(), doctor::commands::render_codes_roff());
        base::write_file_atomically(argv[2], page, "man page");
    } catch (const base::Error& e) {
        fmt::print(stderr, "gpudoctor_man_page: {}\n", e.what());
        return 2;
    }
    return 0;
}
