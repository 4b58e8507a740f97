// libFuzzer targets for every parser gpurun and gpudoctor feed with outside text. Built with -DGPUKIT_FUZZ=ON
// (clang): this file is compiled once, and each program fuzz_NAME runs the target NAME of the
// table at its end. A parser may reject input with base::Error, never crash, hang or leak; what
// it accepts must survive a round trip.
#include "base/atomic_file.hpp"
#include "base/byte_size.hpp"
#include "base/cpu_set.hpp"
#include "base/error.hpp"
#include "base/gpu_inventory.hpp"
#include "base/launchers/backends.hpp"
#include "base/launchers/hostfile.hpp"
#include "base/launchers/node_list.hpp"
#include "base/nccl/line_scan.hpp"
#include "base/nccl/log.hpp"
#include "base/nsys/reader.hpp"
#include "base/pci_address.hpp"
#include "doctor/engine/gpu_scope.hpp"
#include "doctor/engine/policy.hpp"
#include "doctor/engine/report.hpp"
#include "doctor/engine/runner.hpp"
#include "doctor/engine/snapshot.hpp"
#include "doctor/fit/catalog.hpp"
#include "doctor/fit/hf_config.hpp"
#include "doctor/fit/search.hpp"
#include "doctor/fleet/answers.hpp"
#include "doctor/probes/table.hpp"
#include "doctor/profile/report.hpp"
#include "launcher/helper_args.hpp"
#include "launcher/node_handoff.hpp"
#include "launcher/pack.hpp"
#include "launcher/rank_output.hpp"
#include "launcher/rank_profiler.hpp"
#include "launcher/shell_words.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

/// The name of the target, defined by the program (tests/fuzz/CMakeLists.txt writes it).
extern const char* const gpukit_fuzz_target;

