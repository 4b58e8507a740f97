#include "base/nccl/record.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace base::nccl {

namespace {

constexpr long max_rank = 1 << 22;

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

bool is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

bool all_of(std::string_view s, bool (*pred)(char))
{
    return !s.empty() && std::all_of(s.begin(), s.end(), pred);
}

bool to_long(std::string_view s, long& out)
{
    if (s.empty() || s.size() > 12) {
        return false;
    }
    long v = 0;
    for (char c : s) {
        if (!is_digit(c)) {
            return false;
        }
        v = v * 10 + (c - '0');
    }
    out = v;
    return true;
}

std::string_view trim(std::string_view s)
{
    while (!s.empty() && is_space(s.front())) {
        s.remove_prefix(1);
    }
    while (!s.empty() && is_space(s.back())) {
        s.remove_suffix(1);
    }
    return s;
}

bool consume(std::string_view& s, std::string_view word)
{
    if (s.substr(0, word.size()) != word) {
        return false;
    }
    s.remove_prefix(word.size());
    return true;
}

// A run of decimal digits at the front of s, as a number; false when there is none.
bool consume_number(std::string_view& s, long& out)
{
    std::size_t n = 0;
    while (n < s.size() && is_digit(s[n])) {
        ++n;
    }
    if (n == 0 || !to_long(s.substr(0, n), out)) {
        return false;
    }
    s.remove_prefix(n);
    return true;
}

// An optional `[hex]` device or bus id after a rank.
bool consume_device(std::string_view& s)
{
    if (s.empty() || s.front() != '[') {
        return true;
    }
    std::size_t n = 1;
    while (n < s.size() && is_hex(s[n])) {
        ++n;
    }
    if (n == 1 || n >= s.size() || s[n] != ']') {
        return false;
    }
    s.remove_prefix(n + 1);
    return true;
}

// What follows the first `marker` in `text`.
std::optional<std::string_view> after(std::string_view text, std::string_view marker)
{
    const std::size_t at = text.find(marker);
    if (at == std::string_view::npos) {
        return std::nullopt;
    }
    return text.substr(at + marker.size());
}

// Splits on runs of blanks into a per-thread vector, reused so that no call allocates once warm.
const std::vector<std::string_view>& words(std::string_view s)
{
    thread_local std::vector<std::string_view> out;
    out.clear();
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && is_space(s[i])) {
            ++i;
        }
        std::size_t j = i;
        while (j < s.size() && !is_space(s[j])) {
            ++j;
        }
        if (j > i) {
            out.push_back(s.substr(i, j - i));
        }
        i = j;
    }
    return out;
}

