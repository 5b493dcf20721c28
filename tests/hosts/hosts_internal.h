// The builder helpers of the example hosts (hosts.cc), shared with the example hosts that live in
// files of their own (hosts_gid_layouts.cc, hosts_sriov.cc). Internal to tests/hosts: tests use
// hosts.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/hosts/builder.h"

namespace fabric::testing::hosts_internal {

// A PCI device's IDs, its driver and its link.
struct PciIds {
  uint16_t vendor = 0;
  uint16_t device = 0;
  uint32_t class_code = 0;
  uint16_t subsystem_vendor = 0;
  uint16_t subsystem_device = 0;
  const char* driver = "";
  const char* speed = "32.0 GT/s PCIe";
  int width = 16;
};

extern const PciIds kIntelRootPort;
extern const PciIds kIntelPchRootPort;
extern const PciIds kConnectX7;
extern const PciIds kConnectX7Vf;
extern const PciIds kH100Sxm;
extern const PciIds kIntelI210;
extern const char kProprietaryNvidiaVersion[];
extern const char kOpenNvidiaVersion[];
extern const PciIds kAmdRootPort;
extern const PciIds kMi300x;

// "0000:1b:00.0" and "pci0000:15".
std::string Bdf(int domain, int bus, int dev, int fn);
std::string RcName(int domain, int bus);
void AddRootComplex(HostSpec& s, int domain, int bus, int numa);
// Adds a function and returns its BDF.
std::string Add(HostSpec& s, std::string bdf, std::string parent, PciRole role, const PciIds& ids);
// A root complex at `rc_bus` with root port rc:01.0; its endpoint goes on bus rc+1.
std::string AddRootPort(HostSpec& s, int domain, int rc_bus, int numa, const PciIds& port);
// A root complex at `rc_bus`, root port rc:01.0, switch upstream port (rc+1):00.0 and downstream
// ports (rc+2):00.0 (endpoint on bus rc+3) and (rc+2):01.0 (endpoint on bus rc+4).
std::pair<std::string, std::string> AddSwitch(HostSpec& s, int domain, int rc_bus, int numa,
                                              const PciIds& port);
void AddGpu(HostSpec& s, std::string bdf, std::string parent, const PciIds& ids);

std::string Mac(int a, int b, int c, int d, int e, int f);
void AddLoopback(HostSpec& s);
NetdevSpec Ethernet(std::string name, std::string pci, std::string mac, int mtu,
                    std::optional<int64_t> speed);
// A connected IPv4 route for `address`/`prefix_len`, and the netdev's IPv6 link-local route.
void AddConnected(HostSpec& s, const std::string& iface, uint32_t address, int prefix_len);
// Default routes (IPv4 via `gateway`, IPv6 via fe80::1) on `iface`.
void AddDefault(HostSpec& s, const std::string& iface, const std::string& gateway);
uint32_t Ip(int a, int b, int c, int d);

RdmaDeviceSpec Mlx5(std::string name, std::string pci, std::string guid, const char* hca_type,
                    const char* fw_ver, const char* board_id, const std::string& hostname,
                    int uverbs);
std::string IpText(uint32_t ip);
// RoCE GIDs as the kernel fills them for a netdev: link-local (v1, v2), then per IPv4 address
// the mapped GID (v1, v2). Entries from `first` on, the first `limit` only.
std::vector<GidSpec> RoceGids(const std::string& mac, const std::string& ipv4,
                              const std::string& ndev, int first = 0, int limit = 4);
RdmaPortSpec RocePort(std::string rate, std::vector<GidSpec> gids, CounterList hw_counters,
                      uint64_t seed, int gid_table_size = 256);
ModuleSpec Module(std::string name, int64_t size, std::vector<std::string> used_by,
                  std::string taint = "", std::string version = "");
// Stable, distinct counter values per device name.
uint64_t Seed(std::string_view name);
std::vector<ModuleSpec> MlxNvidiaModules(bool peermem, bool open_nvidia);

// One mlx5 RoCE NIC (function, netdev, RDMA device, routes) on an existing parent. Its port has
// the kernel's GIDs for the netdev: link-local (v1, v2) at 0/1, the IPv4 address's at 2/3.
struct RoceNic {
  std::string bdf;
  std::string parent;
  PciIds ids = kConnectX7;
  std::string rdma;
  std::string netdev;
  std::string mac;
  uint32_t ipv4 = 0;  // 0: none.
  int prefix_len = 24;
  int mtu = 4200;
  int64_t speed_mbps = 400000;
  std::string rate = "400 Gb/sec (4X NDR)";
  const char* hca_type = "MT4129";
  const char* fw_ver = "28.39.1002";
  const char* board_id = "MT_0000000838";
  int uverbs = 0;
};
void AddRoceNic(HostSpec& s, const RoceNic& nic);

// The front end of the hosts in their own files: eno1 (Intel I210) at 0000:01:00.0 below the PCH
// root port 0000:00:1c.0, 192.168.100.<last_octet>/24 with the default route via .1.
void AddI210FrontEnd(HostSpec& s, int last_octet);

// The example hosts of hosts_gid_layouts.cc and hosts_sriov.cc.
HostSpec Ipv6Roce();
HostSpec IbPrefixGids();
HostSpec Sriov512Vf();
HostSpec AmdMi300xPollara();
HostSpec MixedH100Mi300x();
HostSpec CloudVmFlat();

}  // namespace fabric::testing::hosts_internal
