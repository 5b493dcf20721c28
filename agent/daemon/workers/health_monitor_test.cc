#include "agent/daemon/workers/health_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/inventory/discovery/discovery.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using namespace ::fabric::v1;  // NOLINT

// HostFsImpl, except that reads of paths ending in `fail_suffix` fail with `fail_errno`.
class FailingFs final : public HostFs {
 public:
  explicit FailingFs(const HostFs* real) : real_(real) {}
  const std::string& root() const override { return real_->root(); }
  absl::StatusOr<std::string> ReadFile(std::string_view path) const override {
    if (!fail_suffix.empty() && path.ends_with(fail_suffix)) {
      ++failed_reads;
      return ErrnoStatus(fail_errno, "read", path);
    }
    return real_->ReadFile(path);
  }
  absl::StatusOr<std::vector<std::string>> ListDir(std::string_view path) const override {
    return real_->ListDir(path);
  }
  absl::StatusOr<std::string> ReadLink(std::string_view path) const override {
    return real_->ReadLink(path);
  }
  absl::StatusOr<std::string> RealPath(std::string_view path) const override {
    return real_->RealPath(path);
  }
  bool Exists(std::string_view path) const override { return real_->Exists(path); }
  absl::StatusOr<std::unique_ptr<HostDir>> OpenDir(std::string_view path) const override {
    return real_->OpenDir(path);
  }

  std::string fail_suffix;
  int fail_errno = EIO;
  mutable int failed_reads = 0;

 private:
  const HostFs* real_;
};

class HealthMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = testing::ExampleHost("roce-9port");
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    std::string tmpl = testing::MakeTempDir("health_monitor");
    ASSERT_FALSE(tmpl.empty());
    tmp_ = tmpl;
    dir_ = tmp_ / "host";
    ASSERT_TRUE(testing::WriteHost(spec_, dir_).ok());
    sys_ = std::make_unique<HostFsImpl>((dir_ / "sys").string());
    HostFsImpl proc((dir_ / "proc").string());
    auto host = Discover(*sys_, proc);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *host;
    auto dev = testing::RdmaDevicePath(spec_, "mlx5_0");
    ASSERT_TRUE(dev.ok()) << dev.status();
    mlx5_0_ = dir_ / "sys" / *dev;
    clock_.boot = absl::Seconds(1000);
    clock_.wall = absl::FromUnixSeconds(1700000000);
    options_.boot_id = "boot-a";
    options_.state_file = (tmp_ / "health.state").string();
  }
  void TearDown() override { fs::remove_all(tmp_); }

  std::unique_ptr<HealthMonitor> Make(const HostFs* fs = nullptr) {
    auto m =
        std::make_unique<HealthMonitor>(fs ? fs : sys_.get(), options_, [this] { return clock_; });
    m->Start();
    m->Follow(host_);
    return m;
  }
  void Tick(absl::Duration d = absl::Seconds(1)) {
    clock_.boot += d;
    clock_.wall += d;
  }
  void WriteCounter(const std::string& name, uint64_t value, const char* dir = "counters") {
    std::ofstream(mlx5_0_ / "ports/1" / dir / name) << value << "\n";
  }
  static std::vector<Finding> All(const HealthMonitor& m) {
    std::vector<Finding> out;
    m.Findings(absl::Now(), &out);
    return out;
  }
  static const Finding* Find(const std::vector<Finding>& fs, std::string_view code,
                             std::string_view subject) {
    for (const Finding& f : fs) {
      if (f.code() == code && f.subject() == subject) return &f;
    }
    return nullptr;
  }

  testing::HostSpec spec_;
  fs::path tmp_, dir_, mlx5_0_;
  std::unique_ptr<HostFsImpl> sys_;
  Host host_;
  MemoryClock clock_;
  HealthMonitorOptions options_;
};