// The record prefix ends just before "NCCL " at `at`; reads it backwards. Returns where the
// record starts in the line (the host, or the `[dev]` when there is no host).
std::size_t read_prefix(std::string_view line, std::size_t at, NcclRecord& r)
{
    std::size_t start = at;
    if (at == 0 || line[at - 1] != ' ') {
        return start;
    }
    std::size_t j = at - 1; // the blank before "NCCL"
    // 2.30.7 WARN: "file.cc:LINE (function) NCCL WARN".
    if (j > 0 && line[j - 1] == ')') {
        std::size_t open = line.rfind('(', j - 1);
        if (open != std::string_view::npos && open > 0 && j - open < 256 && line[open - 1] == ' ') {
            j = open - 1;
        }
    }
    // WARN/TRACE location "file:line" (plugins: "function:line"), TRACE also "%f " before it.
    for (int tokens = 0; tokens < 2 && j > 0; ++tokens) {
        std::size_t word_start = line.rfind(' ', j - 1);
        word_start = word_start == std::string_view::npos ? 0 : word_start + 1;
        std::string_view word = line.substr(word_start, j - word_start);
        if (word.empty() || word.front() == '[' || word.back() == ']') {
            break;
        }
        std::size_t colon = word.rfind(':');
        const bool location = colon != std::string_view::npos && colon > 0 && all_of(word.substr(colon + 1), is_digit);
        const bool elapsed = word.find('.') != std::string_view::npos &&
            std::all_of(word.begin(), word.end(), [](char c) { return is_digit(c) || c == '.'; });
        if (location && tokens == 0) {
            r.location = word;
        } else if (!elapsed) {
            break;
        }
        if (word_start == 0) {
            return start;
        }
        j = word_start - 1;
    }
    // "[dev]".
    if (j < 3 || line[j - 1] != ']') {
        return start;
    }
    std::size_t open = j - 2;
    while (open > 0 && is_digit(line[open]) && j - open < 12) {
        --open;
    }
    if (line[open] != '[' || open + 1 >= j - 1) {
        return start;
    }
    long dev = 0;
    if (!to_long(line.substr(open + 1, j - 1 - open - 1), dev) || dev > 4096) {
        return start;
    }
    r.dev = static_cast<int>(dev);
    start = open;
    if (open < 6 || line[open - 1] != ' ') {
        return start;
    }
    // "host:pid:tid". The host may be empty (a container without a host name prints
    // ":5202:5683 [0]"), and a pid or tid may be a word where the poster of a log redacted it
    // ("pod-id:num:num [0]"): such a record still has its prefix, with pid and tid 0.
    std::size_t k = open - 1; // end of the host:pid:tid word
    auto field_back = [&](std::size_t end) {
        std::size_t b = end;
        while (b > 0 && end - b < 32) {
            const char c = line[b - 1];
            if (is_space(c) || c == ':' || c == '[' || c == ']') {
                break;
            }
            --b;
        }
        return b;
    };
    const std::size_t tid_start = field_back(k);
    if (tid_start == k || tid_start < 2 || line[tid_start - 1] != ':') {
        return start;
    }
    const std::size_t pid_end = tid_start - 1;
    const std::size_t pid_start = field_back(pid_end);
    if (pid_start == pid_end || pid_start < 1 || line[pid_start - 1] != ':') {
        return start;
    }
    const std::size_t host_end = pid_start - 1;
    std::size_t host_start = host_end;
    while (host_start > 0) {
        char c = line[host_start - 1];
        if (is_space(c) || c == ':' || c == '[' || c == ']') {
            break;
        }
        --host_start;
    }
    if (host_start == host_end && host_start > 0 && line[host_start - 1] == ':') {
        return start; // "a::1:2": not NCCL's prefix
    }
    if (!to_long(line.substr(pid_start, pid_end - pid_start), r.pid)) {
        r.pid = 0;
    }
    if (!to_long(line.substr(tid_start, k - tid_start), r.tid)) {
        r.tid = 0;
    }
    r.host = line.substr(host_start, host_end - host_start);
    r.prefixed = true;
    return host_start;
}

// Whether any byte is below 0x20 or is 0x7f.
bool has_control(std::string_view s)
{
    const char* p = s.data();
    const char* end = p + s.size();
#if defined(__SSE2__)
    const __m128i space = _mm_set1_epi8(0x1f);
    const __m128i del = _mm_set1_epi8(0x7f);
    for (; end - p >= 16; p += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        // max(v, 0x1f) == 0x1f exactly for the bytes up to 0x1f (unsigned).
        const __m128i low = _mm_cmpeq_epi8(_mm_max_epu8(v, space), space);
        if (_mm_movemask_epi8(_mm_or_si128(low, _mm_cmpeq_epi8(v, del))) != 0) {
            return true;
        }
    }
#endif
    for (; p < end; ++p) {
        if (static_cast<unsigned char>(*p) < 0x20 || *p == 0x7f) {
            return true;
        }
    }
    return false;
}

} // namespace

std::string_view clean_line(std::string_view raw, std::string& scratch)
{
    if (!has_control(raw)) {
        return raw;
    }
    scratch.clear();
    for (std::size_t i = 0; i < raw.size(); ++i) {
        const auto c = static_cast<unsigned char>(raw[i]);
        if (c == 0x1b) {
            // CSI "ESC [ params final" (colours), or a two-byte escape.
            if (i + 1 < raw.size() && raw[i + 1] == '[') {
                i += 2;
                while (i < raw.size() && !(raw[i] >= 0x40 && raw[i] <= 0x7e)) {
                    ++i;
                }
            } else {
                ++i;
            }
        } else if (c == '\t') {
            scratch.push_back(' ');
        } else if (c >= 0x20 && c != 0x7f) {
            scratch.push_back(static_cast<char>(c));
        }
    }
    return scratch;
}

