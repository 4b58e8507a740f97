#include "base/atomic_file.hpp"
#include "launcher/job_dir.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>

using launcher::RankRecord;
using test_support::error_of;
using test_support::TempDir;

namespace {

unsigned mode_of(const std::filesystem::path& p)
{
    struct stat st { };
    EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
}

} // namespace

TEST(JobDir, IdsAreRandomHexAndPathsLiveInTmpdir)
{
    const auto a = launcher::new_job_id();
    const auto b = launcher::new_job_id();
    EXPECT_TRUE(launcher::valid_job_id(a)) << a;
    EXPECT_NE(a, b);
    EXPECT_FALSE(launcher::valid_job_id("../../etc"));
    EXPECT_FALSE(launcher::valid_job_id("0123456789ABCDEF"));
    EXPECT_EQ(launcher::job_dir_path("0123456789abcdef", ""), "/tmp/gpurun-0123456789abcdef");
    EXPECT_EQ(launcher::job_dir_path("0123456789abcdef", "/scratch"), "/scratch/gpurun-0123456789abcdef");
}

TEST(JobDir, MadePrivateAndAcceptedOnlyWhenPrivate)
{
    TempDir tmp;
    const auto dir = tmp / "gpurun-0123456789abcdef";
    const mode_t old = umask(022);
    launcher::make_private_dir(dir.string());
    umask(old);
    EXPECT_EQ(mode_of(dir), 0700U);
    launcher::make_private_dir(dir.string()); // the node's other ranks find it made: fine

    chmod(dir.c_str(), 0755);
    EXPECT_EQ(error_of([&] { launcher::make_private_dir(dir.string()); }),
        "the job directory " + dir.string() +
            " is not private: its mode is 0755, not 0700; remove it, or set TMPDIR to a directory of your own");
    const auto trap = tmp / "gpurun-fedcba9876543210";
    std::filesystem::create_directory_symlink(dir, trap);
    EXPECT_NE(
        error_of([&] { launcher::make_private_dir(trap.string()); }).find("it is a symbolic link"), std::string::npos);
    std::ofstream(tmp / "file") << "x";
    EXPECT_NE(error_of([&] { launcher::make_private_dir((tmp / "file").string()); }).find("it is not a directory"),
        std::string::npos);
    EXPECT_NE(error_of([&] {
        launcher::make_private_dir((tmp / "missing/dir").string());
    }).find("cannot make the job directory"),
        std::string::npos);

    base::remove_private_dir(trap.string());
    EXPECT_TRUE(std::filesystem::exists(dir)) << "a symlink is not followed";
    base::remove_private_dir(dir.string());
    EXPECT_TRUE(std::filesystem::exists(dir)) << "mode 0755: not ours to remove";
    chmod(dir.c_str(), 0700);
    base::remove_private_dir(dir.string());
    EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(JobDir, RecordsRoundTripAndHalfWrittenFilesAreSkipped)
{
    TempDir tmp;
    const std::string dir = (tmp / "job").string();
    launcher::make_private_dir(dir);
    const RankRecord r3{3, 1, 4321, 987654321, *base::PciAddress::parse("00000000:0F:00.0")};
    const RankRecord r0{0, 0, 1234, 11, *base::PciAddress::parse("0000:07:00.0")};
    launcher::write_rank_record(dir, r3);
    launcher::write_rank_record(dir, r0);
    std::ofstream(tmp / "job/.rank-9.abc123") << "rank 9\npid 1\n"; // a writer's temporary file
    std::ofstream(tmp / "job/rank-7") << "rank 7\npid 77\n"; // not a whole record
    EXPECT_EQ(launcher::read_rank_records(dir), (std::vector<RankRecord>{r0, r3}));
    EXPECT_EQ(mode_of(tmp / "job/rank-3"), 0600U);
    EXPECT_TRUE(launcher::read_rank_records((tmp / "none").string()).empty());
}
