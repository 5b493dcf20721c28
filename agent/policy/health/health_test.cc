#include "agent/policy/health/health.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/inventory/discovery/discovery.h"
#include "agent/policy/health/health_section.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using namespace ::fabric::v1;  // NOLINT
using ::testing::ElementsAre;
using testing::HostSpec;
using ::testing::IsEmpty;

// Writes example host `name` (after `edit`) and discovers it.
Host DiscoverExample(const std::string& name, const std::function<void(HostSpec&)>& edit = {}) {
  auto spec = testing::ExampleHost(name);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (edit) edit(*spec);
  std::string tmpl = testing::MakeTempDir("health");
  EXPECT_FALSE(tmpl.empty());
  const fs::path dir = fs::path(tmpl) / "host";
  absl::Status written = testing::WriteHost(*spec, dir);
  EXPECT_TRUE(written.ok()) << written;
  HostFsImpl sys((dir / "sys").string()), proc((dir / "proc").string());
  auto host = Discover(sys, proc);
  fs::remove_all(tmpl);
  EXPECT_TRUE(host.ok()) << host.status();
  return host.ok() ? *host : Host();
}

// Discovers example host `name` (after `edit`) and evaluates health.
Health Evaluate(const std::string& name, const std::function<void(HostSpec&)>& edit = {},
                const SelectionPolicy& policy = {}, const HealthConfig& config = {}) {
  return EvaluateHealth(DiscoverExample(name, edit), policy, config);
}

// "check subject" of every finding.
std::vector<std::string> Checks(const Health& h) {
  std::vector<std::string> out;
  for (const Finding& f : h.findings()) out.push_back(f.check() + " " + f.subject());
  return out;
}

// A finding's outside bytes (a kernel log line in its evidence, a subject from sysfs) reach the
// terminal escaped: no ESC, CR or C1 byte of a kernel line can move the cursor or recolour it.
TEST(Health, FindingLineEscapesOutsideBytes) {
  const struct {
    std::string subject, message, evidence, want;
  } cases[] = {
      {"mlx5_0:1", "port DOWN", "state DOWN", "WARNING kmsg mlx5_0:1: port DOWN [state DOWN]"},
      {"mlx5_0", "fatal", "mlx5_core 0000:3b:00.0: \x1b[2J\x1b[31mOK\r",
       R"(WARNING kmsg mlx5_0: fatal [mlx5_core 0000:3b:00.0: \x1b[2J\x1b[31mOK\x0d])"},
      {"mlx5_0", "fatal",
       "a\x1b]0;title\x07"
       "b\nc\x9b"
       "d",
       R"(WARNING kmsg mlx5_0: fatal [a\x1b]0;title\x07b\nc\x9bd])"},
      {"eth\x1b[1m0", "m\rn", "", R"(WARNING kmsg eth\x1b[1m0: m\x0dn)"},
  };
  for (const auto& c : cases) {
    Finding f;
    f.set_severity(SEVERITY_WARNING);
    f.set_check("kmsg");
    f.set_subject(c.subject);
    f.set_message(c.message);
    f.set_evidence(c.evidence);
    EXPECT_EQ(FindingLine(f), c.want) << c.evidence;
  }
}

TEST(Health, HealthyHostsAreOk) {
  // ipv6-roce: its global IPv6 RoCE v2 GIDs are routable; ib-prefix-gids: prefix-only slots are
  // empty, not GIDs.
  for (const char* name :
       {"roce-9port", "dgx-h100-ib", "amd-mi300x-bnxt", "ipv6-roce", "ib-prefix-gids"}) {
    Health h = Evaluate(name);
    EXPECT_EQ(h.verdict(), SEVERITY_OK) << name << ": " << h.DebugString();
    EXPECT_THAT(h.findings(), IsEmpty()) << name;
    EXPECT_EQ(HealthExitCode(h.verdict()), 0);
  }
}

TEST(Health, PortDownIsCritical) {
  Health h = Evaluate("many-hcas");
  EXPECT_EQ(h.verdict(), SEVERITY_CRITICAL);
  EXPECT_THAT(Checks(h), ElementsAre("port_state mlx5_2:1"));
  EXPECT_THAT(h.findings(0).message(), ::testing::HasSubstr("DOWN"));
  EXPECT_EQ(HealthExitCode(h.verdict()), 2);

  // A port denied in config is unused on purpose: not checked.
  // Same rule as selection (DeniedBy): by device, by port, or by netdev.
  for (const char* deny : {"mlx5_2", "mlx5_2:1", "enp51s0np0"}) {
    SelectionPolicy policy;
    policy.add_deny(deny);
    EXPECT_EQ(Evaluate("many-hcas", {}, policy).verdict(), SEVERITY_OK) << deny;
  }
}

