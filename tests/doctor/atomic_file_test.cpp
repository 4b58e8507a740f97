#include "doctor/atomic_file.hpp"
#include "probes/error.hpp"
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

std::string error_of(const std::string& path, const std::string& content)
{
    try {
        doctor::write_file_atomically(path, content, "--prometheus");
    } catch (const probes::Error& e) {
        return e.what();
    }
    return "";
}

class AtomicFile : public ::testing::Test {
protected:
    void SetUp() override { m_umask = umask(022); }
    void TearDown() override { umask(m_umask); }
    TempDir m_dir;
    mode_t m_umask = 0;
};

TEST_F(AtomicFile, WritesANewFileReadableByOthers)
{
    const auto file = m_dir / "node.prom";
    doctor::write_file_atomically(file.string(), "a 1\n", "--prometheus");
    EXPECT_EQ(file_text(file), "a 1\n");
    struct stat st { };
    ASSERT_EQ(stat(file.c_str(), &st), 0);
    // node_exporter runs as another user: mkstemp's 0600 would hide the file from it.
    EXPECT_EQ(st.st_mode & 0777, 0644U);
    EXPECT_EQ(names_in(m_dir.path()), std::vector<std::string>{"node.prom"});
}

TEST_F(AtomicFile, ModeFollowsTheUmask)
{
    umask(077);
    const auto file = m_dir / "private.xml";
    doctor::write_file_atomically(file.string(), "<x/>", "--junit");
    struct stat st { };
    ASSERT_EQ(stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600U);
}

TEST_F(AtomicFile, ReplacesAnExistingFileWholeAndAReaderKeepsTheOldOne)
{
    const auto file = m_dir / "node.prom";
    std::ofstream(file) << "old content, longer than the new one\n";
    std::ifstream reader(file); // a scrape in progress
    doctor::write_file_atomically(file.string(), "new\n", "--prometheus");
    EXPECT_EQ(file_text(file), "new\n");
    std::stringstream seen;
    seen << reader.rdbuf();
    EXPECT_EQ(seen.str(), "old content, longer than the new one\n");
    EXPECT_EQ(names_in(m_dir.path()), std::vector<std::string>{"node.prom"});
}

TEST_F(AtomicFile, WritesInTheWorkingDirectoryForABareName)
{
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(m_dir.path());
    doctor::write_file_atomically("bare.prom", "x 1\n", "--prometheus");
    std::filesystem::current_path(cwd);
    EXPECT_EQ(file_text(m_dir / "bare.prom"), "x 1\n");
}

TEST_F(AtomicFile, MissingDirectoryIsAnErrorNamingTheStep)
{
    const auto file = m_dir / "missing/node.prom";
    EXPECT_EQ(error_of(file.string(), "x"),
        "--prometheus " + file.string() + ": cannot create a temporary file in " + (m_dir / "missing").string() +
            ": No such file or directory");
    EXPECT_TRUE(names_in(m_dir.path()).empty());
}

TEST_F(AtomicFile, UnwritableDirectoryIsAnError)
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

TEST_F(AtomicFile, AFailedRenameLeavesNoTemporaryFileAndTheTargetAlone)
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

TEST_F(AtomicFile, ALinkStaysALinkAndItsTargetIsReplaced)
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

TEST_F(AtomicFile, AFifoOrDeviceIsNotReplacedByAFile)
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

TEST_F(AtomicFile, WhenOneOfSeveralFilesCannotBeWrittenNoneIsReplaced)
{
    // check --prometheus ok.prom --junit /missing/j.xml replaced ok.prom before it failed.
    const auto prom = m_dir / "node.prom";
    std::ofstream(prom) << "old 1\n";
    const auto junit = m_dir / "missing" / "junit.xml";
    try {
        doctor::write_files_atomically(
            {{"--prometheus", prom.string(), "new 2\n"}, {"--junit", junit.string(), "<testsuites/>\n"}});
        ADD_FAILURE() << "no error";
    } catch (const probes::Error& e) {
        EXPECT_EQ(
            std::string(e.what()).rfind("--junit " + junit.string() + ": cannot create a temporary file in ", 0), 0U)
            << e.what();
    }
    EXPECT_EQ(file_text(prom), "old 1\n");
    EXPECT_EQ(names_in(m_dir.path()), std::vector<std::string>{"node.prom"}) << "no temporary file left";

    std::filesystem::create_directory(m_dir / "missing");
    doctor::write_files_atomically(
        {{"--prometheus", prom.string(), "new 2\n"}, {"--junit", junit.string(), "<testsuites/>\n"}});
    EXPECT_EQ(file_text(prom), "new 2\n");
    EXPECT_EQ(file_text(junit), "<testsuites/>\n");
}

TEST_F(AtomicFile, EmptyNameAndDirectoryNameAreErrors)
{
    EXPECT_EQ(error_of("", "x"), "--prometheus '': expected a file name");
    EXPECT_EQ(error_of(m_dir.path().string() + "/", "x"),
        "--prometheus " + m_dir.path().string() + "/: expected a file name, not a directory");
}

} // namespace