void find_records(std::string_view line, std::vector<NcclRecord>& out)
{
    const std::size_t first = out.size();
    std::size_t search = 0;
    std::size_t message_start = 0;
    while (search < line.size()) {
        const std::size_t at = line.find("NCCL ", search);
        if (at == std::string_view::npos) {
            break;
        }
        search = at + 5;
        std::string_view rest = line.substr(at + 5);
        NcclRecord r;
        std::size_t level_size = 0;
        if (rest.starts_with("INFO")) {
            r.level = Level::info;
            level_size = 4;
        } else if (rest.starts_with("WARN")) {
            r.level = Level::warn;
            level_size = 4;
        } else if (rest.starts_with("TRACE")) {
            r.level = Level::trace;
            level_size = 5;
        } else if (rest.starts_with("ABORT")) {
            r.level = Level::abort;
            level_size = 5;
        } else {
            continue;
        }
        if (rest.size() > level_size && rest[level_size] != ' ') {
            continue;
        }
        if (at > 0 && !is_space(line[at - 1]) && line[at - 1] != ':' && line[at - 1] != '>' && line[at - 1] != ']') {
            continue;
        }
        const std::size_t start = std::max(read_prefix(line, at, r), message_start);
        if (out.size() > first) {
            NcclRecord& previous = out.back();
            // The previous message ends where this record starts (it may have been all blanks).
            const char* from = previous.message.data();
            const char* to = line.data() + start;
            previous.message =
                to > from ? trim(std::string_view(from, static_cast<std::size_t>(to - from))) : std::string_view();
        }
        const std::size_t body = std::min(line.size(), at + 5 + level_size + 1);
        r.message = trim(line.substr(body));
        message_start = body;
        out.push_back(r);
    }
}

namespace {

// NET/<name>/<dev>[(<proxy rank>)] and then any of /GDRDMA, /GDCopy, (PCI), /Shared. A line cut
// inside its path ("NET/IB/0/GDR") does not tell which transport it is.
bool whole_net_path(std::string_view path)
{
    if (!consume(path, "NET/")) {
        return true;
    }
    const std::size_t slash = path.find('/');
    if (slash == 0 || slash == std::string_view::npos) {
        return false;
    }
    path.remove_prefix(slash + 1);
    long v = 0;
    if (!consume_number(path, v) || (consume(path, "(") && (!consume_number(path, v) || !consume(path, ")")))) {
        return false;
    }
    while (!path.empty()) {
        if (!consume(path, "/GDRDMA") && !consume(path, "/GDCopy") && !consume(path, "(PCI)") &&
            !consume(path, "/Shared")) {
            return false;
        }
    }
    return true;
}

} // namespace

std::optional<NcclConnection> parse_connection(std::string_view s)
{
    NcclConnection c;
    if (consume(s, "Channel ")) {
    } else if (consume(s, "Ring ")) {
        c.ring_keyword = true;
    } else if (consume(s, "CollNet ")) {
        c.collnet = true;
    } else if (consume(s, "Coll ")) {
        c.collnet = true;
        c.ring_keyword = true;
    } else {
        return std::nullopt;
    }
    long v = 0;
    if (!consume_number(s, v)) {
        return std::nullopt;
    }
    c.channel = static_cast<int>(std::min(v, max_rank));
    if (consume(s, "/")) {
        if (!consume_number(s, v)) {
            return std::nullopt;
        }
        c.conn_index = static_cast<int>(std::min(v, max_rank));
    }
    if (!consume(s, " : ") || !consume_number(s, v) || v >= max_rank || !consume_device(s)) {
        return std::nullopt;
    }
    c.src = static_cast<int>(v);
    if (!c.collnet) {
        if (!consume(s, " -> ") || !consume_number(s, v) || v >= max_rank || !consume_device(s)) {
            return std::nullopt;
        }
        c.dst = static_cast<int>(v);
    }
    if (consume(s, " [send]")) {
        c.direction = Direction::send;
    } else if (consume(s, " [receive]")) {
        c.direction = Direction::receive;
    }
    if (!consume(s, " via ")) {
        return std::nullopt;
    }
    c.path = trim(s);
    if (c.path.empty() || !whole_net_path(c.path)) {
        return std::nullopt;
    }
    return c;
}

