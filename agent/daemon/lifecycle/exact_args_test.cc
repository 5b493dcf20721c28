// Issue 51, exact arguments and no port that never accepts, on the real binaries: "--opt=" with
// nothing after "=" is refused by every binary that takes --opt=value (it swallowed the next
// argument: fabric-agent's `--pod-helper= --sysfs=/nonexist` ran against the real /sys), while
// the documented empty forms (--cdi-dir=, --kmsg=, ...) still work; a --probe-perftest line
// missing an option's value, or two lines on one port, stop the agent with exit 2; a perftest
// line whose device cannot be opened keeps its port closed (clients were accepted and hung).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/scrape.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;

class ExactArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("exact-args");
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> Agent(const std::vector<std::string>& flags) const {
    std::vector<std::string> argv = {testing::kAgentBinary,
                                     "--socket=" + dir_ + "/agent.sock",
                                     "--sysfs=" + dir_ + "/host/sys",
                                     "--procfs=" + dir_ + "/host/proc",
                                     "--lldp=false",
                                     "--ib-neighbors=false",
                                     "--announce-socket="};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return argv;
  }

  std::string dir_;
};

// A TCP port nothing listens on now (bound to port 0, then closed).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// errno of a connect to 127.0.0.1:port; 0 when it connected.
int ConnectError(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const int rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  const int err = rc == 0 ? 0 : errno;
  close(fd);
  return err;
}

TEST_F(ExactArgsTest, EveryBinaryRefusesAnEmptyOrMissingValue) {
  const struct {
    std::vector<std::string> argv;
    std::string names;
  } cases[] = {
      {Agent({"--pod-helper=", "--sysfs=/nonexist"}), "--pod-helper is empty"},
      {Agent({"--config=", "--rescan-interval=5"}), "--config is empty"},
      {{testing::kFabricEnvBinary, "--host-file=", "env"}, "--host-file is empty"},
      {{testing::kFabricEnvBinary, "env", "--gpus=", "--host-file=/nonexist"}, "--gpus is empty"},
      {{testing::kProbeBinary, "write_bw", "--sysfs=", "-p", "1"}, "--sysfs is empty"},
      // An option missing its value took the next option as it (CLI11 2.1).
      {Agent({"--pod-helper", "--sysfs=/nonexist"}), "--pod-helper needs a value"},
      {{testing::kFabricEnvBinary, "env", "--gpus", "--host-file=/nonexist"},
       "--gpus needs a value"},
      {{testing::kProbeBinary, "write_bw", "-d", "-p", "18516"}, "-d needs a value"},
      {{testing::kFabricctlBinary, "topo", "--sysfs", "--json"}, "--sysfs needs a value"},
      {{testing::kFabricctlBinary, "topo", "--sysfs=", "--json"}, "--sysfs is empty"},
  };
  for (const auto& c : cases) {
    auto r = testing::Run(c.argv, absl::Seconds(20));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 2) << c.names << ": " << r->err;
    EXPECT_TRUE(absl::StrContains(r->err, c.names)) << r->err;
  }
  // A command's own arguments are its own: fabric-env exec leaves "--x=" to the command.
  auto r = testing::Run({testing::kFabricEnvBinary, "--host-file=" + dir_ + "/none.pb", "exec",
                         "--best-effort", "/bin/echo", "--x="},
                        absl::Seconds(20));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(absl::StrContains(r->err, "is empty")) << r->err;
  EXPECT_EQ(r->out, "--x=\n") << r->err;
}

// The documented empty forms turn their feature off, as before.
TEST_F(ExactArgsTest, DocumentedEmptyFormsStillWork) {
  auto agent = testing::Subprocess::Start(
      Agent({"--cdi-dir=", "--state-dir=", "--kmsg=", "--host-file-dir=", "--device-plugin-dir="}));
  ASSERT_TRUE(agent.ok()) << agent.status();
  ASSERT_TRUE(testing::WaitForSocket(**agent, dir_ + "/agent.sock")) << (*agent)->Stderr();
  EXPECT_FALSE(absl::StrContains((*agent)->Stderr(), "is empty")) << (*agent)->Stderr();
}

TEST_F(ExactArgsTest, PerftestLinesMissingAValueOrSharingAPortAreBadFlags) {
  const struct {
    std::vector<std::string> flags;
    std::string says;
  } cases[] = {
      // "-d" took the next word (the port line listened on 18515).
      {{"--probe-perftest=write_bw -p 18516 -d"}, "-d needs a value"},
      {{"--probe-perftest=write_bw -d -p 18516"}, "-d needs a value"},
      {{"--probe-perftest=write_bw -p 18516", "--probe-perftest=read_bw -p 18516"},
       "port 18516 is also"},
      {{"--probe-listen=127.0.0.1:18517", "--probe-perftest=write_bw -p 18517"},
       "port 18517 is also --probe-listen's"},
  };
  for (const auto& c : cases) {
    auto r = testing::Run(Agent(c.flags), absl::Seconds(20));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 2) << c.says << ": " << r->err;
    EXPECT_TRUE(absl::StrContains(r->err, c.says)) << r->err;
  }
}

// A line whose device cannot be opened (none here) keeps its port closed while it retries, and
// says so in the log and the metrics: a client is refused at once instead of hanging.
TEST_F(ExactArgsTest, PerftestPortWhoseDeviceCannotOpenIsClosed) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  auto agent = testing::Subprocess::Start(
      Agent({absl::StrCat("--probe-perftest=write_bw -p ", port, " -d nosuch0"),
             "--metrics=127.0.0.1:0"}));
  ASSERT_TRUE(agent.ok()) << agent.status();
  ASSERT_TRUE(testing::WaitForSocket(**agent, dir_ + "/agent.sock")) << (*agent)->Stderr();
  std::optional<std::string> metrics =
      testing::WaitForLogged(**agent, "metrics on http://127.0.0.1:", absl::Seconds(10));
  ASSERT_TRUE(metrics.has_value()) << (*agent)->Stderr();
  // The first try has failed once the failure is counted.
  const std::string failed = R"(fabric_probe_perftest_tests_total{result="failed"})";
  std::string text;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        text = testing::HttpGet(std::stoi(*metrics), "/metrics").second;
        return testing::Sample(text, failed) >= 1;
      },
      absl::Seconds(20)))
      << text << (*agent)->Stderr();
  EXPECT_EQ(testing::Sample(text, "fabric_probe_perftest_responders_down"), 1) << text;
  EXPECT_EQ(ConnectError(port), ECONNREFUSED) << "a port nobody serves is open";
  EXPECT_TRUE(absl::StrContains((*agent)->Stderr(),
                                absl::StrCat("perftest responder (write_bw on port ", port, "): ")))
      << (*agent)->Stderr();
}

}  // namespace
}  // namespace fabric
