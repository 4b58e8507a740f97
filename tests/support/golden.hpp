#pragma once

#include "tests/support/process.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>

namespace test_support {

/// Every occurrence of `from` in `text` replaced by `to`.
inline std::string replace_all(std::string text, const std::string& from, const std::string& to)
{
    for (std::size_t pos = 0; !from.empty() && (pos = text.find(from, pos)) != std::string::npos; pos += to.size()) {
        text.replace(pos, from.size(), to);
    }
    return text;
}

/// A program's exit code, stdout and stderr as one text, the form golden files hold.
inline std::string golden_text(const Finished& r)
{
    return "exit: " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

/// Compares `actual` with the golden file `dir/name.txt`; with UPDATE_GOLDEN set in the
/// environment it writes the file instead (review the diff) and skips the test.
inline void expect_golden(const std::filesystem::path& dir, const std::string& name, const std::string& actual)
{
    const auto golden = dir / (name + ".txt");
    if (std::getenv("UPDATE_GOLDEN") != nullptr) {
        std::ofstream(golden) << actual;
        GTEST_SKIP() << "golden written: " << golden;
    }
    std::ifstream in(golden);
    ASSERT_TRUE(in) << "no golden file " << golden << "; run with UPDATE_GOLDEN=1 and review it";
    std::stringstream expected;
    expected << in.rdbuf();
    EXPECT_EQ(actual, expected.str());
}

} // namespace test_support