TEST(Health, DegradedRateAndPcieLinkWarn) {
  Health h = Evaluate("roce-9port", [](HostSpec& s) {
    s.FindRdma("mlx5_3")->ports[0].rate = "200 Gb/sec (4X HDR)";
    s.FindPci(s.FindRdma("mlx5_5")->pci)->current_link.width = 8;
    s.FindPci(s.FindRdma("mlx5_6")->pci)->current_link.speed = "16.0 GT/s PCIe";
  });
  EXPECT_EQ(h.verdict(), SEVERITY_WARNING);
  // roce-9port is an 8 x H100 host: the slow port also leaves it short of its class's rate.
  EXPECT_THAT(Checks(h), ElementsAre("port_rate mlx5_3:1", "pcie_link mlx5_5", "pcie_link mlx5_6",
                                     "host_class "));
  EXPECT_EQ(HealthExitCode(h.verdict()), 1);
}

TEST(Health, GpuLinkSpeedAtIdleIsNormalButWidthIsNot) {
  Health idle = Evaluate("roce-9port", [](HostSpec& s) {
    for (auto& f : s.pci) {
      if (f.class_code == 0x030200) f.current_link.speed = "2.5 GT/s PCIe";
    }
  });
  EXPECT_EQ(idle.verdict(), SEVERITY_OK) << idle.DebugString();
  Health narrow = Evaluate("roce-9port", [](HostSpec& s) {
    for (auto& f : s.pci) {
      if (f.class_code == 0x030200 && f.bdf == "0000:1a:00.0") f.current_link.width = 4;
    }
  });
  EXPECT_THAT(Checks(narrow), ElementsAre("pcie_link 0000:1a:00.0"));
}

TEST(Health, RocePortWithoutIpv4GidWarns) {
  Health h = Evaluate("roce-9port", [](HostSpec& s) {
    auto& gids = s.FindRdma("mlx5_4")->ports[0].gids;
    gids.resize(2);  // link-local only: the IPv4 address is gone
  });
  EXPECT_THAT(Checks(h), ElementsAre("roce_gid mlx5_4:1"));
}

TEST(Health, Ipv6OnlyRocePortWithoutGlobalGidWarns) {
  Health h = Evaluate("ipv6-roce", [](HostSpec& s) {
    s.FindRdma("mlx5_1")->ports[0].gids.resize(2);  // link-local only
  });
  EXPECT_THAT(Checks(h), ElementsAre("roce_gid mlx5_1:1"));
}

// roce-9port's eight RoCE netdevs (eth1..eth8) share 25.11.128.0/24.
void SetArp(HostSpec& s, const std::string& iface, int ignore, int announce) {
  s.sysctls.push_back({"net/ipv4/conf/" + iface + "/arp_ignore", std::to_string(ignore)});
  s.sysctls.push_back({"net/ipv4/conf/" + iface + "/arp_announce", std::to_string(announce)});
}

void SetArpEverywhere(HostSpec& s, int all_ignore, int all_announce, int ignore, int announce) {
  SetArp(s, "all", all_ignore, all_announce);
  for (int i = 1; i <= 8; ++i) SetArp(s, "eth" + std::to_string(i), ignore, announce);
  SetArp(s, "macvlan0", ignore, announce);
}

TEST(Health, RdmaNetdevsInOneSubnetWithDefaultArpSettingsWarnOfArpFlux) {
  Health h = Evaluate("roce-9port", [](HostSpec& s) { SetArpEverywhere(s, 0, 0, 0, 0); });
  EXPECT_EQ(h.verdict(), SEVERITY_WARNING);
  ASSERT_THAT(Checks(h), ElementsAre("arp_flux 25.11.128.0/24"));  // macvlan0 is alone in its /24
  const std::string& m = h.findings(0).message();
  EXPECT_THAT(m, ::testing::HasSubstr("eth1 (arp_ignore=0, arp_announce=0)"));
  // All of them loose: the fix is conf/all's.
  EXPECT_THAT(m, ::testing::HasSubstr("sysctl -w net.ipv4.conf.all.arp_ignore=1 "
                                      "net.ipv4.conf.all.arp_announce=2 ("));
}

