// libFuzzer targets for every parser gpurun and gpudoctor feed with outside text. Built with -DGPUKIT_FUZZ=ON
// (clang); FUZZ_TARGET selects the parser. A parser may reject input with probes::Error, never
// crash, hang or leak; what it accepts must survive a round trip.
#include "doctor/check/gpu_scope.hpp"
#include "doctor/check/policy.hpp"
#include "doctor/check/report.hpp"
#include "doctor/check/runner.hpp"
#include "doctor/check/snapshot.hpp"
#include "doctor/checks/checks.hpp"
#include "doctor/fit/catalog.hpp"
#include "doctor/fit/search.hpp"
#include "doctor/profile/report.hpp"
#include "launcher/helper_args.hpp"
#include "launcher/hostfile.hpp"
#include "launcher/node_list.hpp"
#include "launcher/pack.hpp"
#include "launcher/profile.hpp"
#include "launcher/shell_words.hpp"
#include "probes/byte_size.hpp"
#include "probes/cpu_set.hpp"
#include "probes/error.hpp"
#include "probes/gpu_inventory.hpp"
#include "probes/nccl/line_scan.hpp"
#include "probes/nccl/log.hpp"
#include "probes/nsys/reader.hpp"
#include "probes/pci_address.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::vector<probes::Gpu> fuzz_gpus()
{
    std::vector<probes::Gpu> gpus(3);
    for (unsigned i = 0; i < 3; ++i) {
        gpus[i].physical_index = i;
        gpus[i].bus_id = probes::PciAddress{0, static_cast<std::uint8_t>(i + 1), 0, 0};
        gpus[i].uuid = "GPU-" + std::to_string(i) + "abc";
        gpus[i].mig_uuids = {"MIG-" + std::to_string(i)};
    }
    return gpus;
}

void fuzz_one(const std::string& text)
{
#if FUZZ_TARGET == 1
    auto set = probes::CpuSet::parse(text);
    if (probes::CpuSet::parse(set.to_list()) != set) {
        std::abort();
    }
#elif FUZZ_TARGET == 2
    if (auto a = probes::PciAddress::parse(text)) {
        if (probes::PciAddress::parse(a->to_string()) != a) {
            std::abort();
        }
    }
#elif FUZZ_TARGET == 3
    // Hostfiles and -H lists, then --pack over the hosts read: the fewest hosts, most free first,
    // in the order given, every host either chosen or left out with a reason. A smaller host limit
    // than gpurun's keeps each run fast (a million hosts take seconds under the sanitizers).
    constexpr std::size_t limit = 20000;
    std::vector<launcher::HostSlots> hosts;
    try {
        hosts = launcher::parse_hostfile(text, "fuzz", limit);
    } catch (const probes::Error&) {
        hosts = launcher::parse_host_list(text, "--free-gpus", 0, limit);
    }
    if (hosts.size() > limit) {
        std::abort();
    }
    std::vector<launcher::HostCapacity> free;
    unsigned total = 0;
    for (const auto& h : hosts) {
        free.push_back(launcher::HostCapacity{h.name, h.slots.value_or(0)});
        total += h.slots.value_or(0);
    }
    const unsigned ranks = 1 + static_cast<unsigned>(text.size() % (total + 2));
    const unsigned fewest = launcher::fewest_hosts(free, ranks);
    if ((fewest == 0) != (ranks > total)) {
        std::abort();
    }
    if (fewest != 0) {
        const auto choice = launcher::pack_hosts(free, ranks);
        unsigned held = 0;
        std::size_t next = 0;
        for (const auto& c : choice.chosen) {
            while (next < free.size() && free[next].name != c.name) {
                ++next; // chosen hosts keep the order given
            }
            if (next == free.size() || *c.slots != free[next].free) {
                std::abort();
            }
            ++next;
            held += *c.slots;
        }
        if (choice.chosen.size() != fewest || held < ranks ||
            choice.chosen.size() + choice.left_out.size() != free.size()) {
            std::abort();
        }
        for (const auto& l : choice.left_out) {
            if (l.reason.empty()) {
                std::abort();
            }
        }
    }
#elif FUZZ_TARGET == 4
    static const auto gpus = fuzz_gpus();
    auto pool = probes::select_visible(gpus, text);
    if (pool.size() > 3 * text.size() + 3) {
        std::abort();
    }
#elif FUZZ_TARGET == 5
    std::vector<std::string> args;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        std::size_t nul = text.find('\0', pos);
        args.push_back(text.substr(pos, nul == std::string::npos ? std::string::npos : nul - pos));
        if (nul == std::string::npos) {
            break;
        }
        pos = nul + 1;
    }
    auto parsed = launcher::parse_helper_arguments(args);
    if (launcher::parse_helper_arguments(launcher::helper_arguments(parsed)) != parsed) {
        std::abort();
    }