Transport classify_path(std::string_view path)
{
    if (path.starts_with("P2P/")) {
        return Transport::p2p;
    }
    if (path.starts_with("SHM/") || path.starts_with("direct shared memory")) {
        return Transport::shm;
    }
    if (path.starts_with("COLLNET/")) {
        return Transport::collnet;
    }
    if (path.starts_with("NET/")) {
        std::string_view name = path.substr(4);
        name = name.substr(0, name.find('/'));
        if (name.starts_with("IB")) {
            return path.find("/GDRDMA") != std::string_view::npos ? Transport::net_ib_gdr : Transport::net_ib;
        }
        if (name == "Socket") {
            return Transport::net_socket;
        }
    }
    return Transport::net_other;
}

std::optional<NcclInit> parse_init(std::string_view message)
{
    std::size_t at = 0;
    while ((at = message.find("comm ", at)) != std::string_view::npos) {
        if (at == 0 || is_space(message[at - 1])) {
            break;
        }
        at += 5;
    }
    if (at == std::string_view::npos) {
        return std::nullopt;
    }
    const auto& w = words(message.substr(at));
    long rank = 0;
    long nranks = 0;
    if (w.size() < 6 || w[2] != "rank" || w[4] != "nranks" || !to_long(w[3], rank) || !to_long(w[5], nranks) ||
        nranks <= 0 || nranks > max_rank || rank >= nranks) {
        return std::nullopt;
    }
    NcclInit init;
    init.comm = w[1];
    init.rank = static_cast<int>(rank);
    init.nranks = static_cast<int>(nranks);
    std::size_t i = 6;
    bool stage_follows = false;
    while (i < w.size()) {
        if (w[i].front() == '-') {
            stage_follows = true;
            if (w[i] == "-") {
                ++i;
            } else {
                return std::nullopt;
            }
            break;
        }
        if (i + 1 >= w.size()) {
            return std::nullopt;
        }
        std::string_view key = w[i];
        std::string_view value = w[i + 1];
        i += 2;
        if (value.size() > 1 && value.back() == '-') {
            // "key 0- Init START" (split comms, 2.23 - 2.28)
            value.remove_suffix(1);
            stage_follows = true;
        }
        long n = 0;
        if (key == "cudaDev" && to_long(value, n)) {
            init.cuda_dev = static_cast<int>(std::min(n, max_rank));
        } else if (key == "nvmlDev" && to_long(value, n)) {
            init.nvml_dev = static_cast<int>(std::min(n, max_rank));
        } else if (key == "busId") {
            init.bus_id = value;
        } else if (key == "commId") {
            init.comm_id = value;
        }
        if (stage_follows) {
            break;
        }
    }
    if (!stage_follows) {
        // 2.3: "comm 0x... rank 0 nranks 2" and nothing more.
        if (i != 6 || w.size() != 6) {
            return std::nullopt;
        }
        return init;
    }
    if (i + 1 >= w.size() || w[i] != "Init") {
        return std::nullopt;
    }
    if (w[i + 1] == "START") {
        init.stage = InitStage::start;
    } else if (w[i + 1] == "COMPLETE") {
        init.stage = InitStage::complete;
    } else {
        return std::nullopt;
    }
    return init;
}

bool parse_ring_order(std::string_view s, NcclRingOrder& out)
{
    if (!consume(s, "Channel ") && !consume(s, "Ring ")) {
        return false;
    }
    long v = 0;
    if (!consume_number(s, v)) {
        return false;
    }
    out.channel = static_cast<int>(std::min(v, max_rank));
    if (consume(s, "/") && !consume_number(s, v)) {
        return false;
    }
    if (!consume(s, " :")) {
        return false;
    }
    out.ranks.clear();
    out.truncated = false;
    for (std::string_view word : words(s)) {
        if (word == "..." || word.ends_with("...")) {
            out.truncated = true;
            break;
        }
        if (!to_long(word, v) || v >= max_rank) {
            return false;
        }
        out.ranks.push_back(static_cast<int>(v));
    }
    return !out.ranks.empty();
}

