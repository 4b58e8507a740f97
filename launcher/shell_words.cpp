#include "launcher/shell_words.hpp"

#include "base/error.hpp"

#include <fmt/format.h>

namespace launcher {

namespace {

using base::Error;

bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n';
}

// What an unquoted character would do in a shell; nullptr for an ordinary character.
const char* shell_meaning(char c)
{
    switch (c) {
    case '$':
        return "would expand a variable";
    case '`':
        return "would run a command";
    case ';':
    case '&':
        return "would end a command";
    case '|':
        return "would start a pipe";
    case '<':
    case '>':
        return "would redirect";
    case '(':
    case ')':
        return "would start or end a subshell";
    default:
        return nullptr;
    }
}

class Splitter {
public:
    Splitter(std::string_view text, std::string_view what) : m_text(text), m_what(what) { }

    std::vector<std::string> split()
    {
        while (m_pos < m_text.size()) {
            const char c = m_text[m_pos];
            if (is_blank(c)) {
                end_word();
                ++m_pos;
            } else if (c == '\'') {
                single_quoted();
            } else if (c == '"') {
                double_quoted();
            } else if (c == '\\') {
                escaped();
            } else if (const char* meaning = shell_meaning(c)) {
                throw Error(fmt::format("{}: unquoted '{}' at character {} {} in a shell, but no shell runs here; "
                                        "write '{}' or \\{} to pass it literally",
                    m_what, c, m_pos + 1, meaning, c, c));
            } else {
                check_not_nul(m_pos);
                m_word += c;
                m_in_word = true;
                ++m_pos;
            }
        }
        end_word();
        return std::move(m_words);
    }

private:
    void end_word()
    {
        if (m_in_word) {
            m_words.push_back(std::move(m_word));
            m_word.clear();
            m_in_word = false;
        }
    }

    void check_not_nul(std::size_t at) const
    {
        if (m_text[at] == '\0') {
            throw Error(fmt::format("{}: NUL character at character {}; an argument cannot hold one", m_what, at + 1));
        }
    }

    [[noreturn]] void unterminated(char quote, std::size_t open) const
    {
        throw Error(fmt::format("{}: the {} opened at character {} is never closed; close it, or write \\{} for a "
                                "literal {}",
            m_what, quote, open + 1, quote, quote));
    }

    void single_quoted()
    {
        const std::size_t open = m_pos;
        const std::size_t close = m_text.find('\'', open + 1);
        if (close == std::string_view::npos) {
            unterminated('\'', open);
        }
        for (std::size_t i = open + 1; i < close; ++i) {
            check_not_nul(i);
        }
        m_word.append(m_text.substr(open + 1, close - open - 1));
        m_in_word = true;
        m_pos = close + 1;
    }

    void double_quoted()
    {
        const std::size_t open = m_pos++;
        m_in_word = true;
        while (true) {
            if (m_pos >= m_text.size()) {
                unterminated('"', open);
            }
            const char c = m_text[m_pos];
            if (c == '"') {
                ++m_pos;
                return;
            }
            if (c == '\\' && m_pos + 1 < m_text.size()) {
                const char next = m_text[m_pos + 1];
                if (next == '\n') {
                    m_pos += 2;
                    continue;
                }
                if (next == '"' || next == '\\' || next == '$' || next == '`') {
                    m_word += next;
                    m_pos += 2;
                    continue;
                }
            }
            if (c == '$' || c == '`') {
                throw Error(fmt::format("{}: '{}' at character {} {} in a shell, even inside double quotes, but no "
                                        "shell runs here; write \\{} or use single quotes to pass it literally",
                    m_what, c, m_pos + 1, shell_meaning(c), c));
            }
            check_not_nul(m_pos);
            m_word += c;
            ++m_pos;
        }
    }

    void escaped()
    {
        if (m_pos + 1 >= m_text.size()) {
            throw Error(fmt::format("{}: the '\\' at character {} ends the text and escapes nothing; write '\\\\' "
                                    "for a literal backslash",
                m_what, m_pos + 1));
        }
        const char next = m_text[m_pos + 1];
        if (next != '\n') {
            check_not_nul(m_pos + 1);
            m_word += next;
            m_in_word = true;
        }
        m_pos += 2;
    }

    std::string_view m_text;
    std::string_view m_what;
    std::size_t m_pos = 0;
    std::string m_word;
    bool m_in_word = false;
    std::vector<std::string> m_words;
};

} // namespace

std::vector<std::string> split_shell_words(std::string_view text, std::string_view what)
{
    return Splitter(text, what).split();
}

} // namespace launcher
