#include "base/nccl/line_scan.hpp"

#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace base::nccl {

namespace {

// Set bits in a 16-bit movemask (no popcnt instruction is assumed).
int popcount16(unsigned x)
{
    x = x - ((x >> 1) & 0x5555u);
    x = (x & 0x3333u) + ((x >> 2) & 0x3333u);
    x = (x + (x >> 4)) & 0x0f0fu;
    return static_cast<int>((x + (x >> 8)) & 0x1fu);
}

// Whether "NCCL " is in [p, end).
bool has_record_word(const char* p, const char* end)
{
    for (; end - p >= 5; ++p) {
        if (p[0] == 'N' && p[1] == 'C' && p[2] == 'C' && p[3] == 'L' && p[4] == ' ') {
            return true;
        }
    }
    return false;
}

constexpr std::uint64_t ones = 0x0101010101010101ULL;

std::size_t count_newlines(const char* p, const char* end)
{
    constexpr std::uint64_t high = 0x8080808080808080ULL;
    constexpr std::uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
    std::size_t n = 0;
    for (; end - p >= 8; p += 8) {
        std::uint64_t w = 0;
        std::memcpy(&w, p, 8);
        w ^= ones * '\n';
        // A zero byte (a newline before the xor) keeps its top bit clear through the add.
        const std::uint64_t zero = ~(((w & low7) + low7) | w | low7) & high;
        n += static_cast<std::size_t>(((zero >> 7) * ones) >> 56);
    }
    for (; p < end; ++p) {
        n += *p == '\n' ? 1 : 0;
    }
    return n;
}

struct Hit {
    const char* at = nullptr; ///< the "NCCL", nullptr when none
    const char* line_start = nullptr;
    std::uint64_t newlines = 0; ///< newlines from the scan start to the hit
};

// The first "NCCL" in [p, end), with its line start and the newlines before it; without a hit,
// `newlines` counts all of them.
Hit find_hit(const char* p, const char* end)
{
    Hit h;
    const char* last_newline = p - 1;
#if defined(__SSE2__)
    // 16 bytes at a time: 'N' here and 'L' three bytes on mark a candidate; newlines are counted
    // in the same pass.
    const __m128i n_byte = _mm_set1_epi8('N');
    const __m128i l_byte = _mm_set1_epi8('L');
    const __m128i nl_byte = _mm_set1_epi8('\n');
    while (end - p >= 19) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3));
        auto hits = static_cast<unsigned>(
            _mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, n_byte), _mm_cmpeq_epi8(b, l_byte))));
        const auto newline_bits = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(a, nl_byte)));
        while (hits != 0) {
            const int bit = __builtin_ctz(hits);
            if (p[bit + 1] == 'C' && p[bit + 2] == 'C') {
                const unsigned before = newline_bits & ((1u << bit) - 1);
                h.at = p + bit;
                h.newlines += static_cast<std::uint64_t>(popcount16(before));
                h.line_start = before != 0 ? p + (31 - __builtin_clz(before)) + 1 : last_newline + 1;
                return h;
            }
            hits &= hits - 1;
        }
        if (newline_bits != 0) {
            h.newlines += static_cast<std::uint64_t>(popcount16(newline_bits));
            last_newline = p + (31 - __builtin_clz(newline_bits));
        }
        p += 16;
    }
#endif
    const void* found = memmem(p, static_cast<std::size_t>(end - p), "NCCL", 4);
    const char* stop = found == nullptr ? end : static_cast<const char*>(found);
    const std::string_view gap(p, static_cast<std::size_t>(stop - p));
    h.newlines += count_newlines(p, stop);
    if (found != nullptr) {
        const std::size_t nl = gap.rfind('\n');
        h.at = stop;
        h.line_start = nl != std::string_view::npos ? p + nl + 1 : last_newline + 1;
    }
    return h;
}

} // namespace

void LineScanner::scan(const char* data, std::size_t size, std::vector<LineRef>& out)
{
    const char* p = data;
    const char* end = data + size;
    while (p < end) {
        if (m_skip_rest) {
            const void* nl = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
            if (nl == nullptr) {
                return;
            }
            m_skip_rest = false;
            p = static_cast<const char*>(nl) + 1;
            continue;
        }
        const char* start = nullptr;
        if (m_emit_next) {
            m_emit_next = false;
            start = p;
        } else {
            const Hit h = find_hit(p, end);
            m_lines += h.newlines;
            if (h.at == nullptr) {
                if (end[-1] != '\n') {
                    ++m_lines; // the last line of the input, without its newline
                }
                return;
            }
            start = h.line_start;
            p = h.at;
        }
        const void* nl = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
        const char* line_end = nl == nullptr ? end : static_cast<const char*>(nl);
        ++m_lines;
        out.push_back(
            LineRef{static_cast<std::size_t>(start - data), static_cast<std::size_t>(line_end - start), m_lines});
        // A line that ends in a record prefix ("... NCCL INFO"): its message may be the next line.
        const std::size_t tail = std::min<std::size_t>(static_cast<std::size_t>(line_end - start), 16);
        m_emit_next = has_record_word(line_end - tail, line_end);
        p = nl == nullptr ? end : line_end + 1;
    }
}

void LineScanner::scan_cut(const char* data, std::size_t size, std::vector<LineRef>& out)
{
    scan(data, size, out);
    m_skip_rest = true;
}

} // namespace base::nccl