std::optional<std::string_view> find_version(std::string_view text, bool in_record)
{
    auto found = after(text, "NCCL version ");
    if (!found) {
        return std::nullopt;
    }
    std::string_view v = *found;
    std::size_t n = 0;
    while (n < v.size() && !is_space(v[n]) && v[n] != ',' && n < 64) {
        ++n;
    }
    v = v.substr(0, n);
    std::size_t number = 0;
    bool dotted = false;
    while (number < v.size() && (is_digit(v[number]) || v[number] == '.')) {
        dotted = dotted || (v[number] == '.' && number > 0);
        ++number;
    }
    if (number == 0 || !is_digit(v.front()) || !dotted) {
        return std::nullopt;
    }
    // A line that is the banner itself (NCCL 2.3 to 2.8 printed it without a prefix) may lack
    // "+cuda" too: a build's own suffix ("2.18.3-1", "2.19.3+internal") or none.
    const auto marker =
        static_cast<std::size_t>(found->data() - text.data()) - std::string_view("NCCL version ").size();
    const std::string_view rest = found->substr(v.size());
    const bool whole_line = std::all_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(marker), is_space) &&
        std::all_of(rest.begin(), rest.end(), is_space) &&
        (number == v.size() || v[number] == '+' || v[number] == '-' || v[number] == '~');
    if (in_record || whole_line || v.find("+cuda") != std::string_view::npos) {
        return v;
    }
    return std::nullopt;
}

std::optional<NcclEnvSetting> parse_env_setting(std::string_view message)
{
    constexpr std::string_view marker = " set by environment to ";
    const std::size_t at = message.find(marker);
    if (at == std::string_view::npos) {
        return std::nullopt;
    }
    std::string_view before = message.substr(0, at);
    const std::size_t space = before.rfind(' ');
    NcclEnvSetting env;
    env.name = space == std::string_view::npos ? before : before.substr(space + 1);
    env.value = trim(message.substr(at + marker.size()));
    if (env.value.size() > 1 && env.value.back() == '.') {
        env.value.remove_suffix(1);
    }
    if (!env.name.starts_with("NCCL_")) {
        return std::nullopt;
    }
    return env;
}

std::optional<NcclChannelSummary> parse_channel_summary(std::string_view message)
{
    if (message.find(" coll channels,") == std::string_view::npos) {
        return std::nullopt;
    }
    NcclChannelSummary summary;
    const auto& w = words(message);
    for (std::size_t i = 0; i + 2 < w.size(); ++i) {
        long n = 0;
        if (!to_long(w[i], n) || !w[i + 2].starts_with("channels")) {
            continue;
        }
        const auto value = static_cast<unsigned>(std::min(n, max_rank));
        if (w[i + 1] == "coll") {
            summary.coll = value;
        } else if (w[i + 1] == "collnet") {
            summary.collnet = value;
        } else if (w[i + 1] == "nvls") {
            summary.nvls = value;
        }
    }
    return summary;
}

