// Agents whose sockets share a directory, as real processes: each gets its own hand-off socket
// (or is refused one another agent serves), and an agent that stops removes only the socket
// files it bound, never another agent's at the same path.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "agent/common/fd.h"
#include "agent/fabric/announce/handoff.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using testing::Subprocess;

sockaddr_un Address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof(addr.sun_path) - 1));
  return addr;
}

// A socket of `type` bound at `path` (and listening, unless a datagram socket).
UniqueFd Bind(const std::string& path, int type) {
  UniqueFd fd(socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  const sockaddr_un addr = Address(path);
  if (!fd.valid() || bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (type != SOCK_DGRAM && listen(fd.get(), 4) != 0)) {
    return UniqueFd();
  }
  return fd;
}

// Whether a listener of `type` accepts a connection at `path` (a stale file refuses).
bool Accepts(const std::string& path, int type) {
  UniqueFd fd(socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  const sockaddr_un addr = Address(path);
  return fd.valid() &&
         connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
}

// The inode at `path`, 0 when nothing is there.
ino_t Inode(const std::string& path) {
  struct stat sb;
  return lstat(path.c_str(), &sb) == 0 ? sb.st_ino : 0;
}

// An agent's two sockets, and whether both serve.
struct Sockets {
  std::string api, handoff;
  bool Serve() const { return Accepts(api, SOCK_STREAM) && Accepts(handoff, SOCK_SEQPACKET); }
};

class HandoffSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("handoff_socket_test");
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
    fs::create_directories(dir_ + "/run");
  }
  void TearDown() override {
    agents_.clear();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::vector<std::string> Args(const std::string& socket, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {testing::kAgentBinary, "--socket=" + socket,
                                  "--sysfs=" + dir_ + "/host/sys",
                                  "--procfs=" + dir_ + "/host/proc", "--lldp=false"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // Starts an agent on `socket` and waits (bounded) for its READY=1 (systemd's protocol): every
  // start-up step is done, its sockets bound and their modes set.
  Subprocess* Start(const std::string& socket, std::vector<std::string> extra = {}) {
    const std::string notify = socket + ".notify";
    UniqueFd notify_fd = Bind(notify, SOCK_DGRAM);
    EXPECT_TRUE(notify_fd.valid()) << notify;
    auto p = Subprocess::Start(Args(socket, std::move(extra)), {"NOTIFY_SOCKET=" + notify});
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok() || !notify_fd.valid()) return nullptr;
    agents_.push_back(*std::move(p));
    Subprocess* agent = agents_.back().get();
    bool ready = testing::WaitFor(
        [&] {
          char buf[512];
          ssize_t n = recv(notify_fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
          if (n > 0 &&
              absl::StrContains(absl::string_view(buf, static_cast<size_t>(n)), "READY=1")) {
            return true;
          }
          return !agent->running();
        },
        absl::Seconds(20));
    unlink(notify.c_str());
    EXPECT_TRUE(ready && agent->running()) << agent->Stderr();
    return ready && agent->running() ? agent : nullptr;
  }

  // SIGTERM, and the clean exit it should bring (bounded).
  void Stop(Subprocess* agent) {
    agent->Signal(SIGTERM);
    std::optional<int> code = agent->Wait(absl::Seconds(10));
    ASSERT_TRUE(code.has_value()) << "still running: " << agent->Stderr();
    EXPECT_EQ(*code, 0) << agent->Stderr();
  }

  std::string Run(const std::string& name) const { return dir_ + "/run/" + name; }

  std::string dir_;
  std::vector<std::unique_ptr<Subprocess>> agents_;
};

TEST_F(HandoffSocketTest, AgentsSharingADirectoryKeepTheirOwnSocketsWhenAThirdStops) {
  // The default name keeps fabric-cni's default path; another name gets its own.
  const Sockets a{Run("agent.sock"), Run("announce.sock")};
  const Sockets b{Run("b.sock"), Run("b.announce.sock")};
  const Sockets c{Run("c.sock"), Run("c.announce.sock")};
  ASSERT_NE(Start(a.api), nullptr);
  ASSERT_NE(Start(b.api), nullptr);
  ASSERT_TRUE(a.Serve()) << agents_[0]->Stderr();
  ASSERT_TRUE(b.Serve()) << agents_[1]->Stderr();
  const ino_t a_handoff = Inode(a.handoff), b_handoff = Inode(b.handoff);
  const ino_t a_api = Inode(a.api), b_api = Inode(b.api);

  Subprocess* third = Start(c.api);
  ASSERT_NE(third, nullptr);
  ASSERT_TRUE(c.Serve()) << third->Stderr();
  Stop(third);
  EXPECT_EQ(Inode(c.api), 0u) << "the third agent leaves its own sockets behind";
  EXPECT_EQ(Inode(c.handoff), 0u);

  // The first two still have the very files they bound, and still serve on them.
  EXPECT_EQ(Inode(a.api), a_api);
  EXPECT_EQ(Inode(a.handoff), a_handoff);
  EXPECT_EQ(Inode(b.api), b_api);
  EXPECT_EQ(Inode(b.handoff), b_handoff);
  EXPECT_TRUE(a.Serve());
  EXPECT_TRUE(b.Serve());
}

TEST_F(HandoffSocketTest, AHandoffSocketAnotherAgentServesIsRefused) {
  const Sockets a{Run("agent.sock"), Run("announce.sock")};
  ASSERT_NE(Start(a.api), nullptr);
  const ino_t a_handoff = Inode(a.handoff);
  ASSERT_NE(a_handoff, 0u);

  auto r = testing::Run(Args(Run("b.sock"), {"--announce-socket=" + a.handoff}), absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 2) << r->err;
  EXPECT_TRUE(absl::StrContains(r->err, a.handoff)) << r->err;
  EXPECT_TRUE(absl::StrContains(r->err, "--announce-socket")) << r->err;
  EXPECT_EQ(Inode(Run("b.sock")), 0u) << "a refused agent serves nothing";
  EXPECT_EQ(Inode(a.handoff), a_handoff);
  EXPECT_TRUE(a.Serve());
}

TEST_F(HandoffSocketTest, AStoppingAgentLeavesAFileThatReplacedItsOwn) {
  const Sockets c{Run("c.sock"), Run("c.announce.sock")};
  Subprocess* agent = Start(c.api);
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(c.Serve()) << agent->Stderr();
  // Another process took both paths over while the agent ran (as an agent would after deciding
  // these were stale).
  std::vector<UniqueFd> ours;
  for (const auto& [path, type] :
       {std::pair{c.api, SOCK_STREAM}, std::pair{c.handoff, SOCK_SEQPACKET}}) {
    ASSERT_EQ(unlink(path.c_str()), 0);
    ours.push_back(Bind(path, type));
    ASSERT_TRUE(ours.back().valid()) << path;
  }
  const ino_t api = Inode(c.api), handoff = Inode(c.handoff);
  Stop(agent);
  EXPECT_EQ(Inode(c.api), api);
  EXPECT_EQ(Inode(c.handoff), handoff);
  EXPECT_TRUE(c.Serve());
}

TEST_F(HandoffSocketTest, AStaleHandoffSocketIsReplaced) {
  const Sockets a{Run("agent.sock"), Run("announce.sock")};
  Subprocess* agent = Start(a.api);
  ASSERT_NE(agent, nullptr);
  agent->Signal(SIGKILL);  // As after a crash: both files stay, nothing listens.
  ASSERT_TRUE(agent->Wait(absl::Seconds(5)).has_value());
  ASSERT_NE(Inode(a.handoff), 0u);
  ASSERT_FALSE(Accepts(a.handoff, SOCK_SEQPACKET));
  ASSERT_NE(Start(a.api), nullptr);
  EXPECT_TRUE(a.Serve()) << agents_.back()->Stderr();
}

}  // namespace
}  // namespace fabric
