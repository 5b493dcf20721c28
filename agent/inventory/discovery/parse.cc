#include "agent/inventory/discovery/parse.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"
#include "agent/rdma/gid.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: enum values of the model

namespace {

absl::Status Invalid(absl::string_view what, std::string_view s) {
  return absl::InvalidArgumentError(absl::StrCat("not ", what, ": ", Excerpt(s)));
}

bool IsHexDigit(char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); }

// Parses exactly `digits` hex digits.
bool HexField(absl::string_view s, size_t digits, uint32_t* out) {
  if (s.size() != digits) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (!IsHexDigit(c)) return false;
    v = v * 16 +
        static_cast<uint32_t>(absl::ascii_isdigit(static_cast<unsigned char>(c))
                                  ? c - '0'
                                  : absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 10);
  }
  *out = v;
  return true;
}

// "N: WORD" as the kernel prints enum attributes; returns N and WORD.
absl::StatusOr<std::pair<int64_t, absl::string_view>> NumberedWord(std::string_view s,
                                                                   absl::string_view what) {
  absl::string_view t = Av(Trim(s));
  size_t colon = t.find(':');
  if (colon == absl::string_view::npos) return Invalid(what, s);
  int64_t n;
  if (!absl::SimpleAtoi(t.substr(0, colon), &n)) return Invalid(what, s);
  absl::string_view word = absl::StripLeadingAsciiWhitespace(t.substr(colon + 1));
  return std::make_pair(n, word);
}

// The blank-separated fields of `line`, up to N + 1 (one more tells that there are too many),
// without allocating: route tables have a line per route, hundreds on a big host.
template <size_t N>
size_t Fields(absl::string_view line, std::array<absl::string_view, N + 1>* out) {
  size_t n = 0;
  size_t i = 0;
  while (n < out->size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) break;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    (*out)[n++] = line.substr(start, i - start);
  }
  return n;
}

}  // namespace

std::string_view Trim(std::string_view s) {
  // Some drivers' attributes end "\n\0": the NULs go first, then the white space.
  while (!s.empty() && s.back() == '\0') s.remove_suffix(1);
  return Sv(absl::StripAsciiWhitespace(Av(s)));
}

absl::StatusOr<int64_t> ParseInt(std::string_view s) {
  absl::string_view t = Av(Trim(s));
  int64_t v;
  if (t.empty() || !absl::SimpleAtoi(t, &v)) return Invalid("an integer", s);
  return v;
}

absl::StatusOr<uint64_t> ParseHex(std::string_view s) {
  absl::string_view t = Av(Trim(s));
  if (absl::StartsWithIgnoreCase(t, "0x")) t.remove_prefix(2);
  if (t.empty() || t.size() > 16) return Invalid("a hex number", s);
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v, 16);
  if (ec != std::errc() || ptr != t.data() + t.size()) return Invalid("a hex number", s);
  return v;
}

absl::StatusOr<std::string> ParsePciAddress(std::string_view s) {
  absl::string_view t = Av(Trim(s));
  // [domain:]bus:device.function with domain of 4 (sysfs) or 8 (nvidia-smi) hex digits.
  std::vector<absl::string_view> parts = absl::StrSplit(t, ':');
  uint32_t domain = 0, bus, dev, fn;
  absl::string_view devfn;
  if (parts.size() == 3) {
    if (!(HexField(parts[0], 4, &domain) || HexField(parts[0], 8, &domain)) || domain > 0xffff) {
      return Invalid("a PCI address", s);
    }
    parts.erase(parts.begin());
  } else if (parts.size() != 2) {
    return Invalid("a PCI address", s);
  }
  devfn = parts[1];
  size_t dot = devfn.find('.');
  if (dot == absl::string_view::npos || !HexField(parts[0], 2, &bus) ||
      !HexField(devfn.substr(0, dot), 2, &dev) || !HexField(devfn.substr(dot + 1), 1, &fn) ||
      dev > 0x1f || fn > 7) {
    return Invalid("a PCI address", s);
  }
  return absl::StrFormat("%04x:%02x:%02x.%x", domain, bus, dev, fn);
}

