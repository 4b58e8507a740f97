#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace launcher {

/// Splits `text` into words the way a POSIX shell splits a command line, and nothing more: blanks
/// (space, tab, newline) separate words; '...' keeps everything inside literally; "..." keeps
/// everything but the backslash escapes \" \\ \$ \` and a backslash-newline (removed); outside
/// quotes a backslash keeps the next character literally and a backslash-newline is removed;
/// adjacent quoted and unquoted parts join into one word ('' alone is an empty word).
/// Nothing is expanded and no shell runs: an unquoted $ ` ; | & < > ( ) would mean something to a
/// shell that it cannot mean here, so it is an error, as are $ and ` inside "..." (a shell expands
/// them there too), a NUL (no argument can hold one) and a backslash that ends the text. Other
/// characters, # * ? ~ { } [ ] included, are kept literally. Blank-only text gives no words.
/// `what` names the source in errors (e.g. "--launcher-args"); errors say what is wrong and at
/// which character (1-based), an unterminated quote where it opened. Throws base::Error.
std::vector<std::string> split_shell_words(std::string_view text, std::string_view what);

} // namespace launcher
