// SpecWriter on a real directory: written only on change (same inode otherwise), atomically (a
// new inode, no temp file left), and on a file system that is full or read-only (a real tmpfs in
// a private mount namespace) an error naming the path and the errno while the old spec stays.
#include "agent/publish/cdi/cdi_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/small_fs.h"

namespace fabric::cdi {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir(const std::string& what) {
  std::string tmpl = ::testing::TempDir() + what + ".XXXXXX";
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

std::string Slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

struct stat Stat(const std::string& path) {
  struct stat st = {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st;
}

TEST(SpecWriter, WritesOnlyWhenTheBytesChange) {
  const std::string dir = TempDir("cdi");
  SpecWriter w(dir);
  EXPECT_EQ(w.path(), dir + "/" + kSpecFile);

  absl::StatusOr<bool> wrote = w.Write("{\"a\": 1}\n");
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_TRUE(*wrote);
  EXPECT_EQ(Slurp(w.path()), "{\"a\": 1}\n");
  EXPECT_EQ(Stat(w.path()).st_mode & 0777, 0644u);  // Runtimes read it as whoever they are.
  const struct stat first = Stat(w.path());

  // The same bytes: no write (inode and mtime as they were).
  wrote = w.Write("{\"a\": 1}\n");
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_FALSE(*wrote);
  EXPECT_EQ(Stat(w.path()).st_ino, first.st_ino);
  EXPECT_EQ(Stat(w.path()).st_mtim.tv_nsec, first.st_mtim.tv_nsec);

  // A fresh writer (an agent restarted) finds the same bytes on disk: no write either.
  SpecWriter again(dir);
  wrote = again.Write("{\"a\": 1}\n");
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_FALSE(*wrote);
  EXPECT_EQ(Stat(w.path()).st_ino, first.st_ino);

  // Other bytes: a new file renamed over the old one, nothing else left in the directory.
  wrote = w.Write("{\"a\": 2}\n");
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_TRUE(*wrote);
  EXPECT_EQ(Slurp(w.path()), "{\"a\": 2}\n");
  EXPECT_NE(Stat(w.path()).st_ino, first.st_ino);
  EXPECT_THAT(Files(dir), ElementsAre(kSpecFile));

  // Someone removed or edited it: the next write puts it back although the bytes are the same.
  fs::remove(w.path());
  wrote = w.Write("{\"a\": 2}\n");
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_TRUE(*wrote);
  std::ofstream(w.path()) << "edited";
  wrote = w.Write("{\"a\": 2}\n");
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_TRUE(*wrote);
  EXPECT_EQ(Slurp(w.path()), "{\"a\": 2}\n");

  absl::StatusOr<bool> removed = w.Remove();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(fs::exists(w.path()));
  removed = w.Remove();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_FALSE(*removed);
  fs::remove_all(dir);
}

TEST(SpecWriter, MissingOrNotADirectory) {
  const std::string base = TempDir("cdi-errors");
  // Missing: created, as runtimes do; its parents are not.
  absl::StatusOr<bool> created = SpecWriter(base + "/cdi").Write("x\n");
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(Slurp(base + "/cdi/" + kSpecFile), "x\n");
  absl::StatusOr<bool> missing = SpecWriter(base + "/no/cdi").Write("x\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr(base + "/no/cdi does not exist and cannot be created"));

  std::ofstream(base + "/file") << "x";
  absl::StatusOr<bool> not_dir = SpecWriter(base + "/file").Write("x\n");
  ASSERT_FALSE(not_dir.ok());
  EXPECT_EQ(not_dir.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(not_dir.status().message(), HasSubstr("not a directory"));
  fs::remove_all(base);
}

// The faults of the field: the directory's file system full, or read-only.
class SpecWriterFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    auto small = testing::SmallFs::Mount();
    if (!small.ok()) GTEST_SKIP() << "needs a private tmpfs: " << small.status();
    fs_ = *std::move(small);
  }
  std::unique_ptr<testing::SmallFs> fs_;
};

TEST_F(SpecWriterFaults, FullKeepsTheOldSpec) {
  SpecWriter w(fs_->dir());
  ASSERT_TRUE(w.Write("old\n").ok());
  ASSERT_TRUE(fs_->Fill().ok());
  const std::string bigger(16 * 1024, 'x');
  absl::StatusOr<bool> wrote = w.Write(bigger);
  ASSERT_FALSE(wrote.ok());
  EXPECT_EQ(wrote.status().code(), absl::StatusCode::kResourceExhausted) << wrote.status();
  EXPECT_THAT(wrote.status().message(), HasSubstr(fs_->dir()));
  EXPECT_THAT(wrote.status().message(), HasSubstr("No space left on device"));
  EXPECT_EQ(Slurp(w.path()), "old\n");
  EXPECT_THAT(Files(fs_->dir()), ElementsAre(".filler", kSpecFile));  // No temp file left.
}

TEST_F(SpecWriterFaults, ReadOnlyKeepsTheOldSpec) {
  SpecWriter w(fs_->dir());
  ASSERT_TRUE(w.Write("old\n").ok());
  ASSERT_TRUE(fs_->ReadOnly().ok());
  absl::StatusOr<bool> wrote = w.Write("new\n");
  ASSERT_FALSE(wrote.ok());
  EXPECT_THAT(wrote.status().message(), HasSubstr(fs_->dir()));
  EXPECT_THAT(wrote.status().message(), HasSubstr("Read-only file system"));
  EXPECT_EQ(Slurp(w.path()), "old\n");
  // Unchanged bytes need no write, so they succeed even here.
  wrote = w.Write("old\n");
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_FALSE(*wrote);
}

}  // namespace
}  // namespace fabric::cdi