TEST(Health, ArpSettingsTakeTheLargerOfAllAndTheInterface) {
  // conf/all alone fixes every interface; so do the interfaces' own settings.
  EXPECT_THAT(
      Evaluate("roce-9port", [](HostSpec& s) { SetArpEverywhere(s, 1, 2, 0, 0); }).findings(),
      IsEmpty());
  EXPECT_THAT(
      Evaluate("roce-9port", [](HostSpec& s) { SetArpEverywhere(s, 0, 0, 1, 2); }).findings(),
      IsEmpty());
  // One interface left with arp_announce=0: only it is named.
  Health h = Evaluate("roce-9port", [](HostSpec& s) {
    SetArpEverywhere(s, 1, 0, 0, 2);
    std::erase_if(s.sysctls,
                  [](const auto& kv) { return kv.first.find("eth5/") != std::string::npos; });
    SetArp(s, "eth5", 0, 0);
  });
  ASSERT_THAT(Checks(h), ElementsAre("arp_flux 25.11.128.0/24"));
  EXPECT_THAT(h.findings(0).message(), ::testing::HasSubstr("eth5 (arp_ignore=1, arp_announce=0)"));
  EXPECT_THAT(h.findings(0).message(), ::testing::Not(::testing::HasSubstr("eth4 (")));
  EXPECT_THAT(h.findings(0).message(),
              ::testing::HasSubstr("sysctl -w net.ipv4.conf.eth5.arp_ignore=1 "
                                   "net.ipv4.conf.eth5.arp_announce=2 ("));
}

TEST(Health, UnreadableOrMalformedArpSettingsAreNoFinding) {
  // No /proc/sys/net (the example trees, a container): unknown, not loose.
  Health none = Evaluate("roce-9port");
  EXPECT_THAT(none.findings(), IsEmpty());
  // A malformed value is a field problem (health's discovery line), not an ARP flux claim.
  Health bad = Evaluate("roce-9port", [](HostSpec& s) {
    SetArpEverywhere(s, 0, 0, 0, 0);
    for (auto& [path, value] : s.sysctls) {
      if (path.find("/all/") == std::string::npos) value = "lots";
    }
  });
  EXPECT_THAT(Checks(bad), ElementsAre("discovery "));
}

TEST(Health, NoGpuDirectWarns) {
  Health h = Evaluate("roce-9port", [](HostSpec& s) { s.RemoveModule("nvidia_peermem"); });
  EXPECT_THAT(Checks(h), ElementsAre("gpudirect "));
}

TEST(Health, NoRdmaIsCriticalAndBrokenTreesSayWhatWasNotRead) {
  Health none = Evaluate("roce-9port", [](HostSpec& s) {
    std::vector<std::string> names;
    for (const auto& d : s.rdma) names.push_back(d.name);
    for (const auto& n : names) s.RemoveRdma(n);
  });
  EXPECT_EQ(none.verdict(), SEVERITY_CRITICAL);
  EXPECT_THAT(Checks(none), ElementsAre("no_rdma_device "));

  // What the broken tree hides is UNKNOWN, not a false alarm: mlx5_2's state reads "banana",
  // mlx5_5 has no gid_attrs, mlx5_8's GID 3 has type "RoCE v9". mlx5_3's IPv4 RoCE v2 entry is
  // garbage, so only its v1 twin is left: a real warning.
  Health broken = Evaluate("broken");
  std::vector<std::string> got;
  for (const Finding& f : broken.findings()) {
    got.push_back(std::string(SeverityName(f.severity())) + " " + f.check() + " " + f.subject());
  }
  EXPECT_THAT(got, ElementsAre("UNKNOWN port_state mlx5_2:1", "WARNING roce_gid mlx5_3:1",
                               "UNKNOWN roce_gid mlx5_5:1", "UNKNOWN roce_gid mlx5_8:1",
                               "WARNING discovery "));
  EXPECT_EQ(broken.verdict(), SEVERITY_WARNING);
}

TEST(Health, ExitCodesAndNames) {
  EXPECT_EQ(HealthExitCode(SEVERITY_UNKNOWN), 3);
  EXPECT_EQ(HealthExitCode(SEVERITY_UNSPECIFIED), 3);
  EXPECT_STREQ(SeverityName(SEVERITY_CRITICAL), "CRITICAL");
}