namespace {

std::vector<base::Gpu> fuzz_gpus()
{
    std::vector<base::Gpu> gpus(3);
    for (unsigned i = 0; i < 3; ++i) {
        gpus[i].physical_index = i;
        gpus[i].bus_id = base::PciAddress{0, static_cast<std::uint8_t>(i + 1), 0, 0};
        gpus[i].uuid = "GPU-" + std::to_string(i) + "abc";
        gpus[i].mig_uuids = {"MIG-" + std::to_string(i)};
    }
    return gpus;
}

void fuzz_cpulist(const std::string& text)
{
    auto set = base::CpuSet::parse(text);
    if (base::CpuSet::parse(set.to_list()) != set) {
        std::abort();
    }
}

void fuzz_pci_address(const std::string& text)
{
    if (auto a = base::PciAddress::parse(text)) {
        if (base::PciAddress::parse(a->to_string()) != a) {
            std::abort();
        }
    }
}

void fuzz_hostfile(const std::string& text)
{
    // Hostfiles and -H lists, then --pack over the hosts read: the fewest hosts, most free first,
    // in the order given, every host either chosen or left out with a reason. A smaller host limit
    // than gpurun's keeps each run fast (a million hosts take seconds under the sanitizers).
    constexpr std::size_t limit = 20000;
    std::vector<base::launchers::HostSlots> hosts;
    try {
        hosts = base::launchers::parse_hostfile(text, "fuzz", limit);
    } catch (const base::Error&) {
        hosts = base::launchers::parse_host_list(text, "--free-gpus", 0, limit);
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
}

void fuzz_visible_devices(const std::string& text)
{
    static const auto gpus = fuzz_gpus();
    auto pool = base::select_visible(gpus, text);
    if (pool.size() > 3 * text.size() + 3) {
        std::abort();
    }
}

void fuzz_helper_args(const std::string& text)
{
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
}

// The plan gpurun hands to the helpers on its node: read under the key the text itself names (so
// that the ranks are read, not only refused for another node), it writes back to the same plan.
void fuzz_node_plan(const std::string& text)
{
    launcher::NodeKey key;
    unsigned ranks = 0;
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object()) {
        auto field = [&](const char* name) {
            return j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : std::string();
        };
        key.host = field("host");
        key.boot_id = field("boot_id");
        key.affinity = field("affinity");
        if (j.contains("visible_devices") && j["visible_devices"].is_string()) {
            key.visible_devices = j["visible_devices"].get<std::string>();
        }
        if (j.contains("ranks") && j["ranks"].is_array()) {
            ranks = static_cast<unsigned>(j["ranks"].size());
        }
    }
    const auto plan = launcher::read_node_plan(text, key, ranks);
    if (!plan) {
        return;
    }
    const std::string written = launcher::write_node_plan(key, *plan);
    const auto again = launcher::read_node_plan(written, key, ranks);
    if (!again || launcher::write_node_plan(key, *again) != written) {
        std::abort();
    }
}

// Form feeds cut the text into several inputs (up to 8), read as logs that may be of several
// jobs: every job's numbers add up to the whole, and each communicator is in one job.
void fuzz_nccl_jobs(const std::string& text)
{
    if (text.find('\f') == std::string::npos) {
        return;
    }
    for (const auto kind : {base::nccl::Inputs::may_be_several_jobs, base::nccl::Inputs::one_job}) {
        base::nccl::Analyzer analyzer(base::nccl::Limits{}, kind);
        std::size_t at = 0;
        for (int input = 0; at <= text.size(); ++input) {
            const std::size_t end = input == 7 ? text.size() : std::min(text.find('\f', at), text.size());
            analyzer.read_text(std::string_view(text).substr(at, end - at), "input" + std::to_string(input));
            at = end + 1;
        }
        const auto a = analyzer.analysis();
        std::uint64_t records = 0;
        std::uint64_t connections = 0;
        std::vector<int> owners(a.communicators.size(), 0);
        for (std::size_t j = 0; j < a.jobs.size(); ++j) {
            records += a.jobs[j].records;
            connections += a.jobs[j].connections;
            for (const std::size_t c : a.jobs[j].communicators) {
                if (c >= owners.size() || a.communicators[c].job != j) {
                    std::abort();
                }
                ++owners[c];
            }
        }
        if (records != a.records || connections != a.connections ||
            std::any_of(owners.begin(), owners.end(), [](int n) { return n != 1; }) ||
            (kind == base::nccl::Inputs::one_job && a.jobs.size() != 1)) {
            std::abort();
        }
        (void)base::nccl::render_json(a).dump();
        (void)base::nccl::render_text(a, false);
    }
}

void fuzz_nccl_log(const std::string& text)
{
    fuzz_nccl_jobs(text);
    base::nccl::Analyzer analyzer;
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
    (void)base::nccl::render_json(analysis).dump();
    (void)base::nccl::render_text(analysis, true);
    // The scanner finds the same lines whether a text comes in one block or in two split at a newline.
    const std::size_t cut = text.find('\n', text.size() / 2);
    if (cut != std::string::npos) {
        base::nccl::LineScanner whole;
        base::nccl::LineScanner parts;
        std::vector<base::nccl::LineRef> a;
        std::vector<base::nccl::LineRef> b;
        whole.scan(text.data(), text.size(), a);
        parts.scan(text.data(), cut + 1, b);
        const std::size_t first = b.size();
        parts.scan(text.data() + cut + 1, text.size() - cut - 1, b);
        for (std::size_t i = first; i < b.size(); ++i) {
            b[i].offset += cut + 1;
        }
        auto same = [](const base::nccl::LineRef& x, const base::nccl::LineRef& y) {
            return x.offset == y.offset && x.size == y.size && x.number == y.number;
        };
        if (a.size() != b.size() || !std::equal(a.begin(), a.end(), b.begin(), same) ||
            whole.lines() != parts.lines()) {
            std::abort();
        }
    }
}

void fuzz_byte_size(const std::string& text)
{
    // A size is in (0, 2^60]; printed, it reads back within the two decimals' rounding.
    const std::uint64_t bytes = base::parse_byte_size(text, "fuzz");
    if (bytes == 0 || bytes > (std::uint64_t{1} << 60)) {
        std::abort();
    }
    const std::uint64_t again = base::parse_byte_size(base::format_bytes(bytes), "fuzz");
    const std::uint64_t diff = again > bytes ? again - bytes : bytes - again;
    if (diff > bytes / 100 + 1) {
        std::abort();
    }
}

void fuzz_rank_list(const std::string& text)
{
    // --profile-ranks: what is accepted is sorted, unique, and reads back from its printed form.
    const auto ranks = launcher::parse_rank_list(text, "fuzz");
    if (!std::is_sorted(ranks.begin(), ranks.end()) || std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end() ||
        launcher::parse_rank_list(launcher::format_rank_list(ranks), "fuzz") != ranks) {
        std::abort();
    }
}

void fuzz_policy_toml(const std::string& text)
{
    // --policy FILE over the built-in policy: accepted or a base::Error, and what is accepted is
    // in range (a floor lookup on any name works). The built-in policy is read once and copied.
    static const doctor::engine::Policy defaults = doctor::engine::Policy::defaults();
    doctor::engine::Policy policy = defaults;
    policy.merge_toml(text, "fuzz.toml");
    if (policy.pcie_fraction < 0 || policy.pcie_fraction > 1 || policy.copy_bytes == 0 || policy.copies == 0) {
        std::abort();
    }
    policy.floor_for(text.substr(0, 64));
}

void fuzz_fit_toml(const std::string& text)
{
    // gpudoctor fit's data files: a user's --models file over the presets (read once, then copied),
    // and a GPU table. The file is placed in a directory that does not exist, so that a config it
    // names by a relative name is a shipped one (or none).
    static const doctor::fit::ModelCatalog presets = doctor::fit::ModelCatalog::builtin();
    doctor::fit::ModelCatalog models = presets;
    try {
        models.merge_toml(text, "/nonexistent-gpukit-fuzz/fuzz-models.toml");
    } catch (const base::Error&) {
    }
    doctor::fit::GpuTable::from_toml(text, "fuzz-gpus.toml");
}

void fuzz_fit_config(const std::string& text)
{
    // fit --config: a Hugging Face config.json; what it gives is planned, with and without LoRA,
    // tensor parallelism and eager attention (each on its own: a setup one model refuses does not
    // keep the others from running), so the arithmetic on the sizes it read runs too.
    doctor::fit::ModelSpec model;
    try {
        model = doctor::fit::model_from_config(text, "fuzz-config.json");
    } catch (const base::Error&) {
        return;
    }
    auto plan = [&](auto&& change) {
        doctor::fit::TrainingSetup setup;
        setup.precision = doctor::fit::Precision::bf16;
        change(setup);
        try {
            (void)doctor::fit::plan_memory(model, setup);
        } catch (const base::Error&) {
        }
    };
    plan([](doctor::fit::TrainingSetup&) {});
    plan([](doctor::fit::TrainingSetup& s) {
        s.lora.rank = 8;
        s.lora.base_bits = 4;
    });
    plan([](doctor::fit::TrainingSetup& s) { s.tp = 2; });
    plan([](doctor::fit::TrainingSetup& s) {
        s.attention = doctor::fit::Attention::eager;
        s.recompute = doctor::fit::Recompute::full;
    });
}

void fuzz_fit_command(const std::string& text)
{
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
    } catch (const base::Error&) {
        if (text.find("{batch}") != std::string::npos) {
            std::abort(); // a placeholder was there: expanding must not fail
        }
    }
    std::string evidence;
    doctor::fit::classify_trial(static_cast<int>(text.size() % 3), text.size() % 5 == 0, text, &evidence);
}

