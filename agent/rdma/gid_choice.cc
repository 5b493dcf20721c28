#include "agent/rdma/gid_choice.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/inventory/hostfs/host_fs.h"

namespace fabric::rdma {
namespace {

std::string Trim(std::string_view s) { return std::string(Sv(absl::StripAsciiWhitespace(Av(s)))); }

bool HoldsWantedIpv4(const GidBytes& gid, const GidWanted& wanted) {
  if (!GidIpv4(gid)) return false;
  if (wanted.ipv4.empty()) return true;
  return std::any_of(wanted.ipv4.begin(), wanted.ipv4.end(), [&](const auto& a) {
    return std::equal(a.begin(), a.end(), gid.begin() + 12);
  });
}

}  // namespace

std::optional<int> ChooseRoceV2Gid(const std::vector<GidSlot>& table, const GidWanted& wanted) {
  std::optional<int> best;
  for (const GidSlot& s : table) {
    if (s.kind != GidKind::kRoceV2 || !HoldsWantedIpv4(s.gid, wanted)) continue;
    if (!wanted.netdev.empty() && s.netdev != wanted.netdev) continue;
    if (!best || s.index < *best) best = s.index;
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
    // Unused entries read as zeros: skip their attributes (a table has up to thousands).
    if (!gid.ok() || IsZeroGid(*gid)) continue;
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
  std::optional<int> best = ChooseRoceV2Gid(table, wanted);
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
  absl::StatusOr<std::vector<GidSlot>> table = ReadGidTable(sysfs, dir);
  if (!table.ok()) return table.status();
  return ChooseGidIndex(*ll, *table);
}

}  // namespace fabric::rdma
