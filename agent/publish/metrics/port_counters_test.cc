#include "agent/publish/metrics/port_counters.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric::metrics {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Property;

TEST(ParseCounterValue, Values) {
  const struct {
    std::string text;
    uint64_t want;
  } cases[] = {
      {"12345\n", 12345},
      {"12345", 12345},
      {"0\n", 0},
      {"007\n", 7},
      {"4294967296\n", 4294967296u},  // Past 32 bits: the 64-bit PMA counters.
      {"18446744073709551615\n", 18446744073709551615u},
  };
  for (const auto& c : cases) {
    auto v = ParseCounterValue(c.text);
    ASSERT_TRUE(v.ok()) << c.text << ": " << v.status();
    EXPECT_EQ(*v, c.want) << c.text;
  }
}

TEST(ParseCounterValue, Errors) {
  const struct {
    std::string text;
    absl::StatusCode code;
    std::string message;
  } cases[] = {
      {"", absl::StatusCode::kInvalidArgument, "empty counter value: \"\""},
      {"\n", absl::StatusCode::kInvalidArgument, "empty counter value: \"\\n\""},
      {"-1\n", absl::StatusCode::kInvalidArgument, "negative counter value: \"-1\\n\""},
      {"+1", absl::StatusCode::kInvalidArgument, "not a decimal counter value: \"+1\""},
      {"0x1f\n", absl::StatusCode::kInvalidArgument, "not a decimal counter value: \"0x1f\\n\""},
      {"1.5", absl::StatusCode::kInvalidArgument, "not a decimal counter value"},
      {"12abc", absl::StatusCode::kInvalidArgument, "not a decimal counter value"},
      {" 1", absl::StatusCode::kInvalidArgument, "not a decimal counter value"},
      {"1 ", absl::StatusCode::kInvalidArgument, "not a decimal counter value"},
      {"1\n\n", absl::StatusCode::kInvalidArgument, "not a decimal counter value"},
      {"1\r\n", absl::StatusCode::kInvalidArgument, "not a decimal counter value"},
      {std::string("1\0", 2), absl::StatusCode::kInvalidArgument,
       "not a decimal counter value: \"1\\x00\""},
      {"18446744073709551616\n", absl::StatusCode::kInvalidArgument,
       "counter value out of range (over 64 bits): \"18446744073709551616\\n\""},
      {"99999999999999999999999999", absl::StatusCode::kInvalidArgument, "out of range"},
      {std::string(100, '7'), absl::StatusCode::kInvalidArgument,
       "\"77777777777777777777777777777777\"..."},
      {"N/A (no PMA)\n", absl::StatusCode::kUnavailable,
       "counter not available: \"N/A (no PMA)\\n\""},
      {"N/A (no PMA)", absl::StatusCode::kUnavailable, "counter not available"},
      {"N/A\n", absl::StatusCode::kInvalidArgument, "not a decimal counter value"},
  };
  for (const auto& c : cases) {
    auto v = ParseCounterValue(c.text);
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_EQ(v.status().code(), c.code) << c.text << ": " << v.status();
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(c.message)) << c.text;
  }
}

// A port directory with the files given (a name ending in "/" is a directory).
class PortDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = testing::MakeTempDir("port-counters");
    ASSERT_FALSE(tmp_.empty());
    fs::create_directories(fs::path(tmp_) / "port");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  void Put(const std::string& name, const std::string& content) {
    const fs::path p = fs::path(tmp_) / "port" / name;
    fs::create_directories(p.parent_path());
    if (!name.empty() && name.back() == '/') {
      fs::create_directories(p);
      return;
    }
    std::ofstream(p, std::ios::binary) << content;
  }
  PortCounters Read() {
    HostFsImpl sys(tmp_);
    auto dir = sys.OpenDir("port");
    EXPECT_TRUE(dir.ok()) << dir.status();
    if (!dir.ok()) return {};
    return ReadPortCounters(**dir);
  }

  std::string tmp_;
};

MATCHER_P2(IsCounter, name, value, "") { return arg.name == name && arg.value == value; }

TEST_F(PortDirTest, ReadsBothDirectoriesByName) {
  Put("counters/port_xmit_data", "100\n");
  Put("counters/port_rcv_data", "200\n");
  Put("counters/VL15_dropped", "0\n");
  Put("hw_counters/np_cnp_sent", "18446744073709551615\n");
  Put("hw_counters/lifespan", "10\n");
  const PortCounters c = Read();
  EXPECT_THAT(c.counters,
              ElementsAre(IsCounter("VL15_dropped", 0u), IsCounter("port_rcv_data", 200u),
                          IsCounter("port_xmit_data", 100u)));
  EXPECT_THAT(c.hw_counters, ElementsAre(IsCounter("lifespan", 10u),
                                         IsCounter("np_cnp_sent", 18446744073709551615u)));
  EXPECT_THAT(c.problems, IsEmpty());
}

TEST_F(PortDirTest, MissingDirectoriesAreEmptyNotProblems) {
  const PortCounters c = Read();
  EXPECT_THAT(c.counters, IsEmpty());
  EXPECT_THAT(c.hw_counters, IsEmpty());
  EXPECT_THAT(c.problems, IsEmpty());
}

