// InfiniBand directed-route SMPs (IBA vol 1 ch. 13.4 MAD format, 14.2 SMP format and
// attributes): what the node at the far end of a local port is, asked without a subnet manager
// or LIDs. Encoding and decoding are pure and tested against the spec's byte layouts; the
// transport is a seam (SmpTransport) so the query logic is tested with a fake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fabric::neighbors {

inline constexpr size_t kMadSize = 256;
inline constexpr size_t kSmpDataOffset = 64;
inline constexpr size_t kSmpDataSize = 64;
inline constexpr size_t kInitialPathOffset = 128;
inline constexpr size_t kReturnPathOffset = 192;
inline constexpr size_t kMaxHops = 63;  // the 64-byte path, entry 0 unused

inline constexpr uint8_t kMadBaseVersion = 1;
inline constexpr uint8_t kMgmtClassSubnDirectedRoute = 0x81;
inline constexpr uint8_t kSmpClassVersion = 1;
inline constexpr uint8_t kMethodGet = 0x01;
inline constexpr uint8_t kMethodGetResp = 0x81;
inline constexpr uint16_t kPermissiveLid = 0xffff;

inline constexpr uint16_t kAttrNodeDescription = 0x0010;
inline constexpr uint16_t kAttrNodeInfo = 0x0011;
inline constexpr uint16_t kAttrPortInfo = 0x0015;

inline constexpr int kNodeTypeCa = 1;
inline constexpr int kNodeTypeSwitch = 2;
inline constexpr int kNodeTypeRouter = 3;

// A SubnGet(attribute) directed-route SMP, 256 bytes: base version 1, class 0x81, class version
// 1, method Get, the transaction ID, hop pointer 0, hop count = path size, DrSLID = DrDLID =
// 0xffff (the whole route is directed), M_Key 0, InitialPath[1..] = `path` (the port to leave by
// at each hop; {p} reaches the node behind local port p). InvalidArgument for more than 63 hops
// or a hop through port 0 or 255.
absl::StatusOr<std::string> BuildDrSmpGet(uint16_t attribute_id, uint32_t attribute_modifier,
                                          uint64_t tid, const std::vector<uint8_t>& path);

// The 64-byte SMP data of a GetResp to the SubnGet(attribute_id) with transaction ID `tid`.
// Checks: exactly 256 bytes, base version 1, class 0x81, class version 1, method GetResp, the D
// (direction) bit set, status 0 (else the status decoded), the attribute, and the low 32 bits of
// the TID (the kernel's ib_umad puts its agent's number in the high 32 bits of a request's TID).
absl::StatusOr<std::string_view> SmpResponseData(std::string_view mad, uint16_t attribute_id,
                                                 uint64_t tid);

// NodeInfo (IBA 14.2.5.3, 40 bytes at the start of the SMP data).
struct NodeInfo {
  uint8_t base_version = 0;
  uint8_t class_version = 0;
  uint8_t node_type = 0;  // kNodeType*
  uint8_t num_ports = 0;
  uint64_t system_image_guid = 0;
  uint64_t node_guid = 0;
  uint64_t port_guid = 0;
  uint16_t partition_cap = 0;
  uint16_t device_id = 0;
  uint32_t revision = 0;
  uint8_t local_port_num = 0;  // the port of that node the SMP came in by
  uint32_t vendor_id = 0;      // 24 bits
};

// NodeDescription (IBA 14.2.5.2): 64 bytes, cut at the first NUL, made printable.
struct NodeDescription {
  std::string text;
};

absl::StatusOr<NodeInfo> ParseNodeInfoResponse(std::string_view mad, uint64_t tid);
absl::StatusOr<NodeDescription> ParseNodeDescriptionResponse(std::string_view mad, uint64_t tid);

// "ca", "switch", "router" or "type N".
std::string NodeTypeName(int node_type);
// A GUID as ibstat and ibnetdiscover print it: 0x and 16 lowercase hex digits.
std::string GuidText(uint64_t guid);

// Sends one MAD and returns the response (the 256-byte MAD), or DeadlineExceeded.
class SmpTransport {
 public:
  virtual ~SmpTransport() = default;
  virtual absl::StatusOr<std::string> Exchange(const std::string& mad, absl::Duration timeout) = 0;
};

// The node at the far end of the cable of one local port.
struct IbNeighbor {
  uint64_t node_guid = 0;
  uint64_t system_image_guid = 0;
  int node_type = 0;
  std::string description;
  int remote_port = 0;  // NodeInfo.LocalPortNum there
};

// NodeInfo, then NodeDescription, of the node behind `local_port` (1..254), by directed route
// over `transport`; each exchange bounded by `timeout`. Errors name the port and the attribute.
absl::StatusOr<IbNeighbor> QueryIbNeighbor(SmpTransport& transport, int local_port,
                                           absl::Duration timeout);

}  // namespace fabric::neighbors
