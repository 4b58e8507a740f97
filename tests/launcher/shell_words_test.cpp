#include "base/error.hpp"
#include "launcher/shell_words.hpp"
#include "tests/support/error_of.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

using test_support::error_of;

using Words = std::vector<std::string>;

namespace {

Words split(std::string_view text)
{
    return launcher::split_shell_words(text, "--launcher-args");
}

std::string error_splitting(std::string_view text)
{
    return error_of([&] { split(text); });
}

} // namespace

TEST(ShellWords, BlanksSeparateWords)
{
    EXPECT_EQ(split("--mca btl ^openib"), (Words{"--mca", "btl", "^openib"}));
    EXPECT_EQ(split("  a \t b\n\nc  "), (Words{"a", "b", "c"}));
    EXPECT_EQ(split("-x NCCL_DEBUG=INFO --bind-to none"), (Words{"-x", "NCCL_DEBUG=INFO", "--bind-to", "none"}));
}

TEST(ShellWords, BlankOrEmptyTextGivesNoWords)
{
    EXPECT_TRUE(split("").empty());
    EXPECT_TRUE(split(" \t\n ").empty());
    EXPECT_TRUE(split("\\\n").empty());
}

TEST(ShellWords, DoubleQuotesKeepBlanksAndJoinAdjacentParts)
{
    EXPECT_EQ(split("-x \"A=b c\""), (Words{"-x", "A=b c"}));
    EXPECT_EQ(split("-x A=\"b c\"d"), (Words{"-x", "A=b cd"}));
    EXPECT_EQ(split("\"a;b|c&d<e>f(g)\""), (Words{"a;b|c&d<e>f(g)"}));
}

TEST(ShellWords, DoubleQuoteEscapes)
{
    EXPECT_EQ(split("\"\\$HOME\""), (Words{"$HOME"}));
    EXPECT_EQ(split("\"say \\\"hi\\\" \\\\ \\`\""), (Words{"say \"hi\" \\ `"}));
    // Any other backslash stays, as in a shell.
    EXPECT_EQ(split("\"a\\nb\\'\""), (Words{"a\\nb\\'"}));
    // A backslash-newline inside double quotes is removed.
    EXPECT_EQ(split("\"ab\\\ncd\""), (Words{"abcd"}));
}

TEST(ShellWords, SingleQuotesKeepEverythingLiterally)
{
    EXPECT_EQ(split("'it''s'"), (Words{"its"}));
    EXPECT_EQ(split("'it'\\''s'"), (Words{"it's"}));
    EXPECT_EQ(split("'$HOME \\ \"x\" ; `y`'"), (Words{"$HOME \\ \"x\" ; `y`"}));
    EXPECT_EQ(split("'a\nb'"), (Words{"a\nb"}));
}

TEST(ShellWords, EmptyQuotesAreAnEmptyWord)
{
    EXPECT_EQ(split("''"), (Words{""}));
    EXPECT_EQ(split("a '' b \"\""), (Words{"a", "", "b", ""}));
    EXPECT_EQ(split("a''b"), (Words{"ab"}));
}

TEST(ShellWords, BackslashOutsideQuotes)
{
    EXPECT_EQ(split("a\\ b"), (Words{"a b"}));
    EXPECT_EQ(split("\\$HOME \\; \\\\"), (Words{"$HOME", ";", "\\"}));
    EXPECT_EQ(split("\\'x"), (Words{"'x"}));
    // A backslash-newline joins lines and is not a word by itself.
    EXPECT_EQ(split("--mca btl \\\n  ^openib"), (Words{"--mca", "btl", "^openib"}));
    EXPECT_EQ(split("ab\\\ncd"), (Words{"abcd"}));
}

TEST(ShellWords, OtherCharactersAreLiteral)
{
    EXPECT_EQ(split("#x *.log ~ {a,b} [0] a=b"), (Words{"#x", "*.log", "~", "{a,b}", "[0]", "a=b"}));
    EXPECT_EQ(split("a\rb"), (Words{"a\rb"}));
}

TEST(ShellWords, UnquotedShellSyntaxIsAnErrorWithItsPosition)
{
    EXPECT_EQ(error_splitting("-x A=$HOME"),
        "--launcher-args: unquoted '$' at character 6 would expand a variable in a shell, but no shell runs here; "
        "write '$' or \\$ to pass it literally");
    EXPECT_EQ(error_of([] { launcher::split_shell_words("a;b", "GPURUN_LAUNCHER_ARGS"); }),
        "GPURUN_LAUNCHER_ARGS: unquoted ';' at character 2 would end a command in a shell, but no shell runs here; "
        "write ';' or \\; to pass it literally");
    EXPECT_NE(error_splitting("a `b`").find("unquoted '`' at character 3 would run a command"), std::string::npos);
    EXPECT_NE(error_splitting("a|b").find("unquoted '|' at character 2 would start a pipe"), std::string::npos);
    EXPECT_NE(error_splitting("a &").find("unquoted '&' at character 3 would end a command"), std::string::npos);
    EXPECT_NE(error_splitting("<in").find("unquoted '<' at character 1 would redirect"), std::string::npos);
    EXPECT_NE(error_splitting("a>out").find("unquoted '>' at character 2 would redirect"), std::string::npos);
    EXPECT_NE(
        error_splitting("(a)").find("unquoted '(' at character 1 would start or end a subshell"), std::string::npos);
    EXPECT_NE(error_splitting("'(' )").find("unquoted ')' at character 5"), std::string::npos);
}

TEST(ShellWords, ExpansionInsideDoubleQuotesIsAnError)
{
    EXPECT_EQ(error_splitting("\"$HOME\""),
        "--launcher-args: '$' at character 2 would expand a variable in a shell, even inside double quotes, but no "
        "shell runs here; write \\$ or use single quotes to pass it literally");
    EXPECT_NE(error_splitting("x \"`id`\"").find("'`' at character 4 would run a command"), std::string::npos);
}

TEST(ShellWords, UnterminatedQuotesNameWhereTheyOpened)
{
    EXPECT_EQ(error_splitting("-x 'A=b"),
        "--launcher-args: the ' opened at character 4 is never closed; close it, or write \\' for a literal '");
    EXPECT_EQ(error_splitting("a \"b c"),
        "--launcher-args: the \" opened at character 3 is never closed; close it, or write \\\" for a literal \"");
    EXPECT_NE(error_splitting("\"ab\\\"").find("the \" opened at character 1"), std::string::npos);
    EXPECT_NE(error_splitting("'a' 'b").find("opened at character 5"), std::string::npos);
}

TEST(ShellWords, TrailingBackslashAndNulAreErrors)
{
    EXPECT_EQ(error_splitting("a\\"),
        "--launcher-args: the '\\' at character 2 ends the text and escapes nothing; write '\\\\' for a literal "
        "backslash");
    const std::string nul = "NUL character at character 3; an argument cannot hold one";
    EXPECT_NE(error_splitting(std::string("ab\0", 3)).find(nul), std::string::npos);
    EXPECT_NE(error_splitting(std::string("'b\0'", 4)).find(nul), std::string::npos);
    EXPECT_NE(error_splitting(std::string("\"b\0\"", 4)).find(nul), std::string::npos);
    EXPECT_NE(error_splitting(std::string("a\\\0", 3)).find(nul), std::string::npos);
}