TEST_F(HealthMonitorTest, QuietHostHasNoFindings) {
  auto m = Make();
  EXPECT_FALSE(m->Poll());
  Tick();
  EXPECT_FALSE(m->Poll());
  EXPECT_THAT(All(*m), ::testing::IsEmpty());
  EXPECT_EQ(m->stats().polls, 2u);
  EXPECT_GT(m->stats().reads, 0u);
  EXPECT_EQ(m->stats().read_errors, 0u);
  EXPECT_EQ(m->interval(), absl::Seconds(10));
}

TEST_F(HealthMonitorTest, AReloadedConfigKeepsTheMemoryAndAppliesItsRules) {
  WriteCounter("link_downed", 5);
  auto m = Make();
  m->Poll();
  Tick();
  WriteCounter("link_downed", 6);
  ASSERT_TRUE(m->Poll());
  ASSERT_NE(Find(All(*m), "counter.link_downed", "mlx5_0:1"), nullptr);

  // The reload: a faster poll, link_downed's rule disabled. What was found stays found.
  HealthConfig c;
  c.set_poll_interval_s(0.5);
  CounterRule* off = c.add_counter_rules();
  off->set_counter("link_downed");
  off->set_disabled(true);
  m->SetConfig(c);
  EXPECT_EQ(m->interval(), absl::Milliseconds(500));
  EXPECT_NE(Find(All(*m), "counter.link_downed", "mlx5_0:1"), nullptr);
  // Another increase breaks no rule now (the first read after the reload is a baseline too).
  Tick();
  WriteCounter("link_downed", 7);
  m->Poll();
  Tick();
  WriteCounter("link_downed", 8);
  m->Poll();
  const std::vector<Finding> after = All(*m);
  const Finding* f = Find(after, "counter.link_downed", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->occurrences(), 1u) << f->DebugString();
}

TEST_F(HealthMonitorTest, KernelLogLinesAboutWatchedDevicesAreRememberedOnce) {
  auto m = Make();
  m->Poll();
  const std::string pci = host_.rdma_devices(0).pci().address();
  const std::string name = host_.rdma_devices(0).name();
  ASSERT_FALSE(pci.empty());
  auto record = [](std::string message) {
    KmsgRecord r;
    r.message = std::move(message);
    return r;
  };
  const std::string timeout = "mlx5_core " + pci +
                              ": wait_func:1189:(pid 72061): ACCESS_REG(0x805) timeout. Will "
                              "cause a leak of a command resource";
  // A flood of one line is one finding; a line about another machine's device is no finding.
  std::vector<KmsgRecord> flood(1000, record(timeout));
  flood.push_back(record("mlx5_core 0000:ff:00.0: health poll: device's health compromised"));
  EXPECT_TRUE(m->OnKernelLog(flood));
  auto all = All(*m);
  const Finding* f = Find(all, "kmsg.cmd_exec_timeout", name);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_CRITICAL);
  EXPECT_EQ(f->check(), "kmsg");
  EXPECT_EQ(f->repair(), REPAIR_ACTION_REBOOT);
  EXPECT_EQ(f->evidence(), timeout);
  EXPECT_EQ(all.size(), 1u);
  EXPECT_EQ(m->stats().kmsg_matched, 1000u);
  EXPECT_EQ(m->stats().kmsg_other, 1u);
  EXPECT_FALSE(m->OnKernelLog({record(timeout)}));  // a repeat within the window

  // The firmware refusing ACCESS_REG: the device's counters are not read again for the back-off.
  uint64_t before = m->stats().reads;
  Tick();
  m->Poll();
  const uint64_t normal = m->stats().reads - before;
  EXPECT_TRUE(m->OnKernelLog(
      {record("mlx5_core " + pci +
              ": mlx5_cmd_out_err:808:(pid 1585): ACCESS_REG(0x805) op_mod(0x1) failed, status bad "
              "parameter(0x3), syndrome (0x6a0bc0), err(-22)")}));
  Tick();
  m->Poll();
  all = All(*m);
  ASSERT_NE(Find(all, "kmsg.access_reg_failed", name), nullptr);
  const Finding* backoff = Find(all, "counter_access.backoff", name + ":1");
  ASSERT_NE(backoff, nullptr);
  EXPECT_THAT(backoff->evidence(), ::testing::HasSubstr("kernel log: mlx5_core " + pci));
  before = m->stats().reads;
  Tick();
  m->Poll();
  const uint64_t backed_off = m->stats().reads - before;
  EXPECT_LT(backed_off, normal) << "the refused device is still read";
  EXPECT_GT(backed_off, 0u) << "the other devices are read";
}

