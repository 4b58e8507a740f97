#include "base/error.hpp"

#include <gtest/gtest.h>

TEST(Printable, ControlCharactersFromTheUserAreWrittenAsEscapes)
{
    // A hostfile with a terminal escape sequence: the message quotes it, the terminal must not run it.
    EXPECT_EQ(base::printable("hosts:1: 'slots=\x1b[31mX' needs a positive number"),
        "hosts:1: 'slots=\\x1b[31mX' needs a positive number");
    EXPECT_EQ(base::printable(std::string("a\0b\rc\x7f", 6)), "a\\x00b\\x0dc\\x7f");
    EXPECT_EQ(base::printable("two\nlines\tand UTF-8 \xc3\xa9"), "two\nlines\tand UTF-8 \xc3\xa9")
        << "kept as they are";
}