// Two back-end ports hearing one switch port cannot both be cabled to it.
TEST(Health, TwoPortsHearingOneSwitchPortWarnOfCabling) {
  auto spec = testing::ExampleHost("roce-9port");
  ASSERT_TRUE(spec.ok());
  std::string tmpl = testing::MakeTempDir("health");
  ASSERT_FALSE(tmpl.empty());
  const fs::path dir = fs::path(tmpl) / "host";
  ASSERT_TRUE(testing::WriteHost(*spec, dir).ok());
  HostFsImpl sys((dir / "sys").string()), proc((dir / "proc").string());
  auto host = Discover(sys, proc);
  fs::remove_all(tmpl);
  ASSERT_TRUE(host.ok());
  auto hear = [&](const std::string& netdev, const std::string& port) {
    for (Netdev& n : *host->mutable_netdevs()) {
      if (n.name() != netdev) continue;
      Neighbor* nb = n.mutable_neighbor();
      nb->set_chassis_id_subtype(4);
      nb->set_chassis_id("02:00:00:00:0b:07");
      nb->set_port_id(port);
      nb->set_switch_label("leaf-07");
    }
  };
  hear("eth1", "swp1");
  hear("eth2", "swp2");
  hear("eth0", "swp1");  // The front-end is not a back-end port: not compared.
  EXPECT_THAT(Checks(EvaluateHealth(*host, {})), IsEmpty());
  hear("eth3", "swp2");
  Health h = EvaluateHealth(*host, {});
  EXPECT_THAT(Checks(h), ::testing::ElementsAre("cabling eth2"));
  EXPECT_EQ(h.verdict(), SEVERITY_WARNING);
  ASSERT_EQ(h.findings_size(), 1);
  EXPECT_THAT(h.findings(0).message(), ::testing::HasSubstr("eth2 and eth3 both hear switch "
                                                            "leaf-07 port swp2"));

  // Rails: eth1 and eth2 on theirs; eth3 on eth2's rail; eth4 (on no rail by config) on a switch
  // that no rail's pattern matches.
  SelectionPolicy rails;
  for (int k = 1; k <= 4; ++k) {
    Rail* r = rails.add_rails();
    r->set_name(absl::StrCat("r", k));
    r->set_switch_pattern(absl::StrCat("leaf-r", k, "-*"));
    if (k < 4) r->add_ports(absl::StrCat("eth", k));  // eth4 belongs to no rail by config.
  }
  for (int k = 1; k <= 4; ++k) {
    for (Netdev& n : *host->mutable_netdevs()) {
      if (n.name() != absl::StrCat("eth", k)) continue;
      const int heard = k == 3 ? 2 : k;
      n.mutable_neighbor()->set_system_name(k == 4 ? "spine-1"
                                                   : absl::StrCat("leaf-r", heard, "-a"));
      n.mutable_neighbor()->set_switch_label(n.neighbor().system_name());
      n.mutable_neighbor()->set_port_id(absl::StrCat("swp", k));
    }
  }
  h = EvaluateHealth(*host, rails);
  EXPECT_THAT(Checks(h), ::testing::ElementsAre("cabling eth3", "cabling eth4")) << h.DebugString();
  ASSERT_EQ(h.findings_size(), 2);
  EXPECT_THAT(h.findings(0).message(),
              ::testing::HasSubstr("eth3 belongs on rail r3 (leaf-r3-*) but is cabled to "
                                   "leaf-r2-a (rail r2)"));
  EXPECT_THAT(h.findings(1).message(),
              ::testing::HasSubstr("eth4 is cabled to spine-1, which matches no rail"));
}

TEST(Health, EveryFindingHasACodeUnderItsCheckAndARepair) {
  for (const char* name : {"many-hcas", "broken", "roce-9port", "pcie-2x2"}) {
    Health h = Evaluate(name, [](HostSpec& s) {
      if (auto* d = s.FindRdma("mlx5_1")) d->fw_ver = "1.2.3";
    });
    for (const Finding& f : h.findings()) {
      EXPECT_TRUE(absl::StartsWith(f.code(), f.check() + ".")) << name << ": " << f.DebugString();
      EXPECT_NE(f.repair(), REPAIR_ACTION_UNSPECIFIED) << name << ": " << f.DebugString();
    }
  }
  // Made outside EvaluateHealth without a code: the check stands in, and the repair is NONE.
  Health h;
  Finding f;
  f.set_check("agent");
  f.set_severity(SEVERITY_WARNING);
  AddFinding(&h, f);
  EXPECT_EQ(h.findings(0).code(), "agent");
  EXPECT_EQ(h.findings(0).repair(), REPAIR_ACTION_NONE);
}

