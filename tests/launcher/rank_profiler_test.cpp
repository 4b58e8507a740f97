#include "launcher/rank_profiler.hpp"

#include "launcher/cli.hpp"
#include "launcher/helper_args.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>

using launcher::ProfileOptions;
using launcher::Profiler;
using test_support::error_of;

namespace {

launcher::LaunchOptions parse(std::vector<std::string> args)
{
    args.insert(args.begin(), "gpurun");
    return launcher::parse_command_line(args).options;
}

ProfileOptions nsys_profile(std::vector<unsigned> ranks, std::string dir)
{
    ProfileOptions p;
    p.profiler = Profiler::nsys;
    p.ranks = std::move(ranks);
    p.dir = std::move(dir);
    return p;
}

void make_executable(const std::filesystem::path& file)
{
    std::ofstream(file) << "#!/bin/sh\n";
    chmod(file.c_str(), 0755);
}

} // namespace

TEST(RankList, ListsRangesAndAll)
{
    EXPECT_EQ(launcher::parse_rank_list("0,3", "--profile-ranks"), (std::vector<unsigned>{0, 3}));
    EXPECT_EQ(launcher::parse_rank_list("7,0-3,2", "--profile-ranks"), (std::vector<unsigned>{0, 1, 2, 3, 7}));
    EXPECT_EQ(launcher::parse_rank_list("5-5", "--profile-ranks"), (std::vector<unsigned>{5}));
    EXPECT_EQ(launcher::parse_rank_list("all", "--profile-ranks"), (std::vector<unsigned>{}));
    EXPECT_EQ(launcher::parse_rank_list("1048575", "--profile-ranks"), (std::vector<unsigned>{1048575}));
}

TEST(RankList, RejectsWhatIsNotARankList)
{
    EXPECT_EQ(error_of([] { launcher::parse_rank_list("0,x", "--profile-ranks"); }),
        "--profile-ranks 0,x: 'x' is not a rank number; write ranks as 0,3 or 0-7, or all");
    EXPECT_EQ(error_of([] { launcher::parse_rank_list("5-2", "--profile-ranks"); }),
        "--profile-ranks 5-2: the range 5-2 goes down; write 2-5; write ranks as 0,3 or 0-7, or all");
    EXPECT_EQ(error_of([] { launcher::parse_rank_list("", "--profile-ranks"); }),
        "--profile-ranks '': '' is not a rank number; write ranks as 0,3 or 0-7, or all");
    for (const char* bad : {"0,,3", "-1", "1-", "0-3-5", " 1", "1 ", "ALL", "+1", "0x3", "1048576", "99999999999"}) {
        EXPECT_NE(error_of([&] { launcher::parse_rank_list(bad, "--profile-ranks"); }), "") << bad;
    }
}

