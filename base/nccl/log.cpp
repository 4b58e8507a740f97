#include "base/nccl/log.hpp"

#include "base/error.hpp"
#include "base/mapped_file.hpp"
#include "base/nccl/state.hpp"
#include "base/unique_fd.hpp"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <mutex>
#include <span>
#include <stdexcept>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <zlib.h>

// Reading NCCL logs: plain or gzip files and text, in blocks. A reading thread maps a regular
// file's blocks (or reads and inflates other input) and finds the lines that matter; the
// analysing thread cuts those into records and replays them into the state machine (state.hpp).

namespace base::nccl {

namespace {

class Source {
public:
    virtual ~Source() = default;
    /// Up to `size` bytes into `buffer`; 0 at the end.
    virtual std::size_t read(char* buffer, std::size_t size) = 0;
};

class FdSource : public Source {
public:
    FdSource(int fd, std::string name) : m_fd(fd), m_name(std::move(name)) { }
    std::size_t read(char* buffer, std::size_t size) override
    {
        for (;;) {
            const ssize_t n = ::read(m_fd, buffer, size);
            if (n >= 0) {
                return static_cast<std::size_t>(n);
            }
            if (errno != EINTR) {
                throw Error(fmt::format("cannot read {}: {}", m_name, std::strerror(errno)));
            }
        }
    }

private:
    int m_fd;
    std::string m_name;
};

/// Inflates gzip data (several members too, as `cat a.gz b.gz` makes) read from another source.
class GzipSource : public Source {
public:
    GzipSource(Source& in, std::string head, std::string name)
        : m_in(in), m_input(std::move(head)), m_name(std::move(name))
    {
        if (inflateInit2(&m_z, 16 + MAX_WBITS) != Z_OK) {
            throw Error(fmt::format("cannot read {}: zlib could not start", m_name));
        }
    }
    ~GzipSource() override { inflateEnd(&m_z); }
    GzipSource(const GzipSource&) = delete;
    GzipSource& operator=(const GzipSource&) = delete;

    std::size_t read(char* buffer, std::size_t size) override
    {
        m_z.next_out = reinterpret_cast<Bytef*>(buffer);
        m_z.avail_out = static_cast<uInt>(size);
        while (m_z.avail_out == size) {
            if (m_z.avail_in == 0) {
                if (m_offset >= m_input.size()) {
                    m_input.resize(read_size);
                    m_input.resize(m_in.read(m_input.data(), read_size));
                    m_offset = 0;
                }
                if (m_input.empty()) {
                    if (m_in_member) {
                        throw corrupt("the file ends inside compressed data");
                    }
                    return 0;
                }
                m_z.next_in = reinterpret_cast<Bytef*>(m_input.data() + m_offset);
                m_z.avail_in = static_cast<uInt>(m_input.size() - m_offset);
                m_offset = m_input.size();
            }
            m_in_member = true;
            const int rc = inflate(&m_z, Z_NO_FLUSH);
            if (rc == Z_STREAM_END) {
                m_in_member = false;
                inflateReset(&m_z);
            } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
                throw corrupt(m_z.msg != nullptr ? m_z.msg : "inflate failed");
            }
        }
        return size - m_z.avail_out;
    }

private:
    Error corrupt(const char* why) const
    {
        return Error(fmt::format("{}: corrupt gzip data ({}); check the file with 'gzip -t {}'", m_name, why, m_name));
    }

