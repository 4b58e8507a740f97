// gpurun's host lists (-H and SLURM_JOB_NODELIST) against Slurm's own parser, `scontrol show
// hostnames` (Debian slurm-client; it needs only a configuration with a ClusterName, no daemon),
// over a few hundred generated lists. Every difference is one gpurun(1) lists as intended:
//   - text after a name's last ']' ("n[1-2]-ib") is kept; Slurm refuses the list;
//   - three or more bracket groups in one name give the same names in another order;
//   - a node listed twice is an error; Slurm lists it twice;
//   - an empty entry (",,", a comma at an end) is an error; Slurm skips it.
#include "base/launchers/node_list.hpp"
#include "base/process.hpp"
#include "tests/support/host_lists.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <gtest/gtest.h>
#include <set>
#include <sstream>

namespace {

using Names = std::vector<std::string>;

// A small deterministic generator (the same lists on every machine).
class Lists {
public:
    std::string list()
    {
        std::string out;
        const unsigned items = 1 + pick(3);
        for (unsigned i = 0; i < items; ++i) {
            std::string item = name();
            out += (i == 0 ? "" : ",") + item;
            if (pick(10) == 0) {
                out += "," + item; // the same node again
            }
        }
        if (pick(20) == 0) {
            out += pick(2) == 0 ? ",," + name() : ",";
        }
        if (pick(10) == 0) {
            out = " " + out + " ";
        }
        return out;
    }

private:
    unsigned pick(unsigned n)
    {
        m_state = m_state * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<unsigned>((m_state >> 33) % n);
    }

    std::string number(unsigned value, unsigned width)
    {
        std::string digits = std::to_string(value);
        return std::string(digits.size() < width ? width - digits.size() : 0, '0') + digits;
    }

    std::string group()
    {
        std::string out = "[";
        // Ranges mostly ascending and apart, sometimes one that ends below its start.
        const unsigned ranges = 1 + pick(3);
        unsigned next = pick(5);
        for (unsigned r = 0; r < ranges; ++r) {
            const unsigned lo = next + pick(4);
            out += (r == 0 ? "" : ",") + number(lo, 1 + pick(3));
            next = lo + 1;
            if (pick(3) != 0) {
                const unsigned hi = pick(25) == 0 ? lo - std::min(lo, 1U + pick(3)) : lo + pick(12);
                out += "-" + number(hi, 1 + pick(2));
                next = std::max(next, hi + 1);
            }
        }
        return out + "]";
    }

    std::string name()
    {
        static const char* const prefixes[] = {"n", "gpu", "a.b", "x-", "r", ""};
        static const char* const between[] = {"", "n", "-"};
        static const char* const suffixes[] = {"-ib", "x", ".site"};
        std::string out = prefixes[pick(6)];
        const unsigned weights[] = {0, 0, 1, 1, 1, 1, 1, 2, 2, 3};
        const unsigned groups = weights[pick(10)];
        for (unsigned g = 0; g < groups; ++g) {
            out += (g == 0 ? "" : between[pick(3)]) + group();
        }
        if (groups == 0 && out.empty()) {
            out = "login";
        }
        if (groups > 0 && pick(7) == 0) {
            out += suffixes[pick(3)];
        }
        return out;
    }

    std::uint64_t m_state = 20261203;
};

// What Slurm makes of a list: its names, or nothing when it says the list is invalid.
struct SlurmReading {
    bool valid = false;
    Names names;
};

// The names of the list with text after a name's last ']'.
bool has_text_after_a_group(const std::string& list)
{
    for (std::string_view entry : base::launchers::split_node_list(list)) {
        const auto close = entry.rfind(']');
        if (close != std::string_view::npos && close + 1 < entry.size()) {
            return true;
        }
    }
    return false;
}

bool has_three_groups(const std::string& list)
{
    for (std::string_view entry : base::launchers::split_node_list(list)) {
        if (std::count(entry.begin(), entry.end(), '[') >= 3) {
            return true;
        }
    }
    return false;
}

bool has_empty_entry(const std::string& list)
{
    const auto entries = base::launchers::split_node_list(list);
    return std::any_of(entries.begin(), entries.end(), [](std::string_view e) { return e.empty(); });
}

bool has_repeats(Names names)
{
    std::sort(names.begin(), names.end());
    return std::adjacent_find(names.begin(), names.end()) != names.end();
}

class HostListScontrol : public ::testing::Test {
protected:
    void SetUp() override
    {
        auto found = base::find_executable("scontrol", std::getenv("PATH"));
        if (!found) {
            GTEST_SKIP() << "scontrol is not installed (Debian package slurm-client)";
        }
        m_scontrol = *found;
        std::ofstream(m_dir / "slurm.conf") << "ClusterName=gpukit\nSlurmctldHost=localhost\n";
    }