void fuzz_node_list(const std::string& text)
{
    // Slurm lists: a smaller limit than gpurun's keeps each run fast; what is over it must fail.
    constexpr std::size_t limit = 20000;
    try {
        const auto names = base::launchers::expand_node_list(text, limit);
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
    } catch (const base::Error&) {
    }
    // -H and SLURM_JOB_NODELIST read a list without counts alike: the same names, or both refuse.
    if (text.find(':') == std::string::npos) {
        auto read = [&](const std::function<std::vector<std::string>()>& parse) {
            try {
                return std::optional(parse());
            } catch (const base::Error&) {
                return std::optional<std::vector<std::string>>();
            }
        };
        const auto from_variable =
            read([&] { return base::launchers::parse_node_names(text, "SLURM_JOB_NODELIST", limit); });
        const auto from_option = read([&] {
            std::vector<std::string> names;
            for (const auto& h : base::launchers::parse_host_list(text, "-H", 1, limit)) {
                names.push_back(h.name);
            }
            return names;
        });
        if (from_variable != from_option) {
            std::abort();
        }
    }
    // Per-node counts: what is accepted compresses to a text that expands to the same counts.
    const auto counts = base::launchers::expand_count_list(text, limit);
    if (counts.empty() || counts.size() > limit ||
        base::launchers::expand_count_list(base::launchers::compress_count_list(counts), limit) != counts) {
        std::abort();
    }
}