    Source& m_in;
    std::string m_input;
    std::size_t m_offset = 0;
    std::string m_name;
    z_stream m_z{};
    bool m_in_member = false;
};

/// Cuts the lines a scanner marked into NCCL records and replays them into the analyzer's state,
/// one line at a time (its records stay in the cache).
class LineRecords {
public:
    void read(std::string_view data, std::vector<LineRef>& lines, Analyzer::State& state, std::uint32_t input)
    {
        for (std::size_t i = 0; i < lines.size(); ++i) {
            const LineRef ref = lines[i];
            const std::string_view line = clean_line(data.substr(ref.offset, ref.size), m_scratch);
            m_records.clear();
            find_records(line, m_records);
            // Two NCCL 2.3 processes writing at once ("Xprefix Yprefix Ymessage"): X's message is
            // the next line, which the scanner did not mark (it holds no "NCCL").
            const bool interleaved = m_records.size() > 1 &&
                std::any_of(
                    m_records.begin(), m_records.end() - 1, [](const NcclRecord& r) { return r.message.empty(); });
            const std::size_t next = ref.offset + ref.size + 1;
            if (interleaved && next < data.size() && (i + 1 == lines.size() || lines[i + 1].number != ref.number + 1)) {
                const std::size_t nl = data.find('\n', next);
                const std::size_t end = nl == std::string_view::npos ? data.size() : nl;
                lines.insert(
                    lines.begin() + static_cast<std::ptrdiff_t>(i) + 1, LineRef{next, end - next, ref.number + 1});
            }
            state.process_line(line, std::span<NcclRecord>(m_records), Mark{input, ref.number});
        }
    }

private:
    std::vector<NcclRecord> m_records; ///< of the line being read
    std::string m_scratch;
};

/// A block of input with the lines in it to read.
struct Block {
    std::unique_ptr<char[]> buffer; ///< what was read, where the input is not mapped
    MappedWindow window; ///< the part of a file mapped
    std::string_view data; ///< the part of `buffer` or `window` in use
    std::vector<LineRef> lines;
    std::uint64_t lines_after = 0; ///< lines in the input up to the end of this block
};

/// Blocks go from the reading thread to the analysing one and back; three are in flight, so
/// memory stays flat whatever the input's size.
class BlockQueue {
public:
    BlockQueue()
    {
        for (int i = 0; i < 3; ++i) {
            m_free.push_back(std::make_unique<Block>());
        }
    }
    std::unique_ptr<Block> take_free() { return take(m_free); }
    std::unique_ptr<Block> take_full() { return take(m_full); }
    void give_free(std::unique_ptr<Block> b) { give(m_free, std::move(b)); }
    void give_full(std::unique_ptr<Block> b) { give(m_full, std::move(b)); }
    /// The reader is done (`error` set when it failed).
    void finish(std::exception_ptr error)
    {
        std::lock_guard lock(m_mutex);
        m_done = true;
        m_error = std::move(error);
        m_cv.notify_all();
    }
    /// The analyser gives up: the reader stops at its next block.
    void stop()
    {
        std::lock_guard lock(m_mutex);
        m_stopped = true;
        m_cv.notify_all();
    }
    std::exception_ptr error()
    {
        std::lock_guard lock(m_mutex);
        return m_error;
    }

private:
    std::unique_ptr<Block> take(std::deque<std::unique_ptr<Block>>& from)
    {
        std::unique_lock lock(m_mutex);
        const bool full = &from == &m_full;
        m_cv.wait(lock, [&] { return !from.empty() || m_stopped || (full && m_done); });
        if (from.empty() || m_stopped) {
            return nullptr;
        }
        auto b = std::move(from.front());
        from.pop_front();
        return b;
    }
    void give(std::deque<std::unique_ptr<Block>>& to, std::unique_ptr<Block> b)
    {
        std::lock_guard lock(m_mutex);
        to.push_back(std::move(b));
        m_cv.notify_all();
    }

    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<std::unique_ptr<Block>> m_free;
    std::deque<std::unique_ptr<Block>> m_full;
    bool m_done = false;
    bool m_stopped = false;
    std::exception_ptr m_error;
};

// Marks the lines to read in `data`: all of it at the end of the input, else up to its last
// newline (a line longer than a block is cut). Returns the bytes taken.
std::size_t take_lines(LineScanner& scanner, Block& b, std::string_view data, bool eof)
{
    b.lines.clear();
    std::size_t whole = data.size();
    const void* last = eof ? nullptr : memrchr(data.data(), '\n', data.size());
    if (eof) {
        scanner.scan(data.data(), data.size(), b.lines);
    } else if (last == nullptr) {
        scanner.scan_cut(data.data(), data.size(), b.lines);
    } else {
        whole = static_cast<std::size_t>(static_cast<const char*>(last) - data.data()) + 1;
        scanner.scan(data.data(), whole, b.lines);
    }
    b.data = data.substr(0, whole);
    b.lines_after = scanner.lines();
    return whole;
}

// The reading thread: fills blocks with whole lines and marks the lines to read.
void read_blocks(Source& source, std::string head, BlockQueue& queue)
{
    LineScanner scanner;
    std::string carry = std::move(head);
    for (;;) {
        std::unique_ptr<Block> b = queue.take_free();
        if (!b) {
            return;
        }
        if (!b->buffer) {
            b->buffer = std::make_unique_for_overwrite<char[]>(block_size + read_size);
        }
        char* buffer = b->buffer.get();
        std::memcpy(buffer, carry.data(), carry.size());
        std::size_t used = carry.size();
        bool eof = false;
        while (used < block_size && !eof) {
            const std::size_t n = source.read(buffer + used, read_size);
            used += n;
            eof = n == 0;
        }
        const std::size_t whole = take_lines(scanner, *b, std::string_view(buffer, used), eof);
        carry.assign(buffer + whole, used - whole);
        queue.give_full(std::move(b));
        if (eof) {
            return;
        }
    }
}

std::uint64_t file_size(int fd)
{
    struct stat st { };
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : 0;
}

// The reading thread for a regular file: blocks are windows of the file mapped, not copies. A log
// still being written is read up to its end when the reader gets there.
void read_mapped(int fd, std::uint64_t start, const std::string& name, BlockQueue& queue)
{
    LineScanner scanner;
    std::uint64_t pos = start;
    std::uint64_t size = file_size(fd);
    for (;;) {
        std::unique_ptr<Block> b = queue.take_free();
        if (!b) {
            return;
        }
        if (size - pos < block_size) {
            size = std::max(size, file_size(fd));
        }
        const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(size - pos, block_size));
        if (!b->window.map(fd, pos, len)) {
            throw Error(fmt::format("cannot read {}: {}", name, std::strerror(errno)));
        }
        const bool eof = pos + len == size;
        pos += take_lines(scanner, *b, b->window.bytes(), eof);
        queue.give_full(std::move(b));
        if (eof) {
            return;
        }
    }
}

