#include "doctor/fleet/answers.hpp"

#include "base/error.hpp"
#include "base/launchers/backends.hpp"
#include "base/text.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>
#include <zlib.h>

namespace doctor::fleet {

namespace {

/// The most frames one answer may claim: 192 MiB of snapshot, far above any node's, low enough
/// that a forged header cannot make the collector reserve without end.
constexpr unsigned max_frames = 65536;

constexpr Answer kinds[] = {Answer::snapshot, Answer::unreachable, Answer::timed_out, Answer::crashed, Answer::garbage};

/// "timed out" as a frame writes it: one word.
std::string kind_word(Answer answer)
{
    std::string word = to_string(answer);
    std::replace(word.begin(), word.end(), ' ', '_');
    return word;
}

std::optional<Answer> kind_of(std::string_view word)
{
    for (Answer a : kinds) {
        if (kind_word(a) == word) {
            return a;
        }
    }
    return std::nullopt;
}

std::uint32_t crc_of(std::string_view bytes)
{
    return static_cast<std::uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

/// The next space-ended field of `rest`, taken off it; nullopt when there is no space.
std::optional<std::string_view> field(std::string_view& rest)
{
    const auto space = rest.find(' ');
    if (space == std::string_view::npos || space == 0) {
        return std::nullopt;
    }
    std::string_view f = rest.substr(0, space);
    rest.remove_prefix(space + 1);
    return f;
}

std::optional<std::uint64_t> number(std::optional<std::string_view> text, int base = 10)
{
    std::uint64_t value = 0;
    if (!text || text->size() > 16) {
        return std::nullopt;
    }
    const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value, base);
    if (ec != std::errc() || end != text->data() + text->size()) {
        return std::nullopt;
    }
    return value;
}

struct Frame {
    unsigned rank = 0;
    Answer answer = Answer::snapshot;
    unsigned seq = 0;
    unsigned total = 0;
    std::string_view payload;
};

/// The frame at the start of `text` (just past its marker), and what follows it on the line; nullopt
/// when the header is not one or the payload's length or CRC does not match.
std::optional<Frame> read_frame(std::string_view& text)
{
    std::string_view rest = text;
    Frame f;
    const auto rank = number(field(rest));
    const auto kind = field(rest);
    const auto seq = number(field(rest));
    const auto total = number(field(rest));
    const auto length = number(field(rest));
    const auto crc = field(rest);
    const auto crc_value = number(crc, 16);
    if (!rank || !kind || !seq || !total || !length || !crc_value || crc->size() != 8 || *rank > UINT32_MAX ||
        *total == 0 || *total > max_frames || *seq >= *total || *length > frame_payload || rest.size() < *length) {
        return std::nullopt;
    }
    const auto answer = kind_of(*kind);
    f.payload = rest.substr(0, *length);
    if (!answer || crc_of(f.payload) != *crc_value) {
        return std::nullopt;
    }
    f.rank = static_cast<unsigned>(*rank);
    f.answer = *answer;
    f.seq = static_cast<unsigned>(*seq);
    f.total = static_cast<unsigned>(*total);
    text = rest.substr(*length);
    return f;
}

/// Per rank, the parts received so far (as many as came: a header's count reserves nothing).
struct Assembly {
    Answer answer = Answer::snapshot;
    unsigned total = 0;
    std::map<unsigned, std::string> parts;
};

/// The lines of `text`, blanks trimmed, without the empty ones and gpurun's own notes ("gpurun:
/// note: ..."), which speak of the plan, not of what failed.
std::vector<std::string_view> launcher_lines(std::string_view text)
{
    std::vector<std::string_view> lines;
    while (!text.empty()) {
        const std::size_t end = std::min(text.find('\n'), text.size());
        const std::string_view line = base::trim_blanks(text.substr(0, end));
        text.remove_prefix(std::min(end + 1, text.size()));
        if (!line.empty() && line.rfind("gpurun:", 0) != 0 &&
            std::any_of(line.begin(), line.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); })) {
            lines.push_back(line);
        }
    }
    return lines;
}

