#include "agent/daemon/cycle/uevent.h"

#include <gtest/gtest.h>

#include <string>

namespace fabric {
namespace {

std::string Msg(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) {
    out.append(p);
    out.push_back('\0');
  }
  return out;
}

TEST(ParseUevent, RxeAdd) {
  auto e = ParseUevent(Msg({"add@/devices/virtual/net/veth0/infiniband/rxe0", "ACTION=add",
                            "DEVPATH=/devices/virtual/net/veth0/infiniband/rxe0",
                            "SUBSYSTEM=infiniband", "NAME=rxe0", "SEQNUM=2411"}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->action, "add");
  EXPECT_EQ(e->devpath, "/devices/virtual/net/veth0/infiniband/rxe0");
  EXPECT_EQ(e->subsystem, "infiniband");
  EXPECT_EQ(e->env.at("NAME"), "rxe0");
  EXPECT_EQ(e->env.at("SEQNUM"), "2411");
  EXPECT_TRUE(AffectsInventory(*e));
}

TEST(ParseUevent, ValueMayHoldEqualsAndNoTrailingNul) {
  static constexpr char kMsg[] = "change@/x\0SUBSYSTEM=pci\0MODALIAS=a=b";
  auto e = ParseUevent(std::string(kMsg, sizeof(kMsg) - 1));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->env.at("MODALIAS"), "a=b");
  EXPECT_FALSE(AffectsInventory(*e)) << "PCI change events are noise";
}

struct Bad {
  const char* name;
  std::string bytes;
};

TEST(ParseUevent, RejectsMalformed) {
  const Bad cases[] = {
      {"empty", ""},
      {"no at", Msg({"add/devices/x", "SUBSYSTEM=net"})},
      {"empty action", Msg({"@/devices/x"})},
      {"empty devpath", Msg({"add@"})},
      {"entry without =", Msg({"add@/d", "SUBSYSTEM"})},
      {"entry with empty key", Msg({"add@/d", "=net"})},
      {"action disagrees", Msg({"add@/d", "ACTION=remove"})},
      {"udev message", std::string("libudev\0\xfe\xed\xca\xfe", 12)},
  };
  for (const Bad& c : cases) {
    EXPECT_FALSE(ParseUevent(c.bytes).ok()) << c.name;
  }
}

TEST(AffectsInventory, BySubsystemAndAction) {
  struct Case {
    const char* action;
    const char* subsystem;
    bool want;
  };
  const Case cases[] = {
      {"add", "infiniband", true},
      {"remove", "infiniband", true},
      {"add", "infiniband_verbs", true},
      {"add", "infiniband_mad", true},
      {"remove", "net", true},
      {"bind", "pci", true},
      {"unbind", "pci", true},
      {"change", "pci", false},
      {"add", "usb", false},
      {"online", "cpu", false},
      {"add", "", false},
  };
  for (const Case& c : cases) {
    Uevent e;
    e.action = c.action;
    e.subsystem = c.subsystem;
    EXPECT_EQ(AffectsInventory(e), c.want) << c.action << " " << c.subsystem;
  }
}

TEST(AddToScope, EachSubsystemNamesWhatChanged) {
  auto scope_of = [](const std::string& datagram) {
    ChangeScope s;
    auto e = ParseUevent(datagram);
    EXPECT_TRUE(e.ok()) << e.status();
    if (e.ok()) AddToScope(*e, &s);
    return s;
  };
  ChangeScope net = scope_of(
      Msg({"add@/devices/virtual/net/veth9f", "ACTION=add", "DEVPATH=/devices/virtual/net/veth9f",
           "SUBSYSTEM=net", "INTERFACE=veth9f", "IFINDEX=41"}));
  EXPECT_EQ(net.netdevs(), std::set<std::string>{"veth9f"});
  EXPECT_FALSE(net.full());
  ChangeScope ib = scope_of(Msg({"remove@/devices/pci0000:00/0000:00:02.0/infiniband/mlx5_3",
                                 "ACTION=remove", "SUBSYSTEM=infiniband", "NAME=mlx5_3"}));
  EXPECT_EQ(ib.rdma_devices(), std::set<std::string>{"mlx5_3"});
  ChangeScope verbs = scope_of(Msg({"add@/devices/virtual/infiniband_verbs/uverbs3", "ACTION=add",
                                    "SUBSYSTEM=infiniband_verbs"}));
  EXPECT_TRUE(verbs.uverbs());
  EXPECT_TRUE(verbs.rdma_devices().empty());
  ChangeScope mad = scope_of(
      Msg({"add@/devices/virtual/infiniband_mad/umad3", "ACTION=add", "SUBSYSTEM=infiniband_mad"}));
  EXPECT_TRUE(mad.uverbs());  // the character devices are re-read together
  ChangeScope pci = scope_of(Msg({"add@/devices/pci0000:00/0000:00:02.0/0000:03:00.2", "ACTION=add",
                                  "SUBSYSTEM=pci", "PCI_SLOT_NAME=0000:03:00.2"}));
  EXPECT_TRUE(pci.full());
  EXPECT_EQ(pci.full_why(), "PCI function 0000:03:00.2 add");
}

}  // namespace
}  // namespace fabric