// Whether `fd` is a file that can be read through MappedWindow from `start`.
bool can_map(int fd, std::uint64_t start)
{
    if (file_size(fd) <= start) {
        return false; // pipes, devices, /proc files whose size says nothing, nothing left
    }
    MappedWindow first;
    return first.map(fd, start, 1);
}

} // namespace

bool LinkTally::add_ring(const std::vector<int>& ranks, Mark where)
{
    if (rings.size() >= max_rings || std::find(rings.begin(), rings.end(), ranks) != rings.end()) {
        return false;
    }
    note(first_ring, where);
    rings.push_back(ranks);
    return true;
}

void LinkTally::merge(const LinkTally& other)
{
    for (const auto& [key, edge] : other.edges) {
        EdgeCount& mine = edges[key];
        mine.count += edge.count;
        if (edge.first.before(mine.first)) {
            mine.first = edge.first;
        }
    }
    for (const auto& [rank, host] : other.local_host) {
        local_host.try_emplace(rank, host);
    }
    for (const auto& ring : other.rings) {
        add_ring(ring, other.first_ring);
    }
    for (const auto& [host, n] : other.nvls_lines) {
        nvls_lines[host] += n;
    }
    if (other.first_nvls.before(first_nvls)) {
        first_nvls = other.first_nvls;
    }
}

Analyzer::Analyzer(const Limits& limits, Inputs inputs) : m_state(std::make_unique<State>())
{
    m_state->limits = limits;
    m_state->one_job = inputs == Inputs::one_job;
}
Analyzer::~Analyzer() = default;

void Analyzer::read_file(const std::string& path, const std::string& shown)
{
    const bool is_stdin = path == "-";
    const UniqueFd opened(is_stdin ? -1 : open(path.c_str(), O_RDONLY | O_CLOEXEC));
    const int fd = is_stdin ? STDIN_FILENO : opened.get();
    if (fd < 0) {
        throw Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    }
    const std::string name = !shown.empty() ? shown : is_stdin ? "-" : path;
    // The first bytes tell gzip from text; they are read here and handed on.
    FdSource raw(fd, name);
    std::string head(2, '\0');
    std::size_t got = 0;
    while (got < 2) {
        const std::size_t n = raw.read(head.data() + got, 2 - got);
        if (n == 0) {
            break;
        }
        got += n;
    }
    head.resize(got);
    const std::uint32_t input = m_state->add_input(name);
    const bool gzip =
        got == 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b;

    // One thread reads (or maps), decompresses and finds the lines; this one analyses them.
    BlockQueue queue;
    // A regular file is mapped from where its reading started (stdin may be part-read).
    const off_t at = lseek(fd, 0, SEEK_CUR);
    const std::uint64_t start = at >= static_cast<off_t>(got) ? static_cast<std::uint64_t>(at) - got : 0;
    const bool mapped = !gzip && at >= static_cast<off_t>(got) && can_map(fd, start);
    const std::uint64_t pages_lost = MappedWindow::pages_lost();
    std::thread reader([&] {
        try {
            if (gzip) {
                GzipSource gz(raw, head, name);
                read_blocks(gz, {}, queue);
            } else if (mapped) {
                read_mapped(fd, start, name, queue);
            } else {
                read_blocks(raw, head, queue);
            }
            queue.finish(nullptr);
        } catch (...) {
            queue.finish(std::current_exception());
        }
    });
    LineRecords found;
    try {
        while (std::unique_ptr<Block> b = queue.take_full()) {
            found.read(b->data, b->lines, *m_state, input);
            m_state->lines = m_state->lines_before + b->lines_after;
            m_state->facts[input].lines = b->lines_after;
            queue.give_free(std::move(b));
        }
    } catch (...) {
        queue.stop();
        reader.join();
        throw;
    }
    reader.join();
    if (auto error = queue.error()) {
        std::rethrow_exception(error);
    }
    if (mapped && MappedWindow::pages_lost() != pages_lost) {
        throw Error(fmt::format(
            "{} shrank while it was being read (truncated or rotated?); read a copy of it, or read it again", name));
    }
    m_state->finish_input();
}

