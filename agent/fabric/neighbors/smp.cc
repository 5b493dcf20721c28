#include "agent/fabric/neighbors/smp.h"

#include <unistd.h>

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/fabric/neighbors/text.h"

namespace fabric::neighbors {
namespace {

// Common MAD header (IBA 13.4.2) and the directed-route SMP fields (14.2.1.2).
constexpr size_t kOffBaseVersion = 0;
constexpr size_t kOffMgmtClass = 1;
constexpr size_t kOffClassVersion = 2;
constexpr size_t kOffMethod = 3;
constexpr size_t kOffStatus = 4;  // D bit (15) and 15 status bits
constexpr size_t kOffHopPointer = 6;
constexpr size_t kOffHopCount = 7;
constexpr size_t kOffTid = 8;
constexpr size_t kOffAttributeId = 16;
constexpr size_t kOffAttributeModifier = 20;
constexpr size_t kOffMKey = 24;
constexpr size_t kOffDrSlid = 32;
constexpr size_t kOffDrDlid = 34;
constexpr uint16_t kStatusDirection = 0x8000;
constexpr size_t kNodeInfoSize = 40;

uint64_t Be(std::string_view b, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = v << 8 | U8(b, at + i);
  return v;
}
void PutBe(std::string& b, size_t at, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) b[at + n - 1 - i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

std::string AttributeName(uint16_t id) {
  switch (id) {
    case kAttrNodeDescription:
      return "NodeDescription";
    case kAttrNodeInfo:
      return "NodeInfo";
    case kAttrPortInfo:
      return "PortInfo";
    default:
      return absl::StrCat("attribute 0x", absl::Hex(id, absl::kZeroPad4));
  }
}

// The MAD status bits (IBA 13.4.7), D bit excluded.
std::string StatusText(uint16_t status) {
  std::string out = absl::StrCat("status 0x", absl::Hex(status, absl::kZeroPad4));
  if (status & 0x1) absl::StrAppend(&out, " busy");
  if (status & 0x2) absl::StrAppend(&out, " redirect required");
  switch ((status >> 2) & 0x7) {
    case 0:
      break;
    case 1:
      absl::StrAppend(&out, " bad base or class version");
      break;
    case 2:
      absl::StrAppend(&out, " method not supported");
      break;
    case 3:
      absl::StrAppend(&out, " method/attribute combination not supported");
      break;
    case 7:
      absl::StrAppend(&out, " invalid attribute or modifier value");
      break;
    default:
      absl::StrAppend(&out, " reserved invalid-field code");
      break;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> BuildDrSmpGet(uint16_t attribute_id, uint32_t attribute_modifier,
                                          uint64_t tid, const std::vector<uint8_t>& path) {
  if (path.size() > kMaxHops) {
    return absl::InvalidArgumentError(
        absl::StrCat("directed route of ", path.size(), " hops (at most ", kMaxHops, ")"));
  }
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == 0 || path[i] == 255) {
      return absl::InvalidArgumentError(
          absl::StrCat("directed route hop ", i + 1, " leaves by port ", path[i]));
    }
  }
  std::string mad(kMadSize, '\0');
  PutBe(mad, kOffBaseVersion, kMadBaseVersion, 1);
  PutBe(mad, kOffMgmtClass, kMgmtClassSubnDirectedRoute, 1);
  PutBe(mad, kOffClassVersion, kSmpClassVersion, 1);
  PutBe(mad, kOffMethod, kMethodGet, 1);
  PutBe(mad, kOffStatus, 0, 2);  // D = 0: outbound
  PutBe(mad, kOffHopPointer, 0, 1);
  PutBe(mad, kOffHopCount, path.size(), 1);
  PutBe(mad, kOffTid, tid, 8);
  PutBe(mad, kOffAttributeId, attribute_id, 2);
  PutBe(mad, kOffAttributeModifier, attribute_modifier, 4);
  PutBe(mad, kOffMKey, 0, 8);
  PutBe(mad, kOffDrSlid, kPermissiveLid, 2);
  PutBe(mad, kOffDrDlid, kPermissiveLid, 2);
  for (size_t i = 0; i < path.size(); ++i) {
    mad[kInitialPathOffset + 1 + i] = static_cast<char>(path[i]);
  }
  return mad;
}

absl::StatusOr<std::string_view> SmpResponseData(std::string_view mad, uint16_t attribute_id,
                                                 uint64_t tid) {
  const std::string what = absl::StrCat("SubnGet(", AttributeName(attribute_id), ") response");
  if (mad.size() != kMadSize) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of ", mad.size(), " bytes (a MAD is ", kMadSize, ")"));
  }
  if (U8(mad, kOffBaseVersion) != kMadBaseVersion ||
      U8(mad, kOffMgmtClass) != kMgmtClassSubnDirectedRoute ||
      U8(mad, kOffClassVersion) != kSmpClassVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": base version ", U8(mad, kOffBaseVersion), " class 0x",
                     absl::Hex(U8(mad, kOffMgmtClass)), " class version ",
                     U8(mad, kOffClassVersion), " (want 1, 0x81, 1)"));
  }
  if (U8(mad, kOffMethod) != kMethodGetResp) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": method 0x", absl::Hex(U8(mad, kOffMethod)), ", not GetResp"));
  }
  if ((Be(mad, kOffTid, 8) & 0xffffffff) != (tid & 0xffffffff)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": transaction ID 0x", absl::Hex(Be(mad, kOffTid, 8)), " is not 0x", absl::Hex(tid)));
  }
  const auto got_attr = static_cast<uint16_t>(Be(mad, kOffAttributeId, 2));
  if (got_attr != attribute_id) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": carries ", AttributeName(got_attr)));
  }
  const auto status = static_cast<uint16_t>(Be(mad, kOffStatus, 2));
  if ((status & kStatusDirection) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": direction bit clear (not inbound)"));
  }
  if ((status & ~kStatusDirection) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", StatusText(status & ~kStatusDirection)));
  }
  return mad.substr(kSmpDataOffset, kSmpDataSize);
}