absl::StatusOr<double> ParseRateGbps(std::string_view s) {
  // "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)", "100 Gb/sec".
  absl::string_view t = Av(Trim(s));
  size_t sp = t.find(' ');
  if (sp == absl::string_view::npos) return Invalid("a port rate", s);
  absl::string_view unit = t.substr(sp + 1);
  if (!absl::StartsWith(unit, "Gb/sec")) return Invalid("a port rate", s);
  double v;
  if (!absl::SimpleAtod(t.substr(0, sp), &v) || !(v >= 0) || v > 1e6) {
    return Invalid("a port rate", s);
  }
  return v;
}

std::string RateLanes(std::string_view s) {
  absl::string_view t = Av(Trim(s));
  const size_t open = t.find('(');
  if (open == absl::string_view::npos || t.back() != ')' || !absl::StrContains(t, "Gb/sec")) {
    return "";
  }
  absl::string_view in = t.substr(open + 1, t.size() - open - 2);
  // "4X NDR": a lane count, an X, a space, letters.
  const size_t x = in.find("X ");
  uint32_t lanes;
  if (x == absl::string_view::npos || !absl::SimpleAtoi(in.substr(0, x), &lanes) ||
      in.size() == x + 2 || in.size() > 16) {
    return "";
  }
  for (char c : in.substr(x + 2)) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) return "";
  }
  return std::string(in);
}

// Indexed by the kernel's numbers, which the enums share.
constexpr absl::string_view kPortStateWords[] = {"NOP",   "DOWN",   "INIT",
                                                 "ARMED", "ACTIVE", "ACTIVE_DEFER"};
constexpr absl::string_view kPhysStateWords[] = {
    "<unknown>",         "Sleep",   "Polling", "Disabled", "PortConfigurationTraining", "LinkUp",
    "LinkErrorRecovery", "Phy Test"};

absl::StatusOr<PortState> ParsePortState(std::string_view s) {
  auto nw = NumberedWord(s, "a port state");
  if (!nw.ok()) return nw.status();
  auto [n, word] = *nw;
  if (n < 0 || n > 5 || word != kPortStateWords[n]) return Invalid("a port state", s);
  return static_cast<PortState>(n);
}

absl::StatusOr<PhysState> ParsePhysState(std::string_view s) {
  auto nw = NumberedWord(s, "a physical port state");
  if (!nw.ok()) return nw.status();
  auto [n, word] = *nw;
  if (n < 1 || n > 7 || word != kPhysStateWords[n]) return Invalid("a physical port state", s);
  return static_cast<PhysState>(n);
}

std::string_view PortStateWord(PortState state) {
  const int n = static_cast<int>(state);
  if (n < 1 || n > 5) return "UNKNOWN";
  return Sv(kPortStateWords[n]);
}

std::string_view PhysStateWord(PhysState state) {
  const int n = static_cast<int>(state);
  if (n < 1 || n > 7) return Sv(kPhysStateWords[0]);
  return Sv(kPhysStateWords[n]);
}

std::string_view LinkLayerWord(LinkLayer layer) {
  switch (layer) {
    case LINK_LAYER_INFINIBAND:
      return "InfiniBand";
    case LINK_LAYER_ETHERNET:
      return "Ethernet";
    default:
      return "";
  }
}

absl::StatusOr<LinkLayer> ParseLinkLayer(std::string_view s) {
  absl::string_view t = Av(Trim(s));
  if (t == Av(LinkLayerWord(LINK_LAYER_INFINIBAND))) return LINK_LAYER_INFINIBAND;
  if (t == Av(LinkLayerWord(LINK_LAYER_ETHERNET))) return LINK_LAYER_ETHERNET;
  return Invalid("a link layer", s);
}

