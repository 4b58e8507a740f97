// JsonWriter against nlohmann::json's own dump: the same bytes for the same values, at every
// indent, for nesting, empty containers, escapes, numbers at their limits and text that is not
// UTF-8.
#include "base/json_writer.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <string>

namespace {

using base::JsonWriter;

// {"a": [1, -2, {}, [], "x"], "b": {"c": null, "d": true, "e": false}, "f": "...", "g": max u64}
void write_sample(JsonWriter& w, const std::string& text)
{
    w.begin_object();
    w.key("a").begin_array().value(1).value(-2).begin_object().end().begin_array().end().value("x").end();
    w.key("b").begin_object().member("c", nullptr).member("d", true).member("e", false).end();
    w.member("f", text);
    w.member("g", std::numeric_limits<std::uint64_t>::max());
    w.member("h", std::numeric_limits<std::int64_t>::min());
    w.end();
}

nlohmann::json sample_document(const std::string& text)
{
    return {{"a", {1, -2, nlohmann::json::object(), nlohmann::json::array(), "x"}},
        {"b", {{"c", nullptr}, {"d", true}, {"e", false}}}, {"f", text},
        {"g", std::numeric_limits<std::uint64_t>::max()}, {"h", std::numeric_limits<std::int64_t>::min()}};
}

TEST(JsonWriter, WritesWhatDumpWritesAtEveryIndent)
{
    const std::string text = "quote \" backslash \\ tab \t newline \n bell \x07 del \x7f caf\xc3\xa9 \xe2\x82\xac";
    for (const int indent : {-1, 0, 2, 4}) {
        std::string out;
        JsonWriter w(out, indent);
        write_sample(w, text);
        EXPECT_EQ(out, sample_document(text).dump(indent)) << "indent " << indent;
    }
}

TEST(JsonWriter, TextThatIsNotUtf8BecomesReplacementCharacters)
{
    // A lone continuation byte, a truncated sequence, an overlong form, a surrogate.
    const std::string bad = std::string("a\x80") + "b\xe2\x82" + "c\xc0\xaf" + "d\xed\xa0\x80" + "e";
    EXPECT_EQ(base::valid_utf8(bad),
        "a\xef\xbf\xbd"
        "b\xef\xbf\xbd\xef\xbf\xbd"
        "c\xef\xbf\xbd\xef\xbf\xbd"
        "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
        "e");
    std::string out;
    JsonWriter w(out, -1);
    w.begin_array().value(bad).value(nlohmann::json{{"k\xff", bad}}).end();
    const auto parsed = nlohmann::json::parse(out); // nlohmann refuses invalid UTF-8
    EXPECT_EQ(parsed[0], base::valid_utf8(bad));
    EXPECT_EQ(parsed[1]["k\xef\xbf\xbd"], base::valid_utf8(bad));
}

TEST(JsonWriter, ADocumentInsideIsIndentedToItsDepth)
{
    const nlohmann::json finding = {{"code", "x.y"}, {"facts", {{"n", 1}}}};
    std::string out;
    JsonWriter w(out, 2);
    w.begin_object().key("findings").begin_array().value(finding).end().end();
    EXPECT_EQ(out, nlohmann::json({{"findings", {finding}}}).dump(2));
}

} // namespace
