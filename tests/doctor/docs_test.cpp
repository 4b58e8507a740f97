// The documentation lists what the code does: every finding code is in gpudoctor(1).
#include "doctor/codes.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

namespace {

std::string man_page()
{
    std::ifstream in(std::string(GPUKIT_SOURCE_DIR) + "/man/gpudoctor.1");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// groff writes a '-' as "\-".
std::string roff(std::string text)
{
    for (std::size_t at = 0; (at = text.find('-', at)) != std::string::npos; at += 2) {
        text.insert(at, "\\");
    }
    return text;
}

} // namespace

TEST(Docs, ManPageListsEveryFindingCode)
{
    const std::string man = man_page();
    ASSERT_FALSE(man.empty());
    for (const auto& info : doctor::all_codes()) {
        EXPECT_NE(man.find(".BR \"" + roff(info.code) + "\""), std::string::npos)
            << info.code << " is not in man/gpudoctor.1 (FINDING CODES)";
    }
}