TEST_F(HealthMonitorTest, LinkDownedIsCritical) {
  WriteCounter("link_downed", 5);
  auto m = Make();
  EXPECT_FALSE(m->Poll());  // baseline
  Tick();
  WriteCounter("link_downed", 6);
  EXPECT_TRUE(m->Poll());
  const auto all = All(*m);
  const Finding* f = Find(all, "counter.link_downed", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_CRITICAL);
  EXPECT_EQ(f->check(), "counter");
  EXPECT_THAT(f->evidence(), ::testing::HasSubstr("link_downed +1"));
  Tick();
  EXPECT_FALSE(m->Poll());  // standing still: no new occurrence, the finding stays (sticky)
  EXPECT_NE(Find(All(*m), "counter.link_downed", "mlx5_0:1"), nullptr);
}

TEST_F(HealthMonitorTest, SymbolErrorRateIsWarning) {
  WriteCounter("symbol_error", 100);
  auto m = Make();
  m->Poll();
  Tick();
  WriteCounter("symbol_error", 110);  // +10: at the limit
  EXPECT_FALSE(m->Poll());
  Tick();
  WriteCounter("symbol_error", 121);  // +11 in 1 s
  EXPECT_TRUE(m->Poll());
  const auto all = All(*m);
  const Finding* f = Find(all, "counter.symbol_error.1s", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_WARNING);
}

TEST_F(HealthMonitorTest, HwCounterIsReadFromHwCounters) {
  WriteCounter("rnr_nak_retry_err", 3, "hw_counters");
  auto m = Make();
  m->Poll();
  Tick();
  WriteCounter("rnr_nak_retry_err", 4, "hw_counters");
  EXPECT_TRUE(m->Poll());
  const Finding* f = nullptr;
  const auto all = All(*m);
  f = Find(all, "counter.rnr_nak_retry_err", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_CRITICAL);
}

TEST_F(HealthMonitorTest, AerFatalOfTheNicIsCritical) {
  const std::string bdf = host_.rdma_devices(0).pci().address();
  auto fn = testing::PciFunctionPath(spec_, bdf);
  ASSERT_TRUE(fn.ok()) << fn.status();
  const fs::path file = dir_ / "sys" / *fn / "aer_dev_fatal";
  ASSERT_TRUE(fs::exists(file));
  auto m = Make();
  m->Poll();
  Tick();
  std::ofstream(file) << "Undefined 0\nDLP 1\nTOTAL_ERR_FATAL 1\n";
  EXPECT_TRUE(m->Poll());
  const auto all = All(*m);
  const Finding* f = Find(all, "counter.aer_dev_fatal", bdf);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_CRITICAL);
  EXPECT_EQ(f->repair(), REPAIR_ACTION_HARDWARE_INSPECTION);
}

TEST_F(HealthMonitorTest, CounterResetIsNoIncrease) {
  WriteCounter("link_downed", 5);
  auto m = Make();
  m->Poll();
  Tick();
  WriteCounter("link_downed", 0);  // driver reload
  EXPECT_FALSE(m->Poll());
  EXPECT_EQ(Find(All(*m), "counter.link_downed", "mlx5_0:1"), nullptr);
  Tick();
  WriteCounter("link_downed", 1);  // counted from the reset
  EXPECT_TRUE(m->Poll());
  EXPECT_NE(Find(All(*m), "counter.link_downed", "mlx5_0:1"), nullptr);
}