TEST_F(PortDirTest, BadFilesAreProblemsAndTheRestIsRead) {
  Put("counters/port_rcv_data", "200\n");
  Put("counters/symbol_error", "garbage\n");
  Put("counters/link_downed/", "");                        // A directory where a file belongs.
  Put("counters/port_xmit_wait", std::string(5000, '1'));  // Longer than any counter.
  Put("counters/port_rcv_errors", "");                     // Empty.
  Put("counters/port_xmit_discards", "N/A (no PMA)\n");    // Old kernels without a PMA: skipped.
  Put("hw_counters/out_of_buffer", "-3\n");
  Put("hw_counters/rp_cnp_handled", "5\n");
  const PortCounters c = Read();
  EXPECT_THAT(c.counters, ElementsAre(IsCounter("port_rcv_data", 200u)));
  EXPECT_THAT(c.hw_counters, ElementsAre(IsCounter("rp_cnp_handled", 5u)));
  ASSERT_EQ(c.problems.size(), 5u);
  std::vector<std::string> fields;
  for (const auto& p : c.problems) {
    fields.push_back(p.field());
    EXPECT_EQ(p.path(), "port/" + p.field());
    EXPECT_THAT(p.reason(), Not(IsEmpty()));
  }
  EXPECT_THAT(fields, ElementsAre("counters/link_downed", "counters/port_rcv_errors",
                                  "counters/port_xmit_wait", "counters/symbol_error",
                                  "hw_counters/out_of_buffer"));
  EXPECT_THAT(c.problems[0].reason(), HasSubstr("Is a directory"));
  EXPECT_THAT(c.problems[2].reason(), HasSubstr("longer than"));
  EXPECT_THAT(c.problems[3].reason(), HasSubstr("not a decimal counter value: \"garbage\\n\""));
  EXPECT_THAT(c.problems[4].reason(), HasSubstr("negative"));
}

TEST_F(PortDirTest, CountersAsAFileIsAProblem) {
  Put("counters", "not a directory\n");
  Put("hw_counters/np_cnp_sent", "3\n");
  const PortCounters c = Read();
  EXPECT_THAT(c.counters, IsEmpty());
  EXPECT_THAT(c.hw_counters, ElementsAre(IsCounter("np_cnp_sent", 3u)));
  EXPECT_THAT(c.problems, ElementsAre(Property(&v1::FieldProblem::field, "counters")));
}

// On an example host: the builder's counter files, and a device that goes away.
class ExampleHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = testing::MakeTempDir("port-counters-host");
    ASSERT_FALSE(tmp_.empty());
    auto spec = testing::ExampleHost("roce-9port");
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    auto& port = spec_.FindRdma("mlx5_1")->ports[0];
    port.counters = {{"port_rcv_data", 1000}, {"link_downed", 2}};
    port.hw_counters = {{"np_cnp_sent", 3}};
    ASSERT_TRUE(testing::WriteHost(spec_, fs::path(tmp_) / "host").ok());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  std::string Sys() const { return (fs::path(tmp_) / "host" / "sys").string(); }

  std::string tmp_;
  testing::HostSpec spec_;
};

TEST_F(ExampleHostTest, ReadsThroughTheClassLink) {
  HostFsImpl sys(Sys());
  auto c = ReadPortCounters(sys, "mlx5_1", 1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->counters,
              ElementsAre(IsCounter("link_downed", 2u), IsCounter("port_rcv_data", 1000u)));
  EXPECT_THAT(c->hw_counters, ElementsAre(IsCounter("np_cnp_sent", 3u)));
  EXPECT_THAT(c->problems, IsEmpty());

  // The builder's full sets on another device.
  auto full = ReadPortCounters(sys, "mlx5_2", 1);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->counters.size(), testing::IbPortCounters(0).size());
  EXPECT_EQ(full->hw_counters.size(), testing::Mlx5HwCounters(0).size());
}

TEST_F(ExampleHostTest, GoneDeviceOrPortIsNotFound) {
  HostFsImpl sys(Sys());
  auto port = ReadPortCounters(sys, "mlx5_1", 2);
  EXPECT_TRUE(absl::IsNotFound(port.status())) << port.status();
  auto unknown = ReadPortCounters(sys, "mlx5_99", 1);
  EXPECT_TRUE(absl::IsNotFound(unknown.status())) << unknown.status();

  // The device directory removed (driver unbound): the class link dangles.
  auto dev = testing::RdmaDevicePath(spec_, "mlx5_1");
  ASSERT_TRUE(dev.ok()) << dev.status();
  fs::remove_all(fs::path(Sys()) / *dev);
  auto gone = ReadPortCounters(sys, "mlx5_1", 1);
  EXPECT_TRUE(absl::IsNotFound(gone.status())) << gone.status();
  EXPECT_TRUE(ReadPortCounters(sys, "mlx5_2", 1).ok());
}

}  // namespace
}  // namespace fabric::metrics
