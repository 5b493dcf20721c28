#include "agent/fabric/probes/gid.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/common/strings.h"
#include "agent/inventory/hostfs/host_fs.h"

namespace fabric::probes {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Trim(std::string_view s) { return std::string(Sv(absl::StripAsciiWhitespace(Av(s)))); }

}  // namespace

std::optional<std::array<uint8_t, 16>> ParseGid(std::string_view text) {
  text = Sv(absl::StripAsciiWhitespace(Av(text)));
  // 8 groups of 4 hex digits separated by ':'.
  if (text.size() != 39) return std::nullopt;
  std::array<uint8_t, 16> out{};
  size_t b = 0;
  for (size_t i = 0; i < text.size();) {
    if (i > 0) {
      if (text[i] != ':') return std::nullopt;
      ++i;
    }
    int v = 0;
    for (int k = 0; k < 4; ++k, ++i) {
      const int d = HexDigit(text[i]);
      if (d < 0) return std::nullopt;
      v = v * 16 + d;
    }
    out[b++] = static_cast<uint8_t>(v >> 8);
    out[b++] = static_cast<uint8_t>(v & 0xff);
  }
  return out;
}

std::optional<std::string> Ipv4OfGid(std::string_view text) {
  std::optional<std::array<uint8_t, 16>> g = ParseGid(text);
  if (!g) return std::nullopt;
  for (int i = 0; i < 10; ++i) {
    if ((*g)[i] != 0) return std::nullopt;
  }
  if ((*g)[10] != 0xff || (*g)[11] != 0xff) return std::nullopt;
  return absl::StrCat((*g)[12], ".", (*g)[13], ".", (*g)[14], ".", (*g)[15]);
}

absl::StatusOr<int> ChooseGidIndex(std::string_view link_layer,
                                   const std::vector<GidEntry>& table) {
  const std::string ll = Trim(link_layer);
  if (ll == "InfiniBand") return 0;
  if (ll != "Ethernet") {
    return absl::FailedPreconditionError(
        absl::StrCat("unknown link layer '", ll, "': give the GID index (-x)"));
  }
  std::string port_ndev;
  for (const GidEntry& e : table) {
    if (e.index == 0) port_ndev = Trim(e.ndev);
  }
  std::optional<int> best;
  for (const GidEntry& e : table) {
    if (Trim(e.type) != "RoCE v2" || !Ipv4OfGid(e.gid)) continue;
    if (!port_ndev.empty() && Trim(e.ndev) != port_ndev) continue;
    if (!best || e.index < *best) best = e.index;
  }
  if (!best) {
    return absl::NotFoundError(
        "no RoCE v2 GID with an IPv4 address on this port (is an address configured on its "
        "netdev?); give the GID index (-x)");
  }
  return *best;
}

absl::StatusOr<int> ChooseGidIndexFromSysfs(const HostFs& sysfs, std::string_view device,
                                            int port) {
  const std::string dir = absl::StrCat("class/infiniband/", Av(device), "/ports/", port);
  absl::StatusOr<std::string> ll = sysfs.ReadFile(absl::StrCat(dir, "/link_layer"));
  if (!ll.ok()) {
    return absl::NotFoundError(absl::StrCat("cannot read the link layer of ", Av(device), " port ",
                                            port, ": ", ll.status().message()));
  }
  if (Trim(*ll) == "InfiniBand") return 0;
  absl::StatusOr<std::vector<std::string>> names = sysfs.ListDir(absl::StrCat(dir, "/gids"));
  if (!names.ok()) return names.status();
  std::vector<GidEntry> table;
  for (const std::string& name : *names) {
    int index = 0;
    if (!absl::SimpleAtoi(name, &index)) continue;
    GidEntry e;
    e.index = index;
    absl::StatusOr<std::string> g = sysfs.ReadFile(absl::StrCat(dir, "/gids/", name));
    if (!g.ok()) continue;
    e.gid = Trim(*g);
    // Unused entries read as zeros: skip their attributes (a table has up to thousands).
    if (e.gid == "0000:0000:0000:0000:0000:0000:0000:0000") continue;
    if (absl::StatusOr<std::string> t =
            sysfs.ReadFile(absl::StrCat(dir, "/gid_attrs/types/", name));
        t.ok()) {
      e.type = Trim(*t);
    }
    if (absl::StatusOr<std::string> n =
            sysfs.ReadFile(absl::StrCat(dir, "/gid_attrs/ndevs/", name));
        n.ok()) {
      e.ndev = Trim(*n);
    }
    table.push_back(std::move(e));
  }
  return ChooseGidIndex(*ll, table);
}

}  // namespace fabric::probes
