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

// The inventory as ReadHostPortCounters sees it: names and ports only (the files are read).
v1::Host Inventory(const std::vector<std::pair<std::string, std::vector<uint32_t>>>& devices) {
  v1::Host host;
  for (const auto& [name, ports] : devices) {
    v1::RdmaDevice* d = host.add_rdma_devices();
    d->set_name(name);
    for (uint32_t n : ports) {
      v1::Port* p = d->add_ports();
      p->set_number(n);
      p->set_netdev(name + "_eth");
    }
  }
  return host;
}

TEST_F(ExampleHostTest, HostPortCountersFollowTheInventoryAndTheFilter) {
  HostFsImpl sys(Sys());
  // mlx5_77 is in the inventory but not below sysfs (removed since): left out, with a note.
  const v1::Host host = Inventory({{"mlx5_1", {1}}, {"mlx5_2", {1}}, {"mlx5_77", {1}}});
  auto all = ReadHostPortCounters(host, sys, {});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->ports_size(), 2);
  EXPECT_EQ(all->ports(0).device(), "mlx5_1");
  EXPECT_EQ(all->ports(0).port(), 1u);
  EXPECT_EQ(all->ports(0).netdev(), "mlx5_1_eth");
  ASSERT_EQ(all->ports(0).counters_size(), 2);
  EXPECT_EQ(all->ports(0).counters(1).name(), "port_rcv_data");
  EXPECT_EQ(all->ports(0).counters(1).value(), 1000u);
  EXPECT_FALSE(all->ports(0).counters(1).has_per_second());  // Rates are the client's.
  ASSERT_EQ(all->ports(0).hw_counters_size(), 1);
  EXPECT_EQ(all->ports(0).hw_counters(0).value(), 3u);
  EXPECT_EQ(all->ports(1).device(), "mlx5_2");
  EXPECT_THAT(all->notes(), ElementsAre("mlx5_77: gone since the inventory was taken"));
  EXPECT_GT(all->read_at().seconds(), 1'600'000'000);

  const struct {
    std::string device;
    uint32_t port;
    absl::StatusCode code;
    std::string message;  // Part of the error, or of the one port's device.
  } cases[] = {
      {"mlx5_2", 0, absl::StatusCode::kOk, "mlx5_2"},
      {"mlx5_2", 1, absl::StatusCode::kOk, "mlx5_2"},
      {"mlx5_2", 2, absl::StatusCode::kNotFound, "mlx5_2 has no port 2 (ports: 1)"},
      {"nope", 0, absl::StatusCode::kNotFound,
       "no RDMA device \"nope\" on this host (devices: mlx5_1, mlx5_2, mlx5_77)"},
      {"../../etc", 0, absl::StatusCode::kNotFound, "no RDMA device \"../../etc\""},
      {"", 1, absl::StatusCode::kInvalidArgument, "a port needs its device"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.device + ":" + std::to_string(c.port));
    v1::GetPortCountersRequest req;
    req.set_device(c.device);
    req.set_port(c.port);
    auto got = ReadHostPortCounters(host, sys, req);
    EXPECT_EQ(got.status().code(), c.code) << got.status();
    if (got.ok()) {
      ASSERT_EQ(got->ports_size(), 1);
      EXPECT_EQ(got->ports(0).device(), c.message);
      EXPECT_THAT(got->notes(), IsEmpty());
    } else {
      EXPECT_THAT(got.status().message(), HasSubstr(c.message));
    }
  }
}

TEST_F(ExampleHostTest, HostPortCountersListAFewDevicesWhenTheNameIsUnknown) {
  HostFsImpl sys(Sys());
  std::vector<std::pair<std::string, std::vector<uint32_t>>> many;
  for (int i = 0; i < 500; ++i) many.push_back({"vf" + std::to_string(i), {1}});
  v1::GetPortCountersRequest req;
  req.set_device("mlx5_1");
  auto got = ReadHostPortCounters(Inventory(many), sys, req);
  ASSERT_TRUE(absl::IsNotFound(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("vf7 and 492 more)"));
  EXPECT_LT(got.status().message().size(), 200u);
}

TEST_F(ExampleHostTest, HostPortCountersOfAPortGoneWithItsDirectory) {
  HostFsImpl sys(Sys());
  // The inventory has port 2 of mlx5_1; the tree does not (the device's ports changed).
  auto got = ReadHostPortCounters(Inventory({{"mlx5_1", {1, 2}}}), sys, {});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ports_size(), 1);
  EXPECT_THAT(got->notes(), ElementsAre("mlx5_1:2: gone since the inventory was taken"));
}

}  // namespace
}  // namespace fabric::metrics
