// The DRA driver's devices, pure: from the host, the selection policy and health, one device per
// port of every RDMA device the driver serves (a VF is an RDMA device of its own, so a device per
// port or VF, as the exclusive device plugin counts them), with the standard attributes, ours and
// health as device taints; then cut into ResourceSlices within the API's limits. What is written
// to the API server (slice_json.h) and when (the daemon's publisher) are above this.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric::dra {

// The driver's name, and the domain of our attributes (written unqualified, as the API reads a
// name without a domain as the driver's) and of our taints' keys.
inline constexpr char kDriver[] = "rdma.fabric.io";
// resource.k8s.io/v1's limits (k8s.io/api resource/v1 validation).
inline constexpr size_t kMaxDevicesPerSlice = 128;
inline constexpr size_t kMaxTaintedDevicesPerSlice = 64;  // When any device has taints.
inline constexpr size_t kMaxAttributes = 32;              // Attributes and capacities a device.
inline constexpr size_t kMaxTaints = 4;
inline constexpr size_t kMaxStringValue = 64;  // A string or version attribute's value.
// A slice holds this many devices, tainted or not: a taint that comes or goes rewrites one slice
// and never moves devices between slices (which would rewrite every slice after it).
inline constexpr size_t kDevicesPerSlice = kMaxTaintedDevicesPerSlice;

using AttributeValue = std::variant<int64_t, bool, std::string>;

struct Taint {
  std::string key;         // "rdma.fabric.io/<check>".
  std::string value;       // The finding's cause: "down" of "port_state.down".
  std::string effect;      // "NoSchedule" (CRITICAL) or "None" (WARNING: seen, never blocking).
  std::string time_added;  // RFC 3339: when the finding was first seen; empty when unknown.
  bool operator==(const Taint&) const = default;
};

struct Device {
  std::string name;  // A DNS label, unique in the pool: "mlx5-0", "mlx5-0-p2" for a second port.
  std::string rdma_device;
  uint32_t port = 0;
  std::map<std::string, AttributeValue> attributes;  // Qualified or ours, at most kMaxAttributes.
  std::vector<Taint> taints;                         // At most kMaxTaints, CRITICAL first.
  bool operator==(const Device&) const = default;
};

// The devices of `host` for the driver, in natural order of RDMA device and port, leaving out the
// RDMA devices named in `excluded` (those the device plugin serves: a NIC is served by one of the
// two, never both). Attributes: resource.kubernetes.io/pcieRoot and numaNode, dra.net/numaNode;
// ours: pciAddress, pfPciAddress (a VF), rdmaDevice, port, netdev, linkLayer, rateGbps, function
// ("pf", "vf", "software"), vendorId, deviceId, driver, productName, firmware, nodeGuid, rail,
// leaf, gpu and gpuUuid (the first GPU the host-wide pairing gives this port, in PCI order),
// gpuCount, gpuDirect. A string longer than the API takes is left out, never cut.
// Taints: one per finding check that names the device (NamesDevice), keyed
// "rdma.fabric.io/<check>", CRITICAL as NoSchedule before WARNING as None; dry runs and other
// severities are left out.
std::vector<Device> Devices(const v1::Host& host, const v1::SelectionPolicy& policy,
                            const v1::Health& health, const std::set<std::string>& excluded);

// The devices of `before` whose RDMA device is no longer in `now` are added to it (in order), each
// with the taint rdma.fabric.io/device_missing=vanished NoSchedule and `since` as its time: a pod
// that holds one sees it broken, not silently withdrawn. A device with that taint already keeps
// its time.
void KeepVanished(const std::vector<Device>& before, const std::string& since,
                  std::vector<Device>* now);

// Cut into slices of kDevicesPerSlice, in order. No device: no slice.
std::vector<std::vector<Device>> Split(const std::vector<Device>& devices);

// `t` as the API writes times (RFC 3339 in UTC, whole seconds: "2026-12-06T01:00:00Z"): the taints'
// timeAdded, the node condition's times.
std::string Rfc3339(absl::Time t);

// `raw` as a DNS label (RFC 1123: [a-z0-9-], at most 63, alphanumeric at both ends): lower case,
// every other character '-', cut to 63; "x" when nothing is left.
std::string DnsLabel(std::string_view raw);

}  // namespace fabric::dra