absl::StatusOr<NodeInfo> ParseNodeInfoResponse(std::string_view mad, uint64_t tid) {
  auto data = SmpResponseData(mad, kAttrNodeInfo, tid);
  if (!data.ok()) return data.status();
  static_assert(kNodeInfoSize <= kSmpDataSize);
  const std::string_view d = *data;
  NodeInfo n;
  n.base_version = U8(d, 0);
  n.class_version = U8(d, 1);
  n.node_type = U8(d, 2);
  n.num_ports = U8(d, 3);
  n.system_image_guid = Be(d, 4, 8);
  n.node_guid = Be(d, 12, 8);
  n.port_guid = Be(d, 20, 8);
  n.partition_cap = static_cast<uint16_t>(Be(d, 28, 2));
  n.device_id = static_cast<uint16_t>(Be(d, 30, 2));
  n.revision = static_cast<uint32_t>(Be(d, 32, 4));
  n.local_port_num = U8(d, 36);
  n.vendor_id = static_cast<uint32_t>(Be(d, 37, 3));
  return n;
}

absl::StatusOr<NodeDescription> ParseNodeDescriptionResponse(std::string_view mad, uint64_t tid) {
  auto data = SmpResponseData(mad, kAttrNodeDescription, tid);
  if (!data.ok()) return data.status();
  std::string_view d = *data;
  if (size_t nul = d.find('\0'); nul != std::string_view::npos) d = d.substr(0, nul);
  return NodeDescription{PrintableText(d, 255)};
}

std::string NodeTypeName(int node_type) {
  switch (node_type) {
    case kNodeTypeCa:
      return "ca";
    case kNodeTypeSwitch:
      return "switch";
    case kNodeTypeRouter:
      return "router";
    default:
      return absl::StrCat("type ", node_type);
  }
}

std::string GuidText(uint64_t guid) { return absl::StrFormat("0x%016x", guid); }

absl::StatusOr<IbNeighbor> QueryIbNeighbor(SmpTransport& transport, int local_port,
                                           absl::Duration timeout) {
  if (local_port < 1 || local_port > 254) {
    return absl::InvalidArgumentError(absl::StrCat("local port ", local_port, " (must be 1..254)"));
  }
  // Distinct transaction IDs across calls and processes; only the low 32 bits survive ib_umad.
  static std::atomic<uint32_t> next_tid{static_cast<uint32_t>(getpid()) << 16};
  const std::vector<uint8_t> path = {static_cast<uint8_t>(local_port)};
  auto ask = [&](uint16_t attr, uint64_t& tid) -> absl::StatusOr<std::string> {
    tid = next_tid.fetch_add(1);
    auto mad = BuildDrSmpGet(attr, 0, tid, path);
    if (!mad.ok()) return mad.status();
    auto reply = transport.Exchange(*mad, timeout);
    if (!reply.ok()) {
      return absl::Status(reply.status().code(),
                          absl::StrCat("SubnGet(", AttributeName(attr), ") through port ",
                                       local_port, ": ", reply.status().message()));
    }
    return reply;
  };
  auto annotate = [&](const absl::Status& s) {
    return absl::Status(s.code(),
                        absl::StrCat("neighbour of port ", local_port, ": ", s.message()));
  };
  uint64_t tid = 0;
  auto info_mad = ask(kAttrNodeInfo, tid);
  if (!info_mad.ok()) return info_mad.status();
  auto info = ParseNodeInfoResponse(*info_mad, tid);
  if (!info.ok()) return annotate(info.status());
  auto desc_mad = ask(kAttrNodeDescription, tid);
  if (!desc_mad.ok()) return desc_mad.status();
  auto desc = ParseNodeDescriptionResponse(*desc_mad, tid);
  if (!desc.ok()) return annotate(desc.status());
  IbNeighbor n;
  n.node_guid = info->node_guid;
  n.system_image_guid = info->system_image_guid;
  n.node_type = info->node_type;
  n.description = desc->text;
  n.remote_port = info->local_port_num;
  return n;
}

}  // namespace fabric::neighbors