void Analyzer::skip(const std::string& path)
{
    m_state->skipped.push_back(path);
}

namespace {

bool ends_with_any(std::string_view name, std::span<const std::string_view> suffixes)
{
    return std::any_of(suffixes.begin(), suffixes.end(), [&](std::string_view s) { return name.ends_with(s); });
}

// Whether the first 64 KiB of `path` are gzip data or hold an NCCL record.
bool starts_like_log(const std::string& path)
{
    const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) {
        return true; // reading it says why it cannot be read
    }
    std::string head(64 << 10, '\0');
    std::size_t got = 0;
    while (got < head.size()) {
        const ssize_t n = ::read(fd.get(), head.data() + got, head.size() - got);
        if (n <= 0) {
            break;
        }
        got += static_cast<std::size_t>(n);
    }
    head.resize(got);
    if (head.starts_with("\x1f\x8b")) {
        return true;
    }
    std::string scratch;
    std::vector<NcclRecord> records;
    for (std::size_t at = 0; at < head.size() && records.empty();) {
        const std::size_t newline = std::min(head.find('\n', at), head.size());
        find_records(clean_line(std::string_view(head).substr(at, newline - at), scratch), records);
        at = newline + 1;
    }
    return !records.empty();
}

} // namespace

bool looks_like_log(const std::string& path)
{
    std::string name = std::filesystem::path(path).filename().string();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    static constexpr std::string_view documents[] = {"readme", "license", "licence", "changelog", "copying", "notice"};
    static constexpr std::string_view logs[] = {".log", ".txt", ".out", ".err", ".gz"};
    static constexpr std::string_view not_logs[] = {".md", ".rst", ".html", ".htm", ".pdf", ".json", ".jsonl", ".yaml",
        ".yml", ".toml", ".ini", ".cfg", ".csv", ".xml", ".py", ".sh", ".ipynb", ".sqlite", ".nsys-rep", ".qdrep",
        ".png", ".jpg", ".jpeg", ".svg", ".tar", ".zip", ".pt", ".ckpt", ".safetensors"};
    if (std::any_of(
            std::begin(documents), std::end(documents), [&](std::string_view d) { return name.starts_with(d); })) {
        return false;
    }
    if (ends_with_any(name, logs) || name.find(".log.") != std::string::npos) {
        return true;
    }
    if (ends_with_any(name, not_logs)) {
        return false;
    }
    return starts_like_log(path);
}

void Analyzer::read_text(std::string_view text, const std::string& name)
{
    read_more(add_input(name), text, true);
}

std::uint32_t Analyzer::add_input(const std::string& name)
{
    const std::uint32_t input = m_state->add_input(name);
    m_state->followed.emplace(input, State::Followed{});
    return input;
}

void Analyzer::read_more(std::uint32_t input, std::string_view text, bool last)
{
    State& s = *m_state;
    auto followed = s.followed.find(input);
    if (followed == s.followed.end()) {
        throw std::logic_error(fmt::format("read_more: input {} was not started with add_input", input));
    }
    State::Followed& f = followed->second;
    // As read_blocks does: whole lines are read, the start of the next waits in `carry`, and a
    // line longer than a block is cut (its rest skipped up to its newline).
    std::string_view piece; // read now
    std::string_view rest; // waits for its newline
    bool cut = false;
    if (last) {
        piece = text;
    } else if (const std::size_t newline = text.rfind('\n'); newline != std::string_view::npos) {
        piece = text.substr(0, newline + 1);
        rest = text.substr(newline + 1);
    } else {
        f.carry.append(text);
        if (f.carry.size() < block_size) {
            return;
        }
        cut = true;
    }
    std::string joined;
    if (!f.carry.empty()) {
        if (!cut) {
            f.carry.append(piece);
        }
        joined.swap(f.carry);
        piece = joined;
    }
    const std::uint64_t before = f.scanner.lines();
    std::vector<LineRef> lines;
    if (cut) {
        f.scanner.scan_cut(piece.data(), piece.size(), lines);
    } else {
        f.scanner.scan(piece.data(), piece.size(), lines);
    }
    f.carry.assign(rest);
    LineRecords().read(piece, lines, s, input);
    s.lines += f.scanner.lines() - before;
    s.facts[input].lines += f.scanner.lines() - before;
    s.lines_before = s.lines;
    if (last) {
        s.finish_input();
        s.followed.erase(followed);
    }
}

} // namespace base::nccl