TEST(Health, DryRunFindingsReportWithoutDeciding) {
  Health h;
  h.set_verdict(SEVERITY_OK);
  Finding f;
  f.set_check("counter");
  f.set_code("counter.symbol_error");
  f.set_severity(SEVERITY_CRITICAL);
  f.set_dry_run(true);
  AddFinding(&h, f);
  EXPECT_EQ(h.verdict(), SEVERITY_OK);
  ASSERT_EQ(h.findings_size(), 1);
  f.set_dry_run(false);
  AddFinding(&h, f);
  EXPECT_EQ(h.verdict(), SEVERITY_CRITICAL);
}

TEST(Health, FirmwareThatDiffersAcrossHcasOfOneModelWarns) {
  Health h =
      Evaluate("roce-9port", [](HostSpec& s) { s.FindRdma("mlx5_3")->fw_ver = "28.38.1000"; });
  ASSERT_THAT(Checks(h), ElementsAre(::testing::StartsWith("firmware ")));
  const Finding& f = h.findings(0);
  EXPECT_EQ(f.severity(), SEVERITY_WARNING);
  EXPECT_EQ(f.code(), "firmware.mismatch");
  EXPECT_EQ(f.repair(), REPAIR_ACTION_UPDATE_FIRMWARE);
  EXPECT_THAT(f.evidence(), ::testing::HasSubstr("mlx5_3 on 28.38.1000"));
  EXPECT_THAT(f.message(), ::testing::HasSubstr("2 firmware versions"));
  // VFs run their PF's firmware, whatever their fw_ver file says.
  Health vf = Evaluate("dgx-h100-ib", [](HostSpec& s) {
    for (int v = 12; v < 16; ++v) s.FindRdma(absl::StrCat("mlx5_", v))->fw_ver = "1.0.0";
  });
  for (const Finding& g : vf.findings()) EXPECT_NE(g.check(), "firmware") << g.DebugString();
}

TEST(Health, RdmaDeviceWithoutUverbsIsCritical) {
  Health one = Evaluate("roce-9port", [](HostSpec& s) { s.FindRdma("mlx5_4")->uverbs.reset(); });
  ASSERT_THAT(Checks(one), ElementsAre("uverbs mlx5_4"));
  EXPECT_EQ(one.findings(0).code(), "uverbs.missing");
  EXPECT_EQ(one.verdict(), SEVERITY_CRITICAL);
  // None at all: each device says so.
  Health none = Evaluate("dgx-h100-ib", [](HostSpec& s) {
    for (auto& d : s.rdma) d.uverbs.reset();
  });
  int missing = 0;
  for (const Finding& f : none.findings()) missing += f.code() == "uverbs.missing";
  EXPECT_EQ(missing, static_cast<int>(testing::ExampleHost("dgx-h100-ib")->rdma.size()));

  // No class/infiniband_verbs: ib_uverbs is not loaded. A passing read failure is not a fact.
  Host host;
  host.add_rdma_devices()->set_name("mlx5_0");
  FieldProblem* p = host.add_problems();
  p->set_field("uverbs_device");
  p->set_path("class/infiniband_verbs");
  // (The problem is also a discovery finding.)
  Health h = EvaluateHealth(host, {});
  ASSERT_THAT(Checks(h), ElementsAre("uverbs mlx5_0", "discovery "));
  EXPECT_EQ(h.findings(0).code(), "uverbs.no_module");
  EXPECT_THAT(h.findings(0).message(), ::testing::HasSubstr("modprobe ib_uverbs"));
  p->set_transient(true);
  EXPECT_THAT(Checks(EvaluateHealth(host, {})), ElementsAre("discovery "));
}