/// Whether `line` names `host` as a word: not inside a longer name ("n1" is not in "n10" nor in
/// "n1.ib"), though a sentence may end after it ("n09.").
bool names_host(std::string_view line, const std::string& host)
{
    auto is_name_char = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
    };
    for (std::size_t pos = line.find(host); pos != std::string_view::npos; pos = line.find(host, pos + 1)) {
        const std::size_t end = pos + host.size();
        const bool starts = pos == 0 || !is_name_char(line[pos - 1]);
        const bool ends = end == line.size() || !is_name_char(line[end]) ||
            (line[end] == '.' && (end + 1 == line.size() || !is_name_char(line[end + 1])));
        if (starts && ends) {
            return true;
        }
    }
    return false;
}

/// gpurun's report of rank `rank` ("gpurun: rank R (...) failed: ..."), with the lines of its tail
/// ("  | ...") joined by "; ", or "".
std::string rank_report(std::string_view text, unsigned rank)
{
    const std::string start = fmt::format("gpurun: rank {} (", rank);
    std::size_t pos = 0;
    while ((pos = text.find(start, pos)) != std::string_view::npos) {
        if (pos == 0 || text[pos - 1] == '\n') {
            break;
        }
        ++pos;
    }
    if (pos == std::string_view::npos) {
        return "";
    }
    std::string report;
    std::size_t line_start = pos;
    for (int lines = 0; line_start < text.size() && lines < 6; ++lines) {
        const std::size_t end = std::min(text.find('\n', line_start), text.size());
        const std::string_view line = text.substr(line_start, end - line_start);
        if (lines > 0 && line.rfind("  | ", 0) != 0) {
            break;
        }
        report += (lines == 0 ? "" : lines == 1 ? " " : "; ") + std::string(lines == 0 ? line : line.substr(4));
        line_start = end + 1;
    }
    return report;
}

/// A part of the output and the rank that wrote it, where a mark says.
struct Written {
    std::optional<unsigned> rank;
    std::string text;
};

/// The output split by who wrote it, each part in its order. Open MPI's mpirun relays a rank's
/// output in pieces of up to 4 KiB, cutting lines, and puts its mark (--tag-output) before each
/// piece and each line in it: the bytes after a mark, up to the next, are that rank's. Output
/// without marks (mpirun's own, other launchers', whose lines arrive whole) is one part.
std::vector<Written> split_by_writer(std::string_view output)
{
    std::map<std::string_view, Written> parts; // by the mark itself: a rank's <stdout> and <stderr> apart
    std::string* current = &parts[""].text;
    std::size_t from = 0;
    for (std::size_t at = output.find('['); at != std::string_view::npos; at = output.find('[', at + 1)) {
        std::optional<base::launchers::OutputMark> mark;
        for (const auto& backend : base::launchers::table()) {
            if (backend.marks_pieces && !mark) {
                mark = backend.mark(output.substr(at));
            }
        }
        if (!mark) {
            continue;
        }
        current->append(output.substr(from, at - from));
        Written& part = parts[output.substr(at, mark->length)];
        part.rank = mark->rank;
        current = &part.text;
        from = at + mark->length;
        at += mark->length - 1;
    }
    current->append(output.substr(from));
    std::vector<Written> out;
    for (auto& [mark, part] : parts) {
        out.push_back(std::move(part));
    }
    return out;
}

/// The rank a line's own mark names (a launcher that marks whole lines: srun --label's "3: ",
/// Hydra's -prepend-rank "[3] "), taken off the line; nullopt for a line without one.
std::optional<unsigned> line_rank(std::string_view& line)
{
    for (const auto& backend : base::launchers::table()) {
        if (backend.mark == nullptr || backend.marks_pieces) {
            continue;
        }
        if (const auto mark = backend.mark(line)) {
            line.remove_prefix(mark->length);
            return mark->rank;
        }
    }
    return std::nullopt;
}

} // namespace

std::string frame_answer(unsigned rank, Answer answer, std::string_view json)
{
    std::string escaped;
    for (char c : json) {
        escaped += c == '<' ? std::string_view("\\u003c") : std::string_view(&c, 1);
    }
    const std::string_view payload = escaped;
    const std::size_t total = std::max<std::size_t>(1, (payload.size() + frame_payload - 1) / frame_payload);
    std::string out;
    out.reserve(payload.size() + total * 64);
    for (std::size_t seq = 0; seq < total; ++seq) {
        const std::string_view part = payload.substr(std::min(payload.size(), seq * frame_payload), frame_payload);
        out += fmt::format(
            "{}{} {} {} {} {} {:08x} ", frame_marker, rank, kind_word(answer), seq, total, part.size(), crc_of(part));
        out += part;
        out += '\n';
    }
    return out;
}