#elif FUZZ_TARGET == 6
    probes::nccl::Analyzer analyzer;
    analyzer.read_text(text, "fuzz.log");
    const auto analysis = analyzer.analysis();
    std::uint64_t sum = 0;
    for (auto n : analysis.counts) {
        sum += n;
    }
    const std::uint64_t newlines = static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
    if (sum != analysis.connections || analysis.lines != newlines + (text.empty() || text.back() == '\n' ? 0 : 1)) {
        std::abort();
    }
    (void)probes::nccl::render_json(analysis).dump();
    (void)probes::nccl::render_text(analysis, true);
    // The scanner finds the same lines whether a text comes in one block or in two split at a newline.
    const std::size_t cut = text.find('\n', text.size() / 2);
    if (cut != std::string::npos) {
        probes::nccl::LineScanner whole;
        probes::nccl::LineScanner parts;
        std::vector<probes::nccl::LineRef> a;
        std::vector<probes::nccl::LineRef> b;
        whole.scan(text.data(), text.size(), a);
        parts.scan(text.data(), cut + 1, b);
        const std::size_t first = b.size();
        parts.scan(text.data() + cut + 1, text.size() - cut - 1, b);
        for (std::size_t i = first; i < b.size(); ++i) {
            b[i].offset += cut + 1;
        }
        auto same = [](const probes::nccl::LineRef& x, const probes::nccl::LineRef& y) {
            return x.offset == y.offset && x.size == y.size && x.number == y.number;
        };
        if (a.size() != b.size() || !std::equal(a.begin(), a.end(), b.begin(), same) ||
            whole.lines() != parts.lines()) {
            std::abort();
        }
    }
#elif FUZZ_TARGET == 7
    // A size is in (0, 2^60]; printed, it reads back within the two decimals' rounding.
    const std::uint64_t bytes = probes::parse_byte_size(text, "fuzz");
    if (bytes == 0 || bytes > (std::uint64_t{1} << 60)) {
        std::abort();
    }
    const std::uint64_t again = probes::parse_byte_size(probes::format_bytes(bytes), "fuzz");
    const std::uint64_t diff = again > bytes ? again - bytes : bytes - again;
    if (diff > bytes / 100 + 1) {
        std::abort();
    }
#elif FUZZ_TARGET == 8
    // --profile-ranks: what is accepted is sorted, unique, and reads back from its printed form.
    const auto ranks = launcher::parse_rank_list(text, "fuzz");
    if (!std::is_sorted(ranks.begin(), ranks.end()) || std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end() ||
        launcher::parse_rank_list(launcher::format_rank_list(ranks), "fuzz") != ranks) {
        std::abort();
    }
#elif FUZZ_TARGET == 9
    // --policy FILE over the built-in policy: accepted or a probes::Error, and what is accepted is
    // in range (a floor lookup on any name works). The built-in policy is read once and copied.
    static const doctor::check::Policy defaults = doctor::check::Policy::defaults();
    doctor::check::Policy policy = defaults;
    policy.merge_toml(text, "fuzz.toml");
    if (policy.pcie_fraction < 0 || policy.pcie_fraction > 1 || policy.copy_bytes == 0 || policy.copies == 0) {
        std::abort();
    }
    policy.floor_for(text.substr(0, 64));
#elif FUZZ_TARGET == 10
    // gpudoctor fit's data files: a user's --models file over the presets (read once, then copied),
    // and a GPU table.
    static const doctor::fit::ModelCatalog presets = doctor::fit::ModelCatalog::builtin();
    doctor::fit::ModelCatalog models = presets;
    try {
        models.merge_toml(text, "fuzz-models.toml");
    } catch (const probes::Error&) {
    }
    doctor::fit::GpuTable::from_toml(text, "fuzz-gpus.toml");
