#include "base/atomic_file.hpp"
#include "base/error.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using test_support::file_text;
using test_support::names_in;
using test_support::TempDir;

unsigned mode_of(const std::filesystem::path& file)
{
    struct stat st { };
    return stat(file.c_str(), &st) == 0 ? st.st_mode & 0777 : ~0U;
}

std::string error_of(const std::string& path, const std::string& content)
{
    try {
        base::write_file_atomically(path, content, "--prometheus");
    } catch (const base::Error& e) {
        return e.what();
    }
    return "";
}

class AtomicFileTest : public ::testing::Test {
protected:
    void SetUp() override { m_umask = umask(022); }
    void TearDown() override { umask(m_umask); }
    TempDir m_dir;
    mode_t m_umask = 0;
};

TEST_F(AtomicFileTest, WritesANewFileReadableByOthers)
{
    const auto file = m_dir / "node.prom";
    base::write_file_atomically(file.string(), "a 1\n", "--prometheus");
    EXPECT_EQ(file_text(file), "a 1\n");
    struct stat st { };
    ASSERT_EQ(stat(file.c_str(), &st), 0);
    // node_exporter runs as another user: mkstemp's 0600 would hide the file from it.
    EXPECT_EQ(st.st_mode & 0777, 0644U);
    EXPECT_EQ(names_in(m_dir.path()), std::vector<std::string>{"node.prom"});
}

TEST_F(AtomicFileTest, ModeFollowsTheUmask)
{
    umask(077);
    const auto file = m_dir / "private.xml";
    base::write_file_atomically(file.string(), "<x/>", "--junit");
    EXPECT_EQ(mode_of(file), 0600U);
}

TEST_F(AtomicFileTest, ReplacesAnExistingFileWholeAndAReaderKeepsTheOldOne)
{
    const auto file = m_dir / "node.prom";
    std::ofstream(file) << "old content, longer than the new one\n";
    std::ifstream reader(file); // a scrape in progress
    base::write_file_atomically(file.string(), "new\n", "--prometheus");
    EXPECT_EQ(file_text(file), "new\n");
    std::stringstream seen;
    seen << reader.rdbuf();
    EXPECT_EQ(seen.str(), "old content, longer than the new one\n");
    EXPECT_EQ(names_in(m_dir.path()), std::vector<std::string>{"node.prom"});
}

TEST_F(AtomicFileTest, WritesInTheWorkingDirectoryForABareName)
{
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(m_dir.path());
    base::write_file_atomically("bare.prom", "x 1\n", "--prometheus");
    std::filesystem::current_path(cwd);
    EXPECT_EQ(file_text(m_dir / "bare.prom"), "x 1\n");
}

TEST_F(AtomicFileTest, MissingDirectoryIsAnErrorNamingTheStep)
{
    const auto file = m_dir / "missing/node.prom";
    EXPECT_EQ(error_of(file.string(), "x"),
        "--prometheus " + file.string() + ": cannot create a temporary file in " + (m_dir / "missing").string() +
            ": No such file or directory");
    EXPECT_TRUE(names_in(m_dir.path()).empty());
}