TEST(RankList, FormatsRunsAsRangesAndReadsBack)
{
    EXPECT_EQ(launcher::format_rank_list({0}), "0");
    EXPECT_EQ(launcher::format_rank_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
    EXPECT_EQ(launcher::format_rank_list({}), "all");
    for (const char* text : {"0", "0-3,8,10-11", "all", "2,4,6"}) {
        EXPECT_EQ(launcher::format_rank_list(launcher::parse_rank_list(text, "x")), text);
    }
}

TEST(Profile, ChosenRanks)
{
    EXPECT_TRUE(launcher::profiles_rank(nsys_profile({0, 3}, "/d"), 3));
    EXPECT_FALSE(launcher::profiles_rank(nsys_profile({0, 3}, "/d"), 1));
    EXPECT_TRUE(launcher::profiles_rank(nsys_profile({}, "/d"), 1234));
    EXPECT_FALSE(launcher::profiles_rank(ProfileOptions{}, 0)) << "no --profile, no profiler";
}

TEST(Profile, NsysCommandWrapsTheProgramByteExact)
{
    EXPECT_EQ(launcher::nsys_command("/runs/p", 3, {"python", "train.py", "--lr", "a b"}),
        (std::vector<std::string>{"nsys", "profile", "-o", "/runs/p/rank3", "--trace=cuda,nvtx,osrt,mpi",
            "--mpi-impl=openmpi", "--export=sqlite", "--force-overwrite=true", "python", "train.py", "--lr", "a b"}));
}

TEST(Profile, DefaultDirectoryIsStampedWithTheStartTime)
{
    const std::time_t now = 1'790'000'000;
    std::tm local{};
    localtime_r(&now, &local);
    char expected[64];
    std::strftime(expected, sizeof expected, "gpurun-profile-%Y%m%d-%H%M%S", &local);
    EXPECT_EQ(launcher::default_profile_dir(now), expected);
}

TEST(Profile, CommandLine)
{
    auto o = parse({"--profile", "nsys", "-np", "4", "prog"});
    EXPECT_EQ(o.profile.profiler, Profiler::nsys);
    EXPECT_EQ(o.profile.ranks, (std::vector<unsigned>{0})) << "rank 0 by default";
    EXPECT_EQ(o.profile.dir, "");
    EXPECT_EQ(o.program, (std::vector<std::string>{"prog"}));
    o = parse({"--profile=nsys", "--profile-ranks", "all", "--profile-dir", "runs/a", "prog", "--profile", "x"});
    EXPECT_EQ(o.profile.ranks, (std::vector<unsigned>{}));
    EXPECT_EQ(o.profile.dir, "runs/a");
    EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "--profile", "x"}));
    EXPECT_EQ(parse({"prog"}).profile, ProfileOptions{});

    EXPECT_EQ(error_of([] {
        parse({"--profile", "nsy", "prog"});
    }),
        "--profile nsy: expected one of nsys (did you mean nsys?)");
    EXPECT_EQ(error_of([] { parse({"--profile", "vtune", "prog"}); }), "--profile vtune: expected one of nsys");
    EXPECT_EQ(error_of([] {
        parse({"--profile-ranks", "0", "prog"});
    }),
        "--profile-ranks needs --profile: say which profiler runs the ranks (--profile nsys)");
    EXPECT_EQ(error_of([] {
        parse({"--profile-dir", "d", "prog"});
    }),
        "--profile-dir needs --profile: say which profiler writes the reports (--profile nsys)");
    EXPECT_EQ(error_of([] {
        parse({"--profile", "nsys", "--profile-dir", "", "prog"});
    }),
        "--profile-dir '': expected a directory");
    EXPECT_EQ(error_of([] {
        parse({"--profile", "nsys", "--profile-ranks", "1,a", "prog"});
    }),
        "--profile-ranks 1,a: 'a' is not a rank number; write ranks as 0,3 or 0-7, or all");
}

TEST(Profile, HelperArgumentsCarryTheProfile)
{
    launcher::HelperOptions o;
    o.profile = nsys_profile({0, 2, 3}, "/runs/my profile");
    o.program = {"prog"};
    const auto args = launcher::helper_arguments(o);
    EXPECT_EQ(args,
        (std::vector<std::string>{
            "--profile", "nsys", "--profile-dir", "/runs/my profile", "--profile-ranks", "0,2-3", "--", "prog"}));
    EXPECT_EQ(launcher::parse_helper_arguments(args), o);
    o.profile.ranks = {};
    EXPECT_EQ(launcher::parse_helper_arguments(launcher::helper_arguments(o)), o);

    EXPECT_NE(error_of([] { launcher::parse_helper_arguments({"--profile-ranks", "1", "--", "x"}); }), "");
    EXPECT_NE(error_of([] { launcher::parse_helper_arguments({"--profile", "nsys", "--", "x"}); }), "");
    EXPECT_NE(error_of([] {
        launcher::parse_helper_arguments({"--profile", "ncu", "--profile-dir", "/d", "--", "x"});
    }),
        "");
}