#elif FUZZ_TARGET == 11
    // fit --search: the command template ({batch} in NUL-separated arguments) and the verdict read
    // from a trial's output. Each argument keeps its other text; no argument gains or loses one.
    std::vector<std::string> argv;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= text.size(); ++i) {
        if (i == text.size() || text[i] == '\0') {
            argv.push_back(text.substr(start, i - start));
            start = i + 1;
        }
    }
    const unsigned batch = static_cast<unsigned>(text.size() * 7919U);
    try {
        const auto args = doctor::fit::expand_batch(argv, batch);
        const std::size_t grow = std::to_string(batch).size();
        for (std::size_t i = 0; i < argv.size(); ++i) {
            std::size_t count = 0;
            for (auto pos = argv[i].find("{batch}"); pos != std::string::npos; pos = argv[i].find("{batch}", pos + 7)) {
                ++count;
            }
            if (args.size() != argv.size() || args[i].size() != argv[i].size() - 7 * count + grow * count) {
                std::abort();
            }
        }
    } catch (const probes::Error&) {
        if (text.find("{batch}") != std::string::npos) {
            std::abort(); // a placeholder was there: expanding must not fail
        }
    }
    std::string evidence;
    doctor::fit::classify_trial(static_cast<int>(text.size() % 3), text.size() % 5 == 0, text, &evidence);
#elif FUZZ_TARGET == 12
    // Slurm lists: a smaller limit than gpurun's keeps each run fast; what is over it must fail.
    constexpr std::size_t limit = 20000;
    try {
        const auto names = launcher::expand_node_list(text, limit);
        if (names.empty() || names.size() > limit) {
            std::abort();
        }
        for (const auto& name : names) {
            if (name.empty() || name.size() > 253 || name.front() == '-' ||
                name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") !=
                    std::string::npos) {
                std::abort();
            }
        }
    } catch (const probes::Error&) {
    }
    // Per-node counts: what is accepted compresses to a text that expands to the same counts.
    const auto counts = launcher::expand_count_list(text, limit);
    if (counts.empty() || counts.size() > limit ||
        launcher::expand_count_list(launcher::compress_count_list(counts), limit) != counts) {
        std::abort();
    }
#elif FUZZ_TARGET == 13
    // Shell words: each word quoted in single quotes and split again gives the same words.
    const auto words = launcher::split_shell_words(text, "fuzz");
    std::string quoted;
    for (const auto& word : words) {
        quoted += " '";
        for (char c : word) {
            if (c == '\'') {
                quoted += "'\\''"; // close, an escaped quote, reopen
            } else {
                quoted += c;
            }
        }
        quoted += '\'';
    }
    if (launcher::split_shell_words(quoted, "fuzz") != words) {
        std::abort();
    }
#elif FUZZ_TARGET == 14
    // gpudoctor profile: the Nsight Systems SQLite reader, on mutated exports. SQLite reads from a
    // file, so each input is written to one private temporary file first. What the reader accepts
    // is summarised and printed as JSON, with every share a fraction. The file goes to $TMPDIR when
    // set: on a tmpfs, rewriting it costs no disk flush.
    static const std::string path = [] {
        const char* dir = std::getenv("TMPDIR");
        std::string name = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/fuzz-nsys-XXXXXX";
        const int fd = mkstemp(name.data());
        if (fd < 0) {
            std::abort();
        }
        close(fd);
        static std::string to_remove = name;
        std::atexit([] { std::remove(to_remove.c_str()); });
        return name;
    }();
    {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
            std::abort();
        }
        std::fclose(f);
    }
    const auto trace = probes::nsys::read_export(path);
    const auto summary = probes::nsys::summarize({trace});
    for (const auto& gpu : summary.gpus) {
        if (!(gpu.busy_share() >= 0 && gpu.busy_share() <= 1 && gpu.busy_share_with_copies() <= 1)) {
            std::abort();
        }
    }
    // As gpudoctor profile --json prints it: text that is not UTF-8 becomes U+FFFD.
    (void)doctor::profile::render_profile_json(summary).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
#elif FUZZ_TARGET == 15
    // gpudoctor check --from: a snapshot read, judged by every probe (the deep ones too) and
    // reported, as check --from does. Facts the reader lets through must not break a rule.
    static const auto probes = doctor::checks::select_probes("", "", true);
    static const auto policy = doctor::check::Policy::defaults();
    const doctor::check::Facts facts = doctor::check::read_snapshot(text, "fuzz.json");
    auto results = doctor::check::judge(probes, facts, policy, "fuzz.json");
    doctor::check::ReportOptions options;
    options.scope = doctor::check::gpu_scope(facts, "", nullptr);
    doctor::check::keep_in_scope(results, options.scope);
    const std::string text_report = doctor::check::render_text(results, facts, options);
    if (text_report.find('\x1b') != std::string::npos) {
        std::abort(); // a terminal escape from the snapshot reached the report
    }
    (void)doctor::check::render_json(results, facts, options)
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
#else
#error "FUZZ_TARGET must be 1..15"
#endif
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    try {
        fuzz_one(std::string(reinterpret_cast<const char*>(data), size));
    } catch (const probes::Error&) {
    }
    return 0;
}