    SlurmReading slurm(const std::string& list)
    {
        const auto r = test_support::run(
            {m_scontrol, "show", "hostnames", list}, {{"SLURM_CONF", (m_dir / "slurm.conf").string()}});
        SlurmReading out;
        // scontrol exits 0 even on an invalid list; it says so on either stream.
        if (r.exit_code != 0 || r.out.find("Invalid hostlist") != std::string::npos ||
            r.err.find("Invalid hostlist") != std::string::npos || r.err.find("error:") != std::string::npos) {
            return out;
        }
        out.valid = true;
        std::istringstream words(r.out);
        for (std::string w; words >> w;) {
            out.names.push_back(w);
        }
        return out;
    }

    test_support::TempDir m_dir;
    std::string m_scontrol;
};

} // namespace

TEST_F(HostListScontrol, EveryDifferenceFromSlurmIsOneGpurunDocuments)
{
    Lists lists;
    std::map<std::string, unsigned> seen; // how each list compared
    std::set<std::string> tried;
    while (tried.size() < 400) {
        const std::string list = lists.list();
        if (!tried.insert(list).second) {
            continue;
        }
        const auto option = test_support::hosts_from_option(list);
        const auto variable = test_support::hosts_from_variable(list);
        ASSERT_TRUE(option == variable) << "'" << list << "': -H gives " << testing::PrintToString(option.names)
                                        << option.error << ", SLURM_JOB_NODELIST "
                                        << testing::PrintToString(variable.names) << variable.error;
        const SlurmReading slurm = this->slurm(list);
        const bool ours = option.error.empty();
        if (!slurm.valid) {
            if (ours) {
                EXPECT_TRUE(has_text_after_a_group(list))
                    << "'" << list << "': Slurm refuses it, gpurun reads " << testing::PrintToString(option.names);
                ++seen["text after a group: gpurun reads it, Slurm refuses it"];
            } else {
                ++seen["both refuse"];
            }
            continue;
        }
        if (has_empty_entry(list)) {
            EXPECT_NE(option.error.find("empty host entry"), std::string::npos) << "'" << list << "': " << option.error;
            ++seen["an empty entry: gpurun refuses it"];
            continue;
        }
        if (has_repeats(slurm.names)) {
            EXPECT_NE(option.error.find("is listed more than once"), std::string::npos)
                << "'" << list << "': " << option.error;
            ++seen["a node twice: gpurun refuses it"];
            continue;
        }
        ASSERT_TRUE(ours) << "'" << list << "': Slurm reads " << testing::PrintToString(slurm.names)
                          << ", gpurun: " << option.error;
        if (has_three_groups(list)) {
            Names a = option.names;
            Names b = slurm.names;
            std::sort(a.begin(), a.end());
            std::sort(b.begin(), b.end());
            EXPECT_EQ(a, b) << "'" << list << "'";
            ++seen[option.names == slurm.names ? "same names, same order" : "three groups: same names, another order"];
            continue;
        }
        EXPECT_EQ(option.names, slurm.names) << "'" << list << "'";
        ++seen["same names, same order"];
    }
    std::string summary;
    for (const auto& [how, count] : seen) {
        summary += "\n  " + std::to_string(count) + "  " + how;
    }
    std::cout << "400 lists against scontrol show hostnames:" << summary << '\n';
    // The generator reaches every case, so each rule above is exercised.
    EXPECT_GE(seen["same names, same order"], 150U) << summary;
    EXPECT_GT(seen["text after a group: gpurun reads it, Slurm refuses it"], 0U) << summary;
    EXPECT_GT(seen["three groups: same names, another order"], 0U) << summary;
    EXPECT_GT(seen["a node twice: gpurun refuses it"], 0U) << summary;
    EXPECT_GT(seen["an empty entry: gpurun refuses it"], 0U) << summary;
    EXPECT_GT(seen["both refuse"], 0U) << summary;
}