std::string warn_kind(std::string_view m)
{
    auto has = [&](std::string_view s) { return m.find(s) != std::string_view::npos; };
    // Failures whose telling words come late in the message, after request numbers and peers
    // (src/transport/net_ib.cc and src/proxy.cc of NCCL 2.7 to 2.19).
    static constexpr std::pair<std::string_view, std::string_view> late_words[] = {
        {"collective mismatch", "NET/IB collective mismatch (ranks posted different sizes)"},
        {"posted incorrect receive info", "NET/IB posted incorrect receive info"},
        {"Proxy Call to rank", "Proxy call to a rank failed"},
        {"Failed to execute operation", "Proxy service failed to execute an operation"},
    };
    for (const auto& [words_in, kind_of] : late_words) {
        if (has(words_in)) {
            return std::string(kind_of);
        }
    }
    if (has("Cuda failure")) {
        const std::size_t q = m.find('\'');
        const std::size_t e = q == std::string_view::npos ? q : m.find('\'', q + 1);
        if (e != std::string_view::npos && e - q < 80) {
            return "Cuda failure " + std::string(m.substr(q, e - q + 1));
        }
        return "Cuda failure";
    }
    if (has("Got completion")) {
        return "NET/IB completion error";
    }
    if (has("Connection closed by remote peer")) {
        return "Connection closed by remote peer";
    }
    if (const std::size_t at = m.find("Call to "); at != std::string_view::npos) {
        std::string_view call = m.substr(at + 8);
        call = call.substr(0, std::min(call.find(' '), std::size_t{48}));
        if (m.find(" failed", at) != std::string_view::npos) {
            return "Call to " + std::string(call) + " failed";
        }
    }
    if ((has("onnect to ") && has(" failed")) || has("exceeded retries") || has("exceeded timeouts") ||
        has("exceeded error retry")) {
        return "socket connect failed";
    }
    if (has("Failed to open libibverbs")) {
        return "Failed to open libibverbs";
    }
    if (has("NET/OFI")) {
        return "NET/OFI error";
    }
    // Anything else: its first words, with numbers and addresses blanked out; words that are
    // only numbers or addresses ("0/1", "0x7f..") are skipped, so that six words say something.
    std::string kind;
    int count = 0;
    for (std::string_view word : words(m)) {
        if (count == 6) {
            break;
        }
        if (std::all_of(word.begin(), word.end(), [](char c) { return is_digit(c) || c == '/' || c == ','; }) ||
            word.starts_with("0x")) {
            continue;
        }
        std::string w;
        bool digits = false;
        for (char c : word) {
            if (is_digit(c)) {
                if (!digits) {
                    w.push_back('N');
                }
                digits = true;
            } else {
                w.push_back(c);
                digits = false;
            }
        }
        if (w.find('<') != std::string::npos || w.starts_with("0x")) {
            w = "ADDR";
        }
        kind += (kind.empty() ? "" : " ") + w;
        ++count;
    }
    while (!kind.empty() && (kind.back() == ':' || kind.back() == ',' || kind.back() == '.')) {
        kind.pop_back();
    }
    return kind.empty() ? "(empty)" : kind;
}

std::optional<WatchdogTimeout> parse_watchdog(std::string_view line)
{
    const std::size_t at = line.find("Watchdog caught collective operation timeout");
    if (at == std::string_view::npos) {
        return std::nullopt;
    }
    WatchdogTimeout w;
    std::string_view rest = line.substr(at);
    auto field = [&](std::string_view key) -> std::string_view {
        const std::size_t k = rest.find(key);
        if (k == std::string_view::npos) {
            return {};
        }
        std::string_view v = rest.substr(k + key.size());
        return v.substr(0, std::min({v.find(','), v.find(')'), v.find(' ')}));
    };
    to_long(field("SeqNum="), w.seq);
    w.op = std::string(field("OpType=").substr(0, 32));
    to_long(field("Timeout(ms)="), w.timeout_ms);
    to_long(field("ran for "), w.ran_ms);
    std::string_view before = line.substr(0, at);
    for (std::string_view tag : {"[Rank ", "[rank"}) {
        const std::size_t r = before.rfind(tag);
        if (r != std::string_view::npos) {
            std::string_view v = before.substr(r + tag.size());
            long n = 0;
            if (consume_number(v, n) && n < max_rank) {
                w.rank = static_cast<int>(n);
                break;
            }
        }
    }
    return w;
}

std::optional<std::string_view> parse_comm_error(std::string_view line)
{
    auto found = after(line, "NCCL error in: ");
    if (!found) {
        return std::nullopt;
    }
    std::string_view rest = *found;
    const std::size_t comma = rest.find(", ");
    if (comma == std::string_view::npos) {
        return trim(rest.substr(0, 160));
    }
    rest = rest.substr(comma + 2);
    rest = rest.substr(0, rest.find(", NCCL version"));
    return trim(rest.substr(0, 160));
}

} // namespace base::nccl