TEST_F(HealthMonitorTest, DirectoryInPlaceOfFileIsSkippedNotBackedOff) {
  auto m = Make();
  m->Poll();
  fs::remove(mlx5_0_ / "ports/1/counters/link_downed");
  fs::create_directory(mlx5_0_ / "ports/1/counters/link_downed");
  Tick();
  EXPECT_FALSE(m->Poll());
  EXPECT_GT(m->stats().read_errors, 0u);
  EXPECT_EQ(m->stats().backoff_ports, 0u);
  EXPECT_THAT(All(*m), ::testing::IsEmpty());
}

TEST_F(HealthMonitorTest, AccessErrorBacksOffThePort) {
  FailingFs failing(sys_.get());
  failing.fail_suffix = "/ports/1/counters/link_downed";
  failing.fail_errno = EIO;
  options_.config.set_access_backoff_s(3600);
  auto m = Make(&failing);
  EXPECT_TRUE(m->Poll());
  // Every mlx5 device's port 1 failed; each is backed off after one read.
  const int first = failing.failed_reads;
  EXPECT_GT(first, 0);
  auto all = All(*m);
  const Finding* f = Find(all, "counter_access.backoff", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_OK);
  EXPECT_THAT(f->evidence(), ::testing::HasSubstr("counters/link_downed"));
  EXPECT_THAT(f->evidence(), ::testing::HasSubstr("Input/output error"));
  EXPECT_EQ(m->stats().backoff_ports, static_cast<uint64_t>(first));
  Tick();
  EXPECT_FALSE(m->Poll());
  EXPECT_EQ(failing.failed_reads, first);  // not read again during the back-off
  EXPECT_NE(Find(All(*m), "counter_access.backoff", "mlx5_0:1"), nullptr);
  Tick(absl::Hours(1));
  failing.fail_suffix.clear();  // the firmware lets us read again
  m->Poll();
  EXPECT_EQ(m->stats().backoff_ports, 0u);
  all = All(*m);
  f = Find(all, "counter_access.backoff", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->cleared());
}

TEST_F(HealthMonitorTest, ExcludedPortIsNeverRead) {
  options_.config.add_counter_exclude("mlx5_0");
  WriteCounter("link_downed", 5);
  auto m = Make();
  m->Poll();
  Tick();
  WriteCounter("link_downed", 9);
  m->Poll();
  const auto all = All(*m);
  EXPECT_EQ(Find(all, "counter.link_downed", "mlx5_0:1"), nullptr);
  const Finding* f = Find(all, "counter_access.excluded", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_OK);
}

TEST_F(HealthMonitorTest, MissingDeviceAfterThreePolls) {
  auto m = Make();
  m->Poll();
  const fs::path link = dir_ / "sys/class/infiniband/mlx5_0";
  const fs::path target = fs::read_symlink(link);
  fs::remove(link);
  for (int i = 0; i < 2; ++i) {
    Tick();
    EXPECT_FALSE(m->Poll()) << i;
  }
  Tick();
  EXPECT_TRUE(m->Poll());
  auto all = All(*m);
  const Finding* f = Find(all, "device_missing.gone", "mlx5_0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_CRITICAL);
  EXPECT_FALSE(f->cleared());
  fs::create_directory_symlink(target, link);
  Tick();
  m->Poll();
  all = All(*m);
  f = Find(all, "device_missing.gone", "mlx5_0");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->cleared());
}

TEST_F(HealthMonitorTest, DeviceLeavingTheInventoryIsStillChecked) {
  auto m = Make();
  m->Poll();
  fs::remove(dir_ / "sys/class/infiniband/mlx5_0");
  Host without = host_;
  without.mutable_rdma_devices()->erase(without.mutable_rdma_devices()->begin());
  ASSERT_NE(without.rdma_devices(0).name(), "mlx5_0");
  m->Follow(without);
  for (int i = 0; i < 3; ++i) {
    Tick();
    m->Poll();
  }
  EXPECT_NE(Find(All(*m), "device_missing.gone", "mlx5_0"), nullptr);
}