TEST_F(AtomicFileTest, UnwritableDirectoryIsAnError)
{
    // /proc takes no new files, not even from root.
    EXPECT_NE(
        error_of("/proc/gpudoctor-test.prom", "x").find("cannot create a temporary file in /proc"), std::string::npos);
    if (geteuid() != 0) {
        const auto dir = m_dir / "ro";
        std::filesystem::create_directory(dir);
        std::filesystem::permissions(dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
        EXPECT_NE(error_of((dir / "node.prom").string(), "x").find("Permission denied"), std::string::npos);
        std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
        EXPECT_TRUE(names_in(dir).empty());
    }
}

TEST_F(AtomicFileTest, AFailedRenameLeavesNoTemporaryFileAndTheTargetAlone)
{
    // The temporary file is written, then cannot replace a directory of that name.
    const auto target = m_dir / "node.prom";
    std::filesystem::create_directory(target);
    std::ofstream(target / "inside") << "kept\n";
    const std::string error = error_of(target.string(), "metric 1\n");
    EXPECT_NE(error.find("--prometheus " + target.string() + ": cannot rename "), std::string::npos) << error;
    EXPECT_EQ(names_in(m_dir.path()), std::vector<std::string>{"node.prom"});
    EXPECT_EQ(file_text(target / "inside"), "kept\n");
}

TEST_F(AtomicFileTest, ALinkStaysALinkAndItsTargetIsReplaced)
{
    std::filesystem::create_directory(m_dir / "textfile");
    const auto real = m_dir / "textfile" / "node.prom";
    std::ofstream(real) << "old 1\n";
    const auto link = m_dir / "node.prom";
    std::filesystem::create_symlink("textfile/node.prom", link);
    EXPECT_EQ(error_of(link.string(), "new 2\n"), "");
    EXPECT_TRUE(std::filesystem::is_symlink(link));
    EXPECT_EQ(file_text(real), "new 2\n");
    EXPECT_EQ(names_in(m_dir / "textfile"), std::vector<std::string>{"node.prom"}) << "no temporary file left";

    const auto dangling = m_dir / "dangling.prom";
    std::filesystem::create_symlink("missing/node.prom", dangling);
    const std::string error = error_of(dangling.string(), "x");
    EXPECT_EQ(error.rfind("--prometheus " + dangling.string() + ": a symbolic link to nothing (", 0), 0U) << error;
    EXPECT_TRUE(std::filesystem::is_symlink(dangling));
}

TEST_F(AtomicFileTest, AFifoOrDeviceIsNotReplacedByAFile)
{
    // A root prolog given --junit /dev/null must not turn /dev/null into a file; a FIFO stands in
    // for the device here.
    const auto fifo = m_dir / "pipe";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    ASSERT_EQ(error_of(fifo.string(), "x"),
        "--prometheus " + fifo.string() + ": not a regular file (a FIFO); give the path of a file to write")
        << "the device below is not tried unless the FIFO was refused";
    EXPECT_TRUE(std::filesystem::is_fifo(fifo));
    EXPECT_EQ(names_in(m_dir.path()), std::vector<std::string>{"pipe"});
    EXPECT_EQ(error_of("/dev/null", "x"),
        "--prometheus /dev/null: not a regular file (a device); give the path of a file to write");
    EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

TEST_F(AtomicFileTest, WhenOneOfSeveralFilesCannotBeWrittenNoneIsReplaced)
{
    // check --prometheus ok.prom --junit /missing/j.xml replaced ok.prom before it failed.
    const auto prom = m_dir / "node.prom";
    std::ofstream(prom) << "old 1\n";
    const auto junit = m_dir / "missing" / "junit.xml";
    try {
        base::write_files_atomically(
            {{"--prometheus", prom.string(), "new 2\n"}, {"--junit", junit.string(), "<testsuites/>\n"}});
        ADD_FAILURE() << "no error";
    } catch (const base::Error& e) {
        EXPECT_EQ(
            std::string(e.what()).rfind("--junit " + junit.string() + ": cannot create a temporary file in ", 0), 0U)
            << e.what();
    }
    EXPECT_EQ(file_text(prom), "old 1\n");
    EXPECT_EQ(names_in(m_dir.path()), std::vector<std::string>{"node.prom"}) << "no temporary file left";

    std::filesystem::create_directory(m_dir / "missing");
    base::write_files_atomically(
        {{"--prometheus", prom.string(), "new 2\n"}, {"--junit", junit.string(), "<testsuites/>\n"}});
    EXPECT_EQ(file_text(prom), "new 2\n");
    EXPECT_EQ(file_text(junit), "<testsuites/>\n");
}

TEST_F(AtomicFileTest, EmptyNameAndDirectoryNameAreErrors)
{
    EXPECT_EQ(error_of("", "x"), "--prometheus '': expected a file name");
    EXPECT_EQ(error_of(m_dir.path().string() + "/", "x"),
        "--prometheus " + m_dir.path().string() + "/: expected a file name, not a directory");
    // "node.prom/." names a directory too (found by fuzz_path_walker: the file node.prom was written).
    EXPECT_EQ(error_of(m_dir.path().string() + "/node.prom/.", "x"),
        "--prometheus " + m_dir.path().string() + "/node.prom/.: expected a file name, not a directory");
    EXPECT_FALSE(std::filesystem::exists(m_dir / "node.prom"));
}

TEST_F(AtomicFileTest, AFileTheCallerOwnsKeepsItsMode)
{
    const auto file = m_dir / "node.prom";
    std::ofstream(file) << "old\n";
    std::filesystem::permissions(file,
        std::filesystem::perms::owner_read | std::filesystem::perms::owner_write | std::filesystem::perms::group_read);
    base::write_file_atomically(file.string(), "new\n", "--prometheus");
    EXPECT_EQ(mode_of(file), 0640U);
}

TEST_F(AtomicFileTest, ADirectoryEveryoneCanWriteIsRefusedUnlessSticky)
{
    const auto open_dir = m_dir / "open";
    std::filesystem::create_directory(open_dir);
    chmod(open_dir.c_str(), 0777);
    const auto file = open_dir / "node.prom";
    EXPECT_EQ(error_of(file.string(), "x"),
        "--prometheus " + file.string() + ": " + open_dir.string() +
            " can be written by every user and has no sticky bit (mode 0777); write the file to a directory that "
            "only you or root can change");
    EXPECT_TRUE(names_in(open_dir).empty());
    chmod(open_dir.c_str(), 01777); // as /tmp
    EXPECT_EQ(error_of(file.string(), "x"), "");
    EXPECT_EQ(file_text(file), "x");
}

TEST_F(AtomicFileTest, StreamedContentAppearsOnlyAtCommit)
{
    const auto file = m_dir / "m.json";
    std::ofstream(file) << "old";
    {
        base::AtomicFile out(file.string(), "--monitor-json");
        out.write("{\"a\":");
        out.write("1}");
        EXPECT_EQ(file_text(file), "old");
        EXPECT_EQ(names_in(m_dir.path()).size(), 2U) << "the temporary beside the target";
        out.commit();
    }
    EXPECT_EQ(file_text(file), "{\"a\":1}");
    {
        base::AtomicFile abandoned(file.string(), "--monitor-json");
        abandoned.write("never seen");
    }
    EXPECT_EQ(file_text(file), "{\"a\":1}");
    EXPECT_EQ(names_in(m_dir.path()), std::vector<std::string>{"m.json"});
}

// The attack a root Slurm prolog met: another user plants /tmp/gpudoctor.prom as a link to a file
// only root may write; root's --prometheus must not write through it. The other user is played by
// a link whose owner is set with lchown, which needs root.
class AtomicFileAsRoot : public AtomicFileTest {
protected:
    void SetUp() override
    {
        AtomicFileTest::SetUp();
        if (geteuid() != 0) {
            GTEST_SKIP() << "needs root, to give a link another user's uid";
        }
        chmod(m_dir.path().c_str(), 01777); // a shared directory like /tmp
        std::filesystem::create_directory(m_dir / "secret");
        chmod((m_dir / "secret").c_str(), 0700);
        m_victim = m_dir / "secret" / "shadow";
        std::ofstream(m_victim) << "root's data\n";
        chmod(m_victim.c_str(), 0600);
    }
    void plant(const std::filesystem::path& link, const std::filesystem::path& target, uid_t owner)
    {
        std::filesystem::create_symlink(target, link);
        ASSERT_EQ(lchown(link.c_str(), owner, owner), 0);
    }
    void expect_victim_untouched()
    {
        EXPECT_EQ(file_text(m_victim), "root's data\n");
        EXPECT_EQ(mode_of(m_victim), 0600U);
        EXPECT_EQ(names_in(m_dir / "secret"), std::vector<std::string>{"shadow"}) << "no temporary file left";
    }
    std::filesystem::path m_victim;
};

TEST_F(AtomicFileAsRoot, AnotherUsersLinkIsNotFollowed)
{
    const auto link = m_dir / "gpudoctor.prom";
    plant(link, m_victim, 65534);
    EXPECT_EQ(error_of(link.string(), "metric 1\n"),
        "--prometheus " + link.string() + ": " + link.string() +
            " is a symbolic link owned by another user (uid 65534); it is not followed: remove it, or write the file "
            "elsewhere");
    expect_victim_untouched();
    EXPECT_TRUE(std::filesystem::is_symlink(link));
}

TEST_F(AtomicFileAsRoot, AnotherUsersLinkInTheMiddleOfThePathIsNotFollowed)
{
    const auto link = m_dir / "reports";
    plant(link, m_dir / "secret", 65534);
    EXPECT_NE(error_of((link / "shadow").string(), "metric 1\n").find("is a symbolic link owned by another user"),
        std::string::npos);
    expect_victim_untouched();
}

TEST_F(AtomicFileAsRoot, RootsOwnLinkIsFollowed)
{
    const auto link = m_dir / "gpudoctor.prom";
    plant(link, m_victim, 0);
    EXPECT_EQ(error_of(link.string(), "metric 1\n"), "");
    EXPECT_EQ(file_text(m_victim), "metric 1\n");
    EXPECT_EQ(mode_of(m_victim), 0600U) << "the file root owns keeps its mode";
}

TEST_F(AtomicFileAsRoot, AnotherUsersFileInASharedDirectoryIsReplacedNotWrittenThrough)
{
    // Renaming over it replaces the name; the other user's inode (and any hard link to it) is
    // left as it was.
    const auto file = m_dir / "gpudoctor.prom";
    std::ofstream(file) << "theirs\n";
    ASSERT_EQ(chown(file.c_str(), 65534, 65534), 0);
    std::filesystem::create_hard_link(file, m_dir / "their-copy");
    EXPECT_EQ(error_of(file.string(), "ours\n"), "");
    EXPECT_EQ(file_text(file), "ours\n");
    EXPECT_EQ(file_text(m_dir / "their-copy"), "theirs\n");
    struct stat st { };
    ASSERT_EQ(stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0U);
    EXPECT_EQ(st.st_mode & 0777, 0644U) << "made as a new file of root's, not with the other user's mode";
}

TEST_F(AtomicFileAsRoot, ALiveOutputFileIsNotOpenedThroughAnotherUsersLink)
{
    // gpudoctor monitor --output: truncating the link's target would destroy root's file.
    const auto link = m_dir / "monitor.out";
    plant(link, m_victim, 65534);
    try {
        close(base::open_output_file(link.string(), "--output"));
        ADD_FAILURE() << "opened";
    } catch (const base::Error& e) {
        EXPECT_NE(std::string(e.what()).find("is a symbolic link owned by another user"), std::string::npos)
            << e.what();
    }
    expect_victim_untouched();
}

TEST_F(AtomicFileTest, ALiveOutputFileIsTruncatedAndADeviceOpenedAsItIs)
{
    const auto file = m_dir / "monitor.out";
    std::ofstream(file) << "an older, longer run\n";
    const int fd = base::open_output_file(file.string(), "--output");
    ASSERT_GE(fd, 0);
    EXPECT_EQ(write(fd, "new\n", 4), 4);
    close(fd);
    EXPECT_EQ(file_text(file), "new\n");
    const int null = base::open_output_file("/dev/null", "--output");
    EXPECT_GE(null, 0);
    close(null);
    EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

} // namespace

// Its missing parents are made by the checked walk: none through a directory that every user can
// write to without the sticky bit, nor through another user's link.
TEST(OwnDirectory, MissingParentsAreMadeOnlyWhereTheWalkGoes)
{
    test_support::TempDir dir;
    std::filesystem::create_directory(dir / "open");
    ASSERT_EQ(chmod((dir / "open").c_str(), 0777), 0);
    EXPECT_THROW(base::own_directory((dir / "open/x/logs").string(), "--nccl-log-dir"), base::Error);
    EXPECT_TRUE(std::filesystem::is_empty(dir / "open")) << "a parent was made in a directory the walk refuses";
    base::own_directory((dir / "mine/x/logs").string(), "--nccl-log-dir");
    struct stat st { };
    ASSERT_EQ(stat((dir / "mine/x").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700U);
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root, to give a link another user's uid";
    }
    std::filesystem::create_directory(dir / "target");
    std::filesystem::create_directory_symlink(dir / "target", dir / "theirs");
    ASSERT_EQ(lchown((dir / "theirs").c_str(), 65534, 65534), 0);
    EXPECT_THROW(base::own_directory((dir / "theirs/x/logs").string(), "--nccl-log-dir"), base::Error);
    EXPECT_TRUE(std::filesystem::is_empty(dir / "target")) << "a parent was made through another user's link";
}

// A directory that others write into by name (NCCL's logs): made, or the caller's own, and named
// by a path that nobody else can redirect.
TEST(OwnDirectory, MadeOrOwnedAndNamedWithoutOtherUsersLinks)
{
    test_support::TempDir dir;
    const auto made = base::own_directory((dir / "a/b/logs/").string(), "--nccl-log-dir");
    EXPECT_EQ(made, (dir / "a/b/logs").string());
    EXPECT_EQ(base::own_directory((dir / "a/b/logs/./").string(), "--nccl-log-dir"), made);
    struct stat st { };
    ASSERT_EQ(stat(made.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700U);
    // The caller's own link is followed and resolved away.
    std::filesystem::create_directory_symlink(dir / "a/b/logs", dir / "mine");
    EXPECT_EQ(base::own_directory((dir / "mine").string(), "--nccl-log-dir"), made);
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root, to give a link another user's uid";
    }
    std::filesystem::create_directory_symlink(dir / "a/b/logs", dir / "theirs");
    ASSERT_EQ(lchown((dir / "theirs").c_str(), 65534, 65534), 0);
    try {
        base::own_directory((dir / "theirs").string(), "--nccl-log-dir");
        ADD_FAILURE() << "another user's link was followed";
    } catch (const base::Error& e) {
        EXPECT_NE(std::string(e.what()).find("is a symbolic link owned by another user (uid 65534)"), std::string::npos)
            << e.what();
    }
    // A directory of another user's is refused even when reached without a link.
    ASSERT_EQ(chown(made.c_str(), 65534, 65534), 0);
    try {
        base::own_directory(made, "--nccl-log-dir");
        ADD_FAILURE() << "another user's directory was taken";
    } catch (const base::Error& e) {
        EXPECT_EQ(std::string(e.what()),
            "--nccl-log-dir " + made +
                ": it belongs to uid 65534, not 0: use a directory "
                "of your own");
    }
}
