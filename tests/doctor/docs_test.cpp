// The documentation says what the code does: gpudoctor(1)'s FINDING CODES, made at build time from
// the code tables, hold every code with the title, severities and remedy that explain prints.
#include "doctor/commands/codes.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <set>
#include <sstream>

namespace {

std::string read(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string man_page()
{
    return read(std::string(GPUKIT_BUILD_DIR) + "/man/gpudoctor.1");
}

/// The entry of `code` in the page: from its .TP line to the next .TP or .SS.
std::string entry_of(const std::string& man, const std::string& code)
{
    const std::string head = ".TP\n.BR \"" + doctor::commands::roff_text(code) + "\"";
    const std::size_t at = man.find(head);
    if (at == std::string::npos) {
        return "";
    }
    const std::size_t end = std::min(man.find("\n.TP\n", at + 1), man.find("\n.S", at + 1));
    return man.substr(at, end - at);
}

} // namespace

TEST(Docs, ManPageHoldsEveryFindingCodeAsExplainSaysIt)
{
    const std::string man = man_page();
    ASSERT_NE(man.find(".SH FINDING CODES"), std::string::npos) << "the page was not made with its FINDING CODES";
    ASSERT_EQ(man.find("@FINDING_CODES@"), std::string::npos);
    std::size_t checked = 0;
    for (const auto& group : doctor::commands::code_groups()) {
        for (const auto& c : group.codes) {
            const std::string entry = entry_of(man, c.code);
            ASSERT_FALSE(entry.empty()) << c.code << " is not in gpudoctor(1)";
            EXPECT_NE(entry.find("\" (" + c.severities() + ")\""), std::string::npos) << entry;
            EXPECT_NE(entry.find(doctor::commands::roff_text(c.title)), std::string::npos) << entry;
            EXPECT_NE(entry.find(doctor::commands::roff_text(c.explanation)), std::string::npos) << entry;
            if (c.remedy.empty()) {
                EXPECT_EQ(entry.find("Remedy:"), std::string::npos) << entry;
            } else {
                EXPECT_NE(
                    entry.find("Remedy: " + doctor::commands::roff_text(c.remedy_shown()) + "."), std::string::npos)
                    << entry;
            }
            ++checked;
        }
    }
    EXPECT_EQ(checked, doctor::commands::all_codes().size());
}

TEST(Docs, EveryCodeIsOnceInTheTablesAndHasItsWords)
{
    std::set<std::string> seen;
    for (const auto& c : doctor::commands::all_codes()) {
        EXPECT_TRUE(seen.insert(c.code).second) << c.code << " is in two rows";
        EXPECT_FALSE(c.title.empty()) << c.code;
        EXPECT_FALSE(c.explanation.empty()) << c.code;
        // A warning, failure or error says what to do; a pass never does.
        if (c.severity == base::Severity::warn || c.severity == base::Severity::fail) {
            EXPECT_FALSE(c.remedy.empty()) << c.code << " is a " << base::to_string(c.severity) << " without a remedy";
        }
        if (c.severity == base::Severity::pass && !c.also) {
            EXPECT_TRUE(c.remedy.empty()) << c.code;
        }
    }
}

TEST(Docs, RoffTextKeepsWhatThePageMustShow)
{
    EXPECT_EQ(doctor::commands::roff_text("--expect-gpus 0"), "\\-\\-expect\\-gpus 0");
    EXPECT_EQ(doctor::commands::roff_text("a\\b"), "a\\\\b");
    EXPECT_EQ(doctor::commands::roff_text(".not a request"), "\\&.not a request");
}