TEST_F(HealthMonitorTest, PortLeavingActiveIsAFlap) {
  auto m = Make();
  Host down = host_;
  ASSERT_EQ(down.rdma_devices(0).name(), "mlx5_0");
  down.mutable_rdma_devices(0)->mutable_ports(0)->set_state(PORT_STATE_DOWN);
  Tick();
  m->Follow(down);
  const auto all = All(*m);
  const Finding* f = Find(all, "port_state.flap", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_WARNING);
}

TEST_F(HealthMonitorTest, CarrierChangesAreFlaps) {
  const std::string netdev = host_.rdma_devices(0).ports(0).netdev();
  ASSERT_FALSE(netdev.empty());
  const fs::path file = dir_ / "sys/class/net" / netdev / "carrier_changes";
  std::ofstream(file) << "4\n";
  auto m = Make();
  m->Poll();
  Tick();
  std::ofstream(file) << "6\n";  // down and up again
  EXPECT_TRUE(m->Poll());
  const auto all = All(*m);
  const Finding* f = Find(all, "port_state.flap", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->evidence(), ::testing::HasSubstr("carrier_changes +2"));
  EXPECT_EQ(Find(all, "counter.carrier_changes", "mlx5_0:1"), nullptr);  // +2 is not over 2
}

// One flap, seen twice (the published port DOWN, then the netdev's carrier_changes +2), counts
// once; a second carrier flap nobody published counts again.
TEST_F(HealthMonitorTest, AFlapBothSourcesShowCountsOnce) {
  const std::string netdev = host_.rdma_devices(0).ports(0).netdev();
  const fs::path file = dir_ / "sys/class/net" / netdev / "carrier_changes";
  std::ofstream(file) << "4\n";
  auto m = Make();
  m->Poll();
  Host down = host_;
  down.mutable_rdma_devices(0)->mutable_ports(0)->set_state(PORT_STATE_DOWN);
  Tick();
  m->Follow(down);
  m->Follow(host_);
  std::ofstream(file) << "6\n";
  Tick();
  m->Poll();
  auto all = All(*m);
  const Finding* f = Find(all, "port_state.flap", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->evidence(), ::testing::StartsWith("1 flap in")) << f->evidence();
  std::ofstream(file) << "8\n";
  Tick();
  m->Poll();
  all = All(*m);
  f = Find(all, "port_state.flap", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->evidence(), ::testing::StartsWith("2 flaps in")) << f->evidence();
  // A flap whose down and up land in different polls is one flap.
  std::ofstream(file) << "9\n";
  Tick();
  m->Poll();
  std::ofstream(file) << "10\n";
  Tick();
  m->Poll();
  all = All(*m);
  f = Find(all, "port_state.flap", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->evidence(), ::testing::StartsWith("3 flaps in")) << f->evidence();
  // The poll first (the carrier went down), the published port DOWN after: still one flap.
  std::ofstream(file) << "11\n";
  Tick();
  m->Poll();
  m->Follow(down);
  m->Follow(host_);
  std::ofstream(file) << "12\n";
  Tick();
  m->Poll();
  all = All(*m);
  f = Find(all, "port_state.flap", "mlx5_0:1");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->evidence(), ::testing::StartsWith("4 flaps in")) << f->evidence();
}