absl::StatusOr<NodeType> ParseNodeType(std::string_view s) {
  auto nw = NumberedWord(s, "a node type");
  if (!nw.ok()) return nw.status();
  auto [n, word] = *nw;
  if (n < 1 || n > 7 || word.empty()) return Invalid("a node type", s);
  return static_cast<NodeType>(n);
}

absl::StatusOr<GidType> ParseGidType(std::string_view s, LinkLayer link_layer) {
  absl::StatusOr<rdma::GidKind> kind = rdma::ParseGidKind(s);
  if (!kind.ok()) return Invalid("a GID type", s);
  switch (*kind) {
    case rdma::GidKind::kIbOrRoceV1:
      return link_layer == LINK_LAYER_INFINIBAND ? GID_TYPE_IB : GID_TYPE_ROCE_V1;
    case rdma::GidKind::kIb:
      return GID_TYPE_IB;
    case rdma::GidKind::kRoceV1:
      return GID_TYPE_ROCE_V1;
    case rdma::GidKind::kRoceV2:
      return GID_TYPE_ROCE_V2;
  }
  return Invalid("a GID type", s);
}

absl::StatusOr<double> ParsePciLinkSpeed(std::string_view s) {
  // "32.0 GT/s PCIe" (5.x+ kernels), "8.0 GT/s" or "8 GT/s" (older); "Unknown" when the link is
  // down or the device is not PCIe.
  absl::string_view t = Av(Trim(s));
  size_t sp = t.find(' ');
  if (sp == absl::string_view::npos || !absl::StartsWith(t.substr(sp + 1), "GT/s")) {
    return Invalid("a PCIe link speed", s);
  }
  double v;
  if (!absl::SimpleAtod(t.substr(0, sp), &v) || !(v > 0) || v > 1000) {
    return Invalid("a PCIe link speed", s);
  }
  return v;
}

absl::StatusOr<std::string> ParseMac(std::string_view s) {
  absl::string_view t = Av(Trim(s));
  // Ethernet (6 bytes) or IPoIB (20 bytes) hardware addresses.
  std::vector<absl::string_view> bytes = absl::StrSplit(t, ':');
  if (bytes.size() != 6 && bytes.size() != 20) return Invalid("a hardware address", s);
  for (absl::string_view b : bytes) {
    uint32_t v;
    if (!HexField(b, 2, &v)) return Invalid("a hardware address", s);
  }
  return absl::AsciiStrToLower(t);
}

absl::StatusOr<std::string> ParseGuid(std::string_view s) {
  absl::string_view t = Av(Trim(s));
  std::vector<absl::string_view> groups = absl::StrSplit(t, ':');
  if (groups.size() != 4) return Invalid("a GUID", s);
  for (absl::string_view g : groups) {
    uint32_t v;
    if (!HexField(g, 4, &v)) return Invalid("a GUID", s);
  }
  return absl::AsciiStrToLower(t);
}