TEST(Profile, PrepareChecksRanksAndNsysAndMakesTheDirectoryAbsolute)
{
    test_support::TempDir tmp;
    std::filesystem::create_directories(tmp / "bin");
    const std::string with_nsys = (tmp / "bin").string();
    make_executable(tmp / "bin/nsys");
    std::vector<std::string> notes;

    auto p = nsys_profile({0, 3}, (tmp / "runs/./p/").string());
    launcher::prepare_profile(p, 4, false, false, with_nsys.c_str(), notes);
    EXPECT_EQ(p.dir, (tmp / "runs/p").string());
    EXPECT_FALSE(std::filesystem::exists(tmp / "runs")) << "made only right before the launch";
    launcher::create_profile_dir(p);
    EXPECT_TRUE(std::filesystem::is_directory(tmp / "runs/p"));
    EXPECT_TRUE(notes.empty());
    // A directory every user can write to (another user's 0777 directory was accepted silently):
    // anyone could replace the reports there.
    std::filesystem::create_directories(tmp / "open");
    std::filesystem::permissions(tmp / "open", std::filesystem::perms::all);
    p.dir = (tmp / "open").string();
    EXPECT_NE(error_of([&] { launcher::create_profile_dir(p); }).find("--profile-dir"), std::string::npos);
    p.dir = (tmp / "open/inside").string();
    EXPECT_NE(error_of([&] { launcher::create_profile_dir(p); }).find("--profile-dir"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(tmp / "open/inside")) << "nothing made below it";

    p = nsys_profile({0, 3, 5}, "/d");
    EXPECT_EQ(error_of([&] { launcher::prepare_profile(p, 4, false, false, with_nsys.c_str(), notes); }),
        "--profile-ranks 0,3,5: the job has 4 ranks (0-3); rank 5 is not in it");
    p = nsys_profile({1, 2}, "/d");
    EXPECT_EQ(error_of([&] { launcher::prepare_profile(p, 1, true, false, with_nsys.c_str(), notes); }),
        "--profile-ranks 1-2: the job has 1 rank (0); ranks 1-2 are not in it");

    const std::string empty = (tmp / "empty").string();
    p = nsys_profile({0}, "/d");
    EXPECT_EQ(error_of([&] { launcher::prepare_profile(p, 2, false, false, empty.c_str(), notes); }),
        "--profile nsys: nsys is not on PATH; install Nsight Systems (nsys) or add its bin directory (such as "
        "/opt/nvidia/nsight-systems/VERSION/bin) to PATH");
    launcher::prepare_profile(p, 2, true, true, empty.c_str(), notes);
    ASSERT_EQ(notes.size(), 2U) << "a dry run notes what a run refuses";
    EXPECT_EQ(notes[0].rfind("--profile nsys: nsys is not on PATH", 0), 0U);
    EXPECT_EQ(notes[1],
        "--profile nsys: ranks on other hosts write their reports to /d on their own host; use a --profile-dir on a "
        "shared file system to have them all here");

    // Nothing to do without --profile.
    ProfileOptions off;
    launcher::prepare_profile(off, 1, false, false, empty.c_str(), notes);
    launcher::create_profile_dir(off);
    EXPECT_EQ(off, ProfileOptions{});
}

TEST(Profile, DefaultDirectoryIsNewUnderTheWorkingDirectory)
{
    test_support::TempDir tmp;
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(tmp.path());
    make_executable(tmp / "nsys");
    std::vector<std::string> notes;
    auto first = nsys_profile({0}, "");
    launcher::prepare_profile(first, 1, false, false, tmp.path().c_str(), notes);
    launcher::create_profile_dir(first);
    auto second = nsys_profile({0}, "");
    launcher::prepare_profile(second, 1, false, false, tmp.path().c_str(), notes);
    std::filesystem::current_path(cwd);
    EXPECT_EQ(std::filesystem::path(first.dir).parent_path(), tmp.path());
    EXPECT_EQ(std::filesystem::path(first.dir).filename().string().rfind("gpurun-profile-", 0), 0U) << first.dir;
    EXPECT_NE(second.dir, first.dir) << "a second job in the same second gets its own directory";
}

TEST(Profile, EpilogueSaysWhereTheReportsAreAndHowToReadThem)
{
    test_support::TempDir tmp;
    const std::string dir = (tmp / "p").string();
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/rank0.sqlite") << "x";
    std::ofstream(dir + "/rank0.nsys-rep") << "x";
    std::ofstream(dir + "/rank2.sqlite") << "x";
    EXPECT_EQ(launcher::profile_epilogue(nsys_profile({0, 2, 3}, dir), 4),
        "gpurun: profile: the nsys reports of ranks 0,2 are in " + dir +
            " (rank<N>.nsys-rep for the Nsight Systems GUI, rank<N>.sqlite)\n"
            "gpurun: profile: no report from rank 3 in " +
            dir +
            ": nsys failed (see its output above), or the rank ran on another host and wrote there\n"
            "gpurun: profile: read them with: gpudoctor profile " +
            dir + "/rank0.sqlite " + dir + "/rank2.sqlite\n");
    for (unsigned r = 3; r < 6; ++r) {
        std::ofstream(dir + "/rank" + std::to_string(r) + ".sqlite") << "x";
    }
    const std::string all = launcher::profile_epilogue(nsys_profile({}, dir), 6);
    EXPECT_NE(all.find("the nsys reports of ranks 0,2-5 are in"), std::string::npos) << all;
    EXPECT_NE(all.find("no report from rank 1 in"), std::string::npos) << all;
    EXPECT_NE(all.find("read them with: gpudoctor profile " + dir + "\n"), std::string::npos) << all;
    EXPECT_EQ(launcher::profile_epilogue(nsys_profile({1}, dir), 2),
        "gpurun: profile: no report from rank 1 in " + dir +
            ": nsys failed (see its output above), or the rank ran on another host and wrote there\n");
    EXPECT_EQ(launcher::profile_epilogue(ProfileOptions{}, 2), "");
}