// A software device (rxe) is watched like a NIC, but deleting it is no "missing" device.
TEST_F(HealthMonitorTest, SoftwareDeviceIsWatchedButNeverMissing) {
  Host soft = host_;
  soft.mutable_rdma_devices(0)->mutable_pci()->clear_address();
  auto m = std::make_unique<HealthMonitor>(sys_.get(), options_, [this] { return clock_; });
  m->Start();
  m->Follow(soft);
  WriteCounter("link_downed", 1);
  m->Poll();
  Tick();
  WriteCounter("link_downed", 2);
  m->Poll();
  EXPECT_NE(Find(All(*m), "counter.link_downed", "mlx5_0:1"), nullptr);
  fs::remove(dir_ / "sys/class/infiniband/mlx5_0");
  for (int i = 0; i < 5; ++i) {
    Tick();
    m->Poll();
  }
  EXPECT_EQ(Find(All(*m), "device_missing.gone", "mlx5_0"), nullptr);
}

// A bridge above the NIC whose ACS redirects peer-to-peer traffic (config space as root reads
// it); the same bridge read as an unprivileged agent reads it (64 bytes) is no finding.
TEST_F(HealthMonitorTest, AcsRedirectOnABridgeAboveTheNicWarns) {
  std::string bridge;
  for (const std::string& bdf : host_.rdma_devices(0).pci().path()) {
    if (!absl::StartsWith(bdf, "pci") && bdf != host_.rdma_devices(0).pci().address()) bridge = bdf;
  }
  ASSERT_FALSE(bridge.empty()) << host_.rdma_devices(0).pci().ShortDebugString();
  const fs::path config = dir_ / "sys/bus/pci/devices" / bridge / "config";
  std::string bytes(4096, '\0');
  bytes[0x100] = 0x0d;  // extended capability ACS, version 1, next 0
  bytes[0x102] = 0x01;
  bytes[0x106] = 0x0c;  // ACS Control: P2P Request and Completion Redirect
  std::ofstream(config, std::ios::binary) << bytes;
  auto m = Make();
  auto all = All(*m);
  const Finding* f = Find(all, "pcie_acs.redirect", bridge);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_WARNING);
  EXPECT_EQ(f->evidence(), "ACS Control 0x000c (ReqRedir 1, CmpltRedir 1)");

  std::ofstream(config, std::ios::binary | std::ios::trunc) << bytes.substr(0, 64);
  // Publishes follow each other: the same bridges are not read again at once...
  Tick();
  m->Follow(host_);
  all = All(*m);
  f = Find(all, "pcie_acs.redirect", bridge);
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->cleared());
  // ...but after 10 minutes.
  Tick(absl::Minutes(10));
  m->Follow(host_);
  all = All(*m);
  f = Find(all, "pcie_acs.redirect", bridge);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->cleared());  // gone from what is read now, kept sticky
}

TEST_F(HealthMonitorTest, MemorySurvivesARestartButNotAReboot) {
  WriteCounter("link_downed", 5);
  absl::Time first_seen;
  {
    auto m = Make();
    m->Poll();
    Tick();
    WriteCounter("link_downed", 6);
    ASSERT_TRUE(m->Poll());
    const auto all = All(*m);
    const Finding* f = Find(all, "counter.link_downed", "mlx5_0:1");
    ASSERT_NE(f, nullptr);
    first_seen = absl::FromUnixSeconds(f->first_seen().seconds());
  }
  ASSERT_TRUE(fs::exists(options_.state_file));
  Tick(absl::Seconds(30));
  {
    auto again = Make();
    const auto all = All(*again);
    const Finding* f = Find(all, "counter.link_downed", "mlx5_0:1");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(absl::FromUnixSeconds(f->first_seen().seconds()), first_seen);
  }
  options_.boot_id = "boot-b";
  auto rebooted = Make();
  EXPECT_THAT(All(*rebooted), ::testing::IsEmpty());
}

TEST_F(HealthMonitorTest, CorruptStateIsANoteAndRewritten) {
  std::ofstream(options_.state_file) << "not a state file";
  auto m = Make();
  const auto all = All(*m);
  const Finding* f = Find(all, "health_state.corrupt", options_.state_file);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity(), SEVERITY_OK);
  std::ifstream in(options_.state_file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(FindingMemory::ParseState(bytes).ok());
}

}  // namespace
}  // namespace fabric