absl::StatusOr<std::vector<int32_t>> ParseIdList(std::string_view s) {
  absl::string_view t = Av(Trim(s));
  std::vector<int32_t> ids;
  if (t.empty()) return ids;
  constexpr int32_t kMaxId = 1 << 16;
  for (absl::string_view part : absl::StrSplit(t, ',')) {
    size_t dash = part.find('-');
    int32_t lo, hi;
    if (dash == absl::string_view::npos) {
      if (!absl::SimpleAtoi(part, &lo)) return Invalid("an id list", s);
      hi = lo;
    } else if (!absl::SimpleAtoi(part.substr(0, dash), &lo) ||
               !absl::SimpleAtoi(part.substr(dash + 1), &hi)) {
      return Invalid("an id list", s);
    }
    if (lo < 0 || hi < lo || hi > kMaxId) return Invalid("an id list", s);
    for (int32_t i = lo; i <= hi; ++i) ids.push_back(i);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

absl::StatusOr<std::vector<Ipv4Route>> ParseProcNetRoute(std::string_view s,
                                                         std::vector<std::string>* bad_lines) {
  std::vector<Ipv4Route> routes;
  bool header = true;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(Av(s), '\n', absl::SkipWhitespace())) {
    ++line_no;
    if (header) {
      header = false;
      if (!absl::StartsWith(line, "Iface")) {
        return absl::InvalidArgumentError(
            absl::StrCat("not /proc/net/route: header is ", Excerpt(Sv(line))));
      }
      continue;
    }
    std::array<absl::string_view, 12> f;
    const size_t fields = Fields<11>(line, &f);
    Ipv4Route r;
    auto hex32 = [](absl::string_view v, uint32_t* out) {
      if (!HexField(v, 8, out)) return false;
      // The kernel prints the network-order value as a native (little-endian) integer.
      *out = __builtin_bswap32(*out);
      return true;
    };
    uint32_t flags;
    if (fields < 11 || !hex32(f[1], &r.destination) || !hex32(f[2], &r.gateway) ||
        !HexField(f[3], 4, &flags) || !absl::SimpleAtoi(f[6], &r.metric) || !hex32(f[7], &r.mask)) {
      std::string msg =
          absl::StrCat("/proc/net/route line ", line_no, " malformed: ", Excerpt(Sv(line)));
      if (bad_lines == nullptr) return absl::InvalidArgumentError(msg);
      bad_lines->push_back(std::move(msg));
      continue;
    }
    r.iface = std::string(f[0]);
    r.flags = flags;
    routes.push_back(std::move(r));
  }
  if (header) return absl::InvalidArgumentError("not /proc/net/route: empty");
  return routes;
}

absl::StatusOr<std::vector<std::string>> ParseIpv6DefaultRouteIfaces(
    std::string_view s, std::vector<std::string>* bad_lines) {
  // Columns: dest, dest_len, src, src_len, next_hop, metric, refcnt, use, flags, iface.
  std::vector<std::string> ifaces;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(Av(s), '\n', absl::SkipWhitespace())) {
    ++line_no;
    std::array<absl::string_view, 11> f;
    const size_t fields = Fields<10>(line, &f);
    uint32_t len;
    if (fields != 10 || f[0].size() != 32 || !HexField(f[1], 2, &len)) {
      std::string msg =
          absl::StrCat("/proc/net/ipv6_route line ", line_no, " malformed: ", Excerpt(Sv(line)));
      if (bad_lines == nullptr) return absl::InvalidArgumentError(msg);
      bad_lines->push_back(std::move(msg));
      continue;
    }
    if (len == 0 && f[0] == "00000000000000000000000000000000" && f[9] != "lo") {
      ifaces.emplace_back(f[9]);
    }
  }
  std::sort(ifaces.begin(), ifaces.end());
  ifaces.erase(std::unique(ifaces.begin(), ifaces.end()), ifaces.end());
  return ifaces;
}

absl::StatusOr<std::vector<std::string>> ParseProcModules(std::string_view s) {
  std::vector<std::string> names;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(Av(s), '\n', absl::SkipWhitespace())) {
    ++line_no;
    absl::string_view name = line.substr(0, line.find(' '));
    if (name.empty() || name.size() == line.size() ||
        !std::all_of(name.begin(), name.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
        })) {
      return absl::InvalidArgumentError(
          absl::StrCat("/proc/modules line ", line_no, " malformed: ", Excerpt(Sv(line))));
    }
    names.emplace_back(name);
  }
  return names;
}

absl::StatusOr<int> MaskToPrefixLen(uint32_t mask) {
  int len = __builtin_popcount(mask);
  uint32_t expect = len == 0 ? 0 : ~uint32_t{0} << (32 - len);
  if (mask != expect) {
    return absl::InvalidArgumentError(absl::StrCat("not a contiguous netmask: ", FormatIpv4(mask)));
  }
  return len;
}

}  // namespace fabric