Collected collect_answers(std::string_view output_stream, std::string_view error_stream)
{
    Collected collected;
    std::map<unsigned, Assembly> assemblies;
    std::vector<Written> parts = split_by_writer(output_stream);
    for (auto& part : split_by_writer(error_stream)) {
        parts.push_back(std::move(part));
    }
    for (const Written& part : parts) {
        std::string_view output = part.text;
        while (!output.empty()) {
            const std::size_t end = output.find('\n');
            std::string_view line = output.substr(0, end);
            output.remove_prefix(end == std::string_view::npos ? output.size() : end + 1);
            bool had_frame = false;
            for (std::size_t at = line.find(frame_marker); at != std::string_view::npos; at = line.find(frame_marker)) {
                std::string_view rest = line.substr(at + frame_marker.size());
                const auto frame = read_frame(rest);
                if (!frame) {
                    line.remove_prefix(at + frame_marker.size());
                    had_frame = true; // a broken frame is not the launcher's message either
                    continue;
                }
                had_frame = true;
                line = rest;
                auto [it, fresh] = assemblies.try_emplace(frame->rank);
                Assembly& a = it->second;
                if (fresh) {
                    a.answer = frame->answer;
                    a.total = frame->total;
                }
                if (a.answer == frame->answer && a.total == frame->total) {
                    a.parts.try_emplace(frame->seq, frame->payload); // a repeat keeps the first
                }
            }
            if (!had_frame) {
                collected.other.append(line).push_back('\n');
                std::string_view text = line;
                const std::optional<unsigned> rank = part.rank ? part.rank : line_rank(text);
                if (rank && !base::trim_blanks(text).empty()) {
                    collected.said[*rank].append(text).push_back('\n');
                }
            }
        }
    }
    for (auto& [rank, a] : assemblies) {
        ReceivedAnswer r;
        r.answer = a.answer;
        r.parts = static_cast<unsigned>(a.parts.size());
        r.total = a.total;
        if (r.complete()) {
            for (auto& [seq, part] : a.parts) { // in order: seq runs from 0 to total - 1
                r.payload += part;
            }
        }
        collected.answers.emplace(rank, std::move(r));
    }
    return collected;
}

NodeOutput node_output(const std::string& host, unsigned rank, const Collected& collected, const LaunchEnd& end)
{
    const auto it = collected.answers.find(rank);
    if (it != collected.answers.end() && it->second.complete()) {
        const ReceivedAnswer& r = it->second;
        if (r.answer == Answer::snapshot) {
            return {host, Answer::snapshot, r.payload};
        }
        // The node's own account of its failure: a JSON string.
        const auto why = nlohmann::json::parse(r.payload, nullptr, false);
        return {host, r.answer, why.is_string() ? why.get<std::string>() : r.payload};
    }
    if (it != collected.answers.end()) {
        return {host, Answer::garbage,
            fmt::format("{} of the {} parts of its answer arrived intact (the launcher's output was cut or mixed)",
                it->second.parts, it->second.total)};
    }
    if (end.timed_out) {
        return {host, Answer::timed_out,
            fmt::format("no answer within {:g} s; the launch was stopped", end.deadline_seconds)};
    }
    if (end.signal != 0) {
        return {host, Answer::unreachable,
            fmt::format("no answer: the launch was stopped by signal {} ({}) before this node answered", end.signal,
                strsignal(end.signal))};
    }
    if (std::string report = rank_report(collected.other, rank); !report.empty()) {
        return {host, Answer::crashed, report};
    }
    if (const auto said = collected.said.find(rank); said != collected.said.end()) {
        const std::string_view text = said->second;
        return {host, Answer::garbage,
            fmt::format("no answer; it printed instead: {}", base::quote_input(text.substr(0, text.find('\n'))))};
    }
    const auto lines = launcher_lines(collected.other);
    for (const auto line : lines) {
        if (names_host(line, host)) {
            return {host, Answer::unreachable, std::string(line)};
        }
    }
    return {host, Answer::unreachable,
        fmt::format("no answer: the launch ended (exit status {}) before this node answered{}", end.exit_code,
            lines.empty() ? std::string() : fmt::format("; the launcher said first: {}", lines.front()))};
}

} // namespace doctor::fleet