TEST(Health, PortWithoutUmadIsAWarning) {
  Health one = Evaluate("roce-9port", [](HostSpec& s) { s.FindRdma("mlx5_4")->umad = false; });
  ASSERT_THAT(Checks(one), ElementsAre("umad mlx5_4:1"));
  EXPECT_EQ(one.findings(0).code(), "umad.missing");
  EXPECT_EQ(one.verdict(), SEVERITY_WARNING);
  EXPECT_THAT(one.findings(0).message(), ::testing::HasSubstr("ib_umad"));
  // iWARP has no MADs; a device without uverbs is the uverbs check's alone.
  Health iwarp = Evaluate("roce-9port", [](HostSpec& s) {
    s.FindRdma("mlx5_4")->umad = false;
    s.FindRdma("mlx5_4")->node_type = "4: RNIC";
    s.FindRdma("mlx5_5")->umad = false;
    s.FindRdma("mlx5_5")->uverbs.reset();
  });
  EXPECT_THAT(Checks(iwarp), ElementsAre("uverbs mlx5_5"));
  // A passing read failure of the class is not a fact.
  Host host =
      DiscoverExample("roce-9port", [](HostSpec& s) { s.FindRdma("mlx5_4")->umad = false; });
  FieldProblem* p = host.add_problems();
  p->set_field("umad_device");
  p->set_path("class/infiniband_mad");
  p->set_transient(true);
  const Health passing = EvaluateHealth(host, {});
  for (const Finding& f : passing.findings()) EXPECT_NE(f.check(), "umad");
}

// dgx-h100-ib: 8 H100 GPUs, each with a 400 Gb/s NDR port.
TEST(Health, HostClassExpectsItsPortsAtItsRate) {
  const std::string gpu = [] {
    auto spec = testing::ExampleHost("dgx-h100-ib");
    for (const auto& f : spec->pci) {
      if (f.class_code == 0x030200) return absl::StrFormat("%04x:%04x", f.vendor, f.device);
    }
    return std::string();
  }();
  ASSERT_FALSE(gpu.empty());
  HealthConfig faster;
  HostClass* c = faster.add_host_classes();
  c->set_name("h100-8x800");
  c->add_gpu_models(gpu);
  c->set_gpus(8);
  c->set_ports(8);
  c->set_rate_gbps(800);
  Health h = Evaluate("dgx-h100-ib", {}, {}, faster);
  ASSERT_THAT(Checks(h), ElementsAre("host_class ")) << h.DebugString();
  // Its ports are all up, but at 400: slow, not missing.
  EXPECT_EQ(h.findings(0).severity(), SEVERITY_WARNING);
  EXPECT_EQ(h.findings(0).code(), "host_class.rate");
  EXPECT_EQ(h.findings(0).repair(), REPAIR_ACTION_RESEAT_CABLE);
  EXPECT_THAT(h.findings(0).message(), ::testing::HasSubstr("0 active back-end ports at 800"));
  EXPECT_THAT(h.findings(0).evidence(), ::testing::HasSubstr("class h100-8x800"));

  // Its own class at 400: healthy; two ports down are short of it.
  c->set_rate_gbps(400);
  EXPECT_THAT(Checks(Evaluate("dgx-h100-ib", {}, {}, faster)), IsEmpty());
  Health down = Evaluate(
      "dgx-h100-ib",
      [](HostSpec& s) {
        for (auto& d : s.rdma) {
          if (d.name == "mlx5_0" || d.name == "mlx5_3") d.ports[0].state = "1: DOWN";
        }
      },
      {}, faster);
  std::vector<std::string> classes;
  for (const Finding& f : down.findings()) {
    if (f.check() == "host_class") classes.push_back(f.message());
  }
  EXPECT_THAT(classes, ElementsAre(::testing::HasSubstr("6 active back-end ports at 400")));
  EXPECT_EQ(down.verdict(), SEVERITY_CRITICAL);

  // A class of other GPUs, or of another count, does not apply.
  c->clear_gpu_models();
  c->add_gpu_models("MI300X");
  c->set_rate_gbps(800);
  faster.set_no_default_host_classes(true);
  EXPECT_THAT(Checks(Evaluate("dgx-h100-ib", {}, {}, faster)), IsEmpty());
}

TEST(Health, HostClassesOfTheConfigComeFirst) {
  HealthConfig c;
  HostClass* k = c.add_host_classes();
  k->set_name("mine");
  EXPECT_EQ(EffectiveHostClasses(c).front().name(), "mine");
  EXPECT_EQ(EffectiveHostClasses(c).size(), DefaultHostClasses().size() + 1);
  c.set_no_default_host_classes(true);
  EXPECT_EQ(EffectiveHostClasses(c).size(), 1u);
}

}  // namespace
}  // namespace fabric