void fuzz_shell_words(const std::string& text)
{
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
}

void fuzz_nsys_sqlite(const std::string& text)
{
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
    const auto trace = base::nsys::read_export(path);
    const auto summary = base::nsys::summarize({trace});
    for (const auto& gpu : summary.gpus) {
        if (!(gpu.busy_share() >= 0 && gpu.busy_share() <= 1 && gpu.busy_share_with_copies() <= 1)) {
            std::abort();
        }
    }
    // As gpudoctor profile --json prints it: text that is not UTF-8 becomes U+FFFD.
    (void)doctor::profile::render_profile_json(summary).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void fuzz_snapshot(const std::string& text)
{
    // gpudoctor check --from: a snapshot read, judged by every probe (the deep ones too) and
    // reported, as check --from does. Facts the reader lets through must not break a rule.
    static const auto probes = doctor::probes::select_probes("", "", true);
    static const auto policy = doctor::engine::Policy::defaults();
    const doctor::engine::Facts facts = doctor::engine::read_snapshot(text, "fuzz.json");
    auto results = doctor::engine::judge(probes, facts, policy, "fuzz.json");
    doctor::engine::ReportOptions options;
    options.scope = doctor::engine::gpu_scope(facts, "", nullptr);
    doctor::engine::keep_in_scope(results, options.scope);
    const std::string text_report = doctor::engine::render_text(results, facts, options);
    if (text_report.find('\x1b') != std::string::npos) {
        std::abort(); // a terminal escape from the snapshot reached the report
    }
    (void)doctor::engine::render_json(results, facts, options)
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// The tree for the path walker: directories, a file, links that stay inside it, a directory every
/// user can write to without the sticky bit ("open"), one with it ("sticky"), and (as root) another
/// user's link "theirs" to "their_target". Rebuilt when `rebuild` is set: after an input that
/// wrote, made or left anything (most inputs are refused and leave it as it was).
std::filesystem::path path_walker_sandbox(bool rebuild)
{
    namespace fs = std::filesystem;
    static const fs::path base = [] {
        const char* dir = std::getenv("TMPDIR");
        std::string name = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/fuzz-walk-XXXXXX";
        if (mkdtemp(name.data()) == nullptr) {
            std::abort();
        }
        static std::string to_remove = name;
        std::atexit([] {
            std::error_code ec;
            fs::remove_all(to_remove, ec);
        });
        return fs::path(name);
    }();
    const fs::path root = base / "s";
    if (!rebuild) {
        return root;
    }
    fs::remove_all(root);
    fs::create_directories(root / "a/b");
    for (const char* dir : {"open", "sticky", "their_target"}) {
        fs::create_directory(root / dir);
    }
    std::ofstream(root / "f") << "old";
    if (chmod((root / "open").c_str(), 0777) != 0 || chmod((root / "sticky").c_str(), 01777) != 0) {
        std::abort();
    }
    const std::pair<const char*, const char*> links[] = {{"self", "."}, {"sub", "a/b"}, {"loop", "loop"},
        {"dangling", "missing"}, {"flink", "f"}, {"up", "a/.."}, {"theirs", "their_target"}};
    for (const auto& [name, target] : links) {
        fs::create_symlink(target, root / name);
    }
    if (geteuid() == 0 && lchown((root / "theirs").c_str(), 65534, 65534) != 0) {
        std::abort();
    }
    return root;
}

std::size_t entries_under(const std::filesystem::path& dir)
{
    return static_cast<std::size_t>(std::distance(
        std::filesystem::recursive_directory_iterator(dir), std::filesystem::recursive_directory_iterator()));
}

void fuzz_path_walker(const std::string& text)
{
    // The first byte picks the writer, the rest is a path inside the sandbox. Paths that leave it
    // by their words ("..", "/...") or name the other user's directory are not tried: the links
    // in the sandbox are the only ways out of a directory, so that one is reached only through
    // "theirs" and must stay empty, as must "open".
    namespace fs = std::filesystem;
    if (text.empty() || text.size() > 4097) {
        return;
    }
    const std::string rel = text.substr(1);
    if (rel.empty() || rel.front() == '/' || rel.find('\0') != std::string::npos ||
        rel.find("their_target") != std::string::npos) {
        return;
    }
    for (std::size_t at = 0; at <= rel.size();) {
        const std::size_t slash = std::min(rel.find('/', at), rel.size());
        if (rel.compare(at, slash - at, "..") == 0) {
            return;
        }
        at = slash + 1;
    }
    static bool changed = true;
    const fs::path root = path_walker_sandbox(changed);
    changed = true; // until this input is known to have left the tree as it was
    const std::size_t before = entries_under(root);
    const std::string path = (root / rel).string();
    const int op = static_cast<unsigned char>(text[0]) % 3;
    bool done = false;
    try {
        if (op == 0) {
            base::write_file_atomically(path, "new", "--fuzz");
            std::ifstream in(path);
            const std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            if (back != "new") {
                std::abort(); // written somewhere else than the path names
            }
        } else if (op == 1) {
            close(base::open_output_file(path, "--fuzz"));
        } else {
            const std::string made = base::own_directory(path, "--fuzz");
            struct stat st { };
            const bool inside = made == root.string() || made.rfind(root.string() + "/", 0) == 0;
            if (!inside || lstat(made.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
                (st.st_mode & S_IWOTH) != 0) {
                std::abort(); // not a directory of the caller's inside the sandbox, by a resolved path
            }
        }
        done = true;
    } catch (const base::Error&) {
    }
    if (!fs::is_empty(root / "open") || !fs::is_empty(root / "their_target")) {
        std::abort(); // written where another user could redirect it
    }
    const bool same_entries = entries_under(root) == before;
    if (!done && op != 2 && !same_entries) {
        std::abort(); // a refused write left something behind (a temporary file)
    }
    changed = done || !same_entries;
}

void fuzz_failure_scanner(const std::string& text)
{
    // gpurun's reading of the ranks' standard error: the stream fed whole or in pieces (cut where
    // the first byte says) gives the same output and the same reports; a stream without a report
    // passes unchanged; each report found, printed again and read back, is the same report.
    // A line over 64 KiB is held whole but passed on in pieces: the two may then differ.
    std::size_t run = 0;
    bool long_line = false;
    for (char c : text) {
        run = c == '\n' ? 0 : run + 1;
        long_line = long_line || run > (60U << 10);
    }
    launcher::FailureScanner whole;
    const std::string whole_out = whole.feed(text) + whole.finish();
    if (text.find("gpurun: rank ") == std::string::npos && whole_out != text) {
        std::abort();
    }
    const std::size_t step = text.empty() ? 1 : static_cast<unsigned char>(text[0]) % 7 + 1;
    launcher::FailureScanner pieces;
    std::string pieces_out;
    for (std::size_t at = 0; at < text.size(); at += step) {
        pieces_out += pieces.feed(std::string_view(text).substr(at, step));
    }
    pieces_out += pieces.finish();
    if (!long_line && (pieces_out != whole_out || pieces.failures().size() != whole.failures().size())) {
        std::abort();
    }
    for (const auto& f : whole.failures()) {
        launcher::FailureScanner again;
        const std::string report = launcher::failure_report(f);
        if (!again.feed(report).empty() || again.failures().size() != 1 ||
            launcher::failure_report(again.failures()[0]) != report) {
            std::abort();
        }
    }
}

void fuzz_fleet_answers(const std::string& text)
{
    // gpudoctor fleet's reading of a launcher's output: any bytes are read without a crash, and a
    // node's framed answer put among them (between their lines, or cut into Open MPI's marked
    // pieces) comes back whole, unless the bytes hold frames of their own.
    namespace fleet = doctor::fleet;
    const std::size_t half = text.size() / 2;
    const auto got =
        fleet::collect_answers(std::string_view(text).substr(0, half), std::string_view(text).substr(half));
    for (const auto& [rank, answer] : got.answers) {
        if (answer.parts > answer.total || answer.payload.size() > std::size_t{answer.total} * fleet::frame_payload) {
            std::abort();
        }
        fleet::node_output("n", rank, got, {});
    }
    for (const auto& [rank, said] : got.said) {
        if (said.empty() || fleet::node_output("n", rank, got, {}).text.empty()) {
            std::abort();
        }
    }
    fleet::node_output("n", 0, got, {1, false, 1});
    // Bytes with frames or Open MPI's marks of their own may take the pieces for themselves.
    if (text.find(fleet::frame_marker.substr(0, 10)) != std::string::npos || text.find("]<std") != std::string::npos) {
        return;
    }
    std::string payload = text;
    payload.erase(std::remove(payload.begin(), payload.end(), '\n'), payload.end());
    const std::string frames = fleet::frame_answer(7, fleet::Answer::snapshot, payload);
    const std::size_t cut = text.empty() ? 0 : static_cast<unsigned char>(text[0]) % (frames.size() + 1);
    const std::string mark = "[1,7]<stdout>:";
    const std::string mixed =
        text + "\n" + mark + frames.substr(0, cut) + "[1,3]<stderr>:" + text + "\n" + mark + frames.substr(cut) + text;
    std::string sent; // as frame_answer writes it: every '<' as \u003c
    for (char c : payload) {
        sent += c == '<' ? std::string("\\u003c") : std::string(1, c);
    }
    for (const std::string& stream : {text + "\n" + frames + text, mixed}) {
        const auto back = fleet::collect_answers(stream, text);
        const auto it = back.answers.find(7);
        if (it == back.answers.end() || !it->second.complete() || it->second.payload != sent) {
            std::abort();
        }
    }
}

void fuzz_elf_needed(const std::string& text)
{
    // The libraries an ELF file needs, from any bytes: no crash, and each name is in the bytes.
    for (const auto& name : base::launchers::elf_needed(text)) {
        if (text.find(name) == std::string::npos) {
            std::abort();
        }
    }
    base::launchers::srun_mpi_for(text);
}

struct Target {
    const char* name;
    void (*run)(const std::string& text);
};

constexpr Target kTargets[] = {
    {"cpulist", fuzz_cpulist},
    {"pci_address", fuzz_pci_address},
    {"hostfile", fuzz_hostfile},
    {"visible_devices", fuzz_visible_devices},
    {"helper_args", fuzz_helper_args},
    {"node_plan", fuzz_node_plan},
    {"nccl_log", fuzz_nccl_log},
    {"byte_size", fuzz_byte_size},
    {"rank_list", fuzz_rank_list},
    {"policy_toml", fuzz_policy_toml},
    {"fit_toml", fuzz_fit_toml},
    {"fit_config", fuzz_fit_config},
    {"fit_command", fuzz_fit_command},
    {"node_list", fuzz_node_list},
    {"shell_words", fuzz_shell_words},
    {"nsys_sqlite", fuzz_nsys_sqlite},
    {"snapshot", fuzz_snapshot},
    {"path_walker", fuzz_path_walker},
    {"failure_scanner", fuzz_failure_scanner},
    {"fleet_answers", fuzz_fleet_answers},
    {"elf_needed", fuzz_elf_needed},
};

/// The target this program runs: its name is compiled into each fuzz_NAME program (fuzz_target.cpp).
const Target& chosen_target()
{
    static const Target& chosen = []() -> const Target& {
        for (const auto& t : kTargets) {
            if (std::strcmp(t.name, gpukit_fuzz_target) == 0) {
                return t;
            }
        }
        std::fprintf(stderr, "fuzz: no target named '%s'\n", gpukit_fuzz_target);
        std::abort();
    }();
    return chosen;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    try {
        chosen_target().run(std::string(reinterpret_cast<const char*>(data), size));
    } catch (const base::Error&) {
    }
    return 0;
}
