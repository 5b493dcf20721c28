#include "agent/common/socket_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "agent/common/fd.h"

namespace fabric {
namespace {

// Binds (and with `listen_too` listens on) a Unix socket of `type` at `path`.
UniqueFd Bind(const std::string& path, int type = SOCK_STREAM, bool listen_too = true) {
  UniqueFd fd(socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (!fd.valid() || bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (listen_too && listen(fd.get(), 4) != 0)) {
    return UniqueFd();
  }
  return fd;
}

class SocketFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/socket_file_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/a.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  bool Exists() const {
    struct stat sb;
    return lstat(path_.c_str(), &sb) == 0;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(SocketFileTest, RemovesTheFileItBound) {
  UniqueFd fd = Bind(path_);
  ASSERT_TRUE(fd.valid());
  auto f = RecordBoundSocket(path_);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(RemoveBoundSocket(*f));
  EXPECT_FALSE(Exists());
}

TEST_F(SocketFileTest, LeavesAReplacementAlone) {
  UniqueFd first = Bind(path_);
  ASSERT_TRUE(first.valid());
  auto f = RecordBoundSocket(path_);
  ASSERT_TRUE(f.ok()) << f.status();
  // Another process decided ours was stale and bound its own at the same path.
  ASSERT_EQ(unlink(path_.c_str()), 0);
  UniqueFd second = Bind(path_);
  ASSERT_TRUE(second.valid());
  struct stat before;
  ASSERT_EQ(lstat(path_.c_str(), &before), 0);
  ASSERT_NE(before.st_ino, f->ino);  // Else this test could not tell the two apart.

  EXPECT_FALSE(RemoveBoundSocket(*f));
  struct stat after;
  ASSERT_EQ(lstat(path_.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
}

TEST_F(SocketFileTest, GoneAlreadyIsNotAnError) {
  UniqueFd fd = Bind(path_);
  ASSERT_TRUE(fd.valid());
  auto f = RecordBoundSocket(path_);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(unlink(path_.c_str()), 0);
  EXPECT_FALSE(RemoveBoundSocket(*f));
  EXPECT_FALSE(RemoveBoundSocket(BoundSocketFile{}));
}

TEST_F(SocketFileTest, ClearStaleSocketReplacesOnlyAStaleOne) {
  EXPECT_TRUE(ClearStaleSocket(path_, "--x").ok());  // Nothing there.

  {
    UniqueFd stale = Bind(path_);
    ASSERT_TRUE(stale.valid());
  }  // Closed: the file stays, nothing listens (as after a crash).
  ASSERT_TRUE(Exists());
  EXPECT_TRUE(ClearStaleSocket(path_, "--x").ok());
  EXPECT_FALSE(Exists());
}

TEST_F(SocketFileTest, ClearStaleSocketRefusesALiveListenerOfAnyType) {
  for (int type : {SOCK_STREAM, SOCK_SEQPACKET}) {
    UniqueFd live = Bind(path_, type);
    ASSERT_TRUE(live.valid());
    absl::Status s = ClearStaleSocket(path_, "--announce-socket");
    EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), path_)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "--announce-socket")) << s;
    EXPECT_TRUE(Exists());
    live.reset();
    ASSERT_EQ(unlink(path_.c_str()), 0);
  }
}

TEST_F(SocketFileTest, ClearStaleSocketRefusesAFileThatIsNotASocket) {
  std::ofstream(path_) << "x";
  absl::Status s = ClearStaleSocket(path_, "--x");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "not a socket")) << s;
  EXPECT_TRUE(Exists());
}

}  // namespace
}  // namespace fabric

namespace fabric {
namespace {

// Under umask 0 a plain bind makes the file 0777; BindSocketWithMode gives it the mode asked,
// served at the path (a connect there reaches the bound socket), nothing left beside it.
TEST_F(SocketFileTest, BindSocketWithModeGivesTheModeWhateverTheUmask) {
  const std::string path = dir_ + "/agent-socket.sock";
  const mode_t old = umask(0);
  UniqueFd fd;
  auto f = BindSocketWithMode(path, 0600, [&](const std::string& tmp) {
    EXPECT_LE(tmp.size(), path.size());
    fd = Bind(tmp);
    return fd.valid() ? absl::OkStatus() : absl::UnavailableError("bind");
  });
  umask(old);
  ASSERT_TRUE(f.ok()) << f.status();
  struct stat sb {};
  ASSERT_EQ(lstat(path.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISSOCK(sb.st_mode));
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  EXPECT_EQ(f->ino, sb.st_ino);
  UniqueFd client(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  EXPECT_EQ(connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1u) << "the private directory is gone";

  // A binder that fails leaves nothing.
  std::filesystem::remove(path);
  auto bad = BindSocketWithMode(path, 0600,
                                [](const std::string&) { return absl::UnavailableError("no"); });
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

}  // namespace
}  // namespace fabric
