#include "agent/rdma/gid_choice.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/hostfs/host_fs.h"

namespace fabric::rdma {
namespace {

// Surrounding white space and trailing NULs ("eth2\n\0").
std::string Trim(std::string_view s) {
  while (!s.empty() && s.back() == '\0') s.remove_suffix(1);
  return std::string(Sv(absl::StripAsciiWhitespace(Av(s))));
}

// The family of the routable address `gid` holds when it is one `wanted` accepts.
std::optional<GidFamily> WantedFamily(const GidBytes& gid, const GidWanted& wanted) {
  const bool any = wanted.ipv4.empty() && wanted.ipv6.empty();
  if (GidIpv4(gid)) {
    if (any || std::any_of(wanted.ipv4.begin(), wanted.ipv4.end(), [&](const auto& a) {
          return std::equal(a.begin(), a.end(), gid.begin() + 12);
        })) {
      return GidFamily::kIpv4;
    }
    return std::nullopt;
  }
  if (IsGlobalIpv6Gid(gid) &&
      (any || std::find(wanted.ipv6.begin(), wanted.ipv6.end(), gid) != wanted.ipv6.end())) {
    return GidFamily::kIpv6;
  }
  return std::nullopt;
}

}  // namespace

std::optional<GidChoice> ChooseRoceV2Gid(const std::vector<GidSlot>& table,
                                         const GidWanted& wanted) {
  std::optional<GidChoice> best;
  for (const GidSlot& s : table) {
    if (s.kind != GidKind::kRoceV2) continue;
    if (!wanted.netdev.empty() && s.netdev != wanted.netdev) continue;
    const std::optional<GidFamily> family = WantedFamily(s.gid, wanted);
    if (!family) continue;
    // IPv4 first, then the lowest index within the family.
    if (!best || (*family == GidFamily::kIpv4 && best->family == GidFamily::kIpv6) ||
        (*family == best->family && s.index < best->index)) {
      best = GidChoice{s.index, *family};
    }
  }
  return best;
}

absl::StatusOr<std::vector<GidSlot>> ReadGidTable(const HostFs& sysfs, std::string_view port_dir) {
  const std::string dir(port_dir);
  absl::StatusOr<std::vector<std::string>> names = sysfs.ListDir(absl::StrCat(dir, "/gids"));
  if (!names.ok()) return names.status();
  std::sort(names->begin(), names->end(), NaturalLess);
  std::vector<GidSlot> table;
  for (const std::string& name : *names) {
    GidSlot s;
    if (!absl::SimpleAtoi(name, &s.index)) continue;
    absl::StatusOr<std::string> text = sysfs.ReadFile(absl::StrCat(dir, "/gids/", name));
    if (!text.ok()) continue;
    absl::StatusOr<GidBytes> gid = ParseGid(*text);
    // Empty slots (zeros, or an InfiniBand subnet prefix alone): skip their attributes (a table
    // has up to thousands).
    if (!gid.ok() || IsEmptyGidSlot(*gid)) continue;
    s.gid = *gid;
    if (absl::StatusOr<std::string> t =
            sysfs.ReadFile(absl::StrCat(dir, "/gid_attrs/types/", name));
        t.ok()) {
      if (absl::StatusOr<GidKind> k = ParseGidKind(*t); k.ok()) s.kind = *k;
    }
    if (absl::StatusOr<std::string> n =
            sysfs.ReadFile(absl::StrCat(dir, "/gid_attrs/ndevs/", name));
        n.ok()) {
      s.netdev = Trim(*n);
    }
    table.push_back(std::move(s));
  }
  return table;
}

absl::StatusOr<int> ChooseGidIndex(std::string_view link_layer, const std::vector<GidSlot>& table) {
  const std::string ll = Trim(link_layer);
  if (ll == "InfiniBand") return 0;
  if (ll != "Ethernet") {
    return absl::FailedPreconditionError(
        absl::StrCat("unknown link layer '", ll, "': give the GID index (-x)"));
  }
  GidWanted wanted;
  for (const GidSlot& s : table) {
    if (s.index == 0) wanted.netdev = s.netdev;
  }
  std::optional<GidChoice> best = ChooseRoceV2Gid(table, wanted);
  if (!best) {
    return absl::NotFoundError(
        "no routable RoCE v2 GID (IPv4-mapped or global IPv6) on this port (is an address "
        "configured on its netdev?); give the GID index (-x)");
  }
  return best->index;
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
  absl::StatusOr<std::vector<GidSlot>> table = ReadGidTable(sysfs, dir);
  if (!table.ok()) return table.status();
  return ChooseGidIndex(*ll, *table);
}

}  // namespace fabric::rdma
