#include "tests/hosts/builder.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <map>
#include <set>
#include <span>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"

namespace fabric::testing {
namespace {

namespace fs = std::filesystem;

absl::Status Invalid(std::string_view what) { return absl::InvalidArgumentError(Av(what)); }

// ---------------------------------------------------------------------------------------------
// Parsing of the spec's text fields.

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `len` hex digits of `s` at `pos`; lower case only when `lower_only`.
std::optional<int> HexAt(std::string_view s, size_t pos, size_t len, bool lower_only) {
  if (pos + len > s.size()) return std::nullopt;
  int v = 0;
  for (size_t i = 0; i < len; ++i) {
    const char c = s[pos + i];
    if (lower_only && c >= 'A' && c <= 'F') return std::nullopt;
    const int d = HexDigit(c);
    if (d < 0) return std::nullopt;
    v = v * 16 + d;
  }
  return v;
}

struct BdfParts {
  int domain = 0;
  int bus = 0;
  int dev = 0;
  int fn = 0;
};

// "0000:1b:00.0", lower case, as sysfs names functions.
std::optional<BdfParts> ParseBdf(std::string_view s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return std::nullopt;
  auto domain = HexAt(s, 0, 4, true);
  auto bus = HexAt(s, 5, 2, true);
  auto dev = HexAt(s, 8, 2, true);
  auto fn = HexAt(s, 11, 1, true);
  if (!domain || !bus || !dev || !fn || *dev > 0x1f || *fn > 7) return std::nullopt;
  return BdfParts{*domain, *bus, *dev, *fn};
}

// "pci0000:15" -> {domain, bus}.
std::optional<std::pair<int, int>> ParseRootComplexName(std::string_view s) {
  if (s.size() != 10 || s.substr(0, 3) != "pci" || s[7] != ':') return std::nullopt;
  auto domain = HexAt(s, 3, 4, true);
  auto bus = HexAt(s, 8, 2, true);
  if (!domain || !bus) return std::nullopt;
  return std::make_pair(*domain, *bus);
}

// Bytes separated by ':' in groups of `group_len` hex digits ("0c:42:..." or "0c42:a103:...").
std::optional<std::vector<uint8_t>> ParseHexGroups(std::string_view s, size_t group_len,
                                                   size_t groups) {
  if (s.size() != groups * group_len + (groups - 1)) return std::nullopt;
  std::vector<uint8_t> out;
  for (size_t g = 0; g < groups; ++g) {
    const size_t pos = g * (group_len + 1);
    if (g + 1 < groups && s[pos + group_len] != ':') return std::nullopt;
    for (size_t b = 0; b < group_len; b += 2) {
      auto v = HexAt(s, pos + b, 2, false);
      if (!v) return std::nullopt;
      out.push_back(static_cast<uint8_t>(*v));
    }
  }
  return out;
}

std::optional<std::array<uint8_t, 4>> ParseIpv4(std::string_view s) {
  std::array<uint8_t, 4> a{};
  if (inet_pton(AF_INET, std::string(s).c_str(), a.data()) != 1) return std::nullopt;
  return a;
}

std::optional<std::array<uint8_t, 16>> ParseIpv6(std::string_view s) {
  std::array<uint8_t, 16> a{};
  if (inet_pton(AF_INET6, std::string(s).c_str(), a.data()) != 1) return std::nullopt;
  return a;
}

std::string FormatGid(const std::array<uint8_t, 16>& g) {
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    absl::StrAppendFormat(&out, "%s%02x%02x", i == 0 ? "" : ":", g[i], g[i + 1]);
  }
  return out;
}

std::string FormatGuid(const std::array<uint8_t, 8>& g) {
  return absl::StrFormat("%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0], g[1], g[2], g[3], g[4], g[5],
                         g[6], g[7]);
}

// "0-31,64-95" from a set of ids, as the kernel prints cpu and node lists.
std::string FormatIdList(std::vector<int> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", ids[i]);
    if (j > i) absl::StrAppend(&out, "-", ids[j]);
    i = j + 1;
  }
  return out;
}

// PCIe link speed text -> the Link Status/Capabilities speed code (0 when unknown).
int LinkSpeedCode(std::string_view speed) {
  static constexpr std::pair<std::string_view, int> kCodes[] = {
      {"2.5 ", 1}, {"5.0 ", 2}, {"8.0 ", 3}, {"16.0 ", 4}, {"32.0 ", 5}, {"64.0 ", 6}};
  for (const auto& [prefix, code] : kCodes) {
    if (speed.substr(0, prefix.size()) == prefix) return code;
  }
  return 0;
}

bool IsBridge(PciRole role) { return role != PciRole::kEndpoint; }

// An aer_dev_* attribute with every count zero, as drivers/pci/pcie/aer.c prints it: a line per
// named error bit, then the TOTAL_ line.
std::string ZeroAerCounts(std::span<const std::string_view> bits, std::string_view total) {
  std::string out;
  for (std::string_view b : bits) absl::StrAppend(&out, Av(b), " 0\n");
  absl::StrAppend(&out, "TOTAL_", Av(total), " 0\n");
  return out;
}

constexpr std::string_view kAerCorrectableBits[] = {
    "RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF"};
constexpr std::string_view kAerUncorrectableBits[] = {"Undefined",     "DLP",
                                                      "SDES",          "TLP",
                                                      "FCP",           "CmpltTO",
                                                      "CmpltAbrt",     "UnxCmplt",
                                                      "RxOF",          "MalfTLP",
                                                      "ECRC",          "UnsupReq",
                                                      "ACSViol",       "UncorrIntErr",
                                                      "BlockedTLP",    "AtomicOpBlocked",
                                                      "TLPBlockedErr", "PoisonTLPBlocked"};

// ---------------------------------------------------------------------------------------------
// Symbolic links the way kernfs writes them (kernfs_get_target_path): climb from the link's
// directory to the first ancestor of the target's parent, then descend to the target. Hence
// "../../../0000:1b:00.0" for a `device` link rather than the shorter "../..".

std::vector<std::string_view> SplitPath(std::string_view p) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    if (end > start) out.push_back(p.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string KernfsTarget(std::string_view link, std::string_view target) {
  std::vector<std::string_view> d = SplitPath(link);
  if (!d.empty()) d.pop_back();
  const std::vector<std::string_view> t = SplitPath(target);
  const size_t target_parent_len = t.empty() ? 0 : t.size() - 1;
  auto is_ancestor = [&](size_t len) {
    if (len > target_parent_len) return false;
    return std::equal(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(len), t.begin());
  };
  size_t k = d.size();
  while (k > 0 && !is_ancestor(k)) --k;
  std::string out;
  for (size_t i = k; i < d.size(); ++i) out += "../";
  for (size_t i = k; i < t.size(); ++i) absl::StrAppend(&out, i == k ? "" : "/", Av(t[i]));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writes below one root with plain syscalls: the large host has ~10^5 files, so no streams and no
// fsync.

class TreeWriter {
 public:
  explicit TreeWriter(std::string root) : root_(std::move(root)) {}

  absl::Status Dir(std::string_view rel) {
    const std::string full = Full(rel);
    if (::mkdir(full.c_str(), 0755) == 0) return absl::OkStatus();
    if (errno == EEXIST) return absl::OkStatus();
    if (errno != ENOENT) return absl::ErrnoToStatus(errno, Av(absl::StrCat("mkdir ", full)));
    std::error_code ec;
    fs::create_directories(full, ec);
    if (ec) return absl::InternalError(absl::StrCat("mkdir ", full, ": ", ec.message()));
    return absl::OkStatus();
  }

  absl::Status File(std::string_view rel, std::string_view content) {
    const std::string full = Full(rel);
    int fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT) {
      FABRIC_RETURN_IF_ERROR(Dir(Parent(rel)));
      fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (fd < 0) return absl::ErrnoToStatus(errno, Av(absl::StrCat("open ", full)));
    size_t done = 0;
    while (done < content.size()) {
      const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::close(fd);
        return absl::ErrnoToStatus(err, Av(absl::StrCat("write ", full)));
      }
      done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) return absl::ErrnoToStatus(errno, Av(absl::StrCat("close ", full)));
    return absl::OkStatus();
  }

  // A sysfs attribute: the value and the newline the kernel ends it with.
  absl::Status Attr(std::string_view rel, std::string_view value) {
    return File(rel, absl::StrCat(Av(value), "\n"));
  }

  // A link at `rel` to `target_rel` (both relative to the root), written as kernfs would.
  absl::Status Link(std::string_view rel, std::string_view target_rel) {
    return RawLink(rel, KernfsTarget(rel, target_rel));
  }

  absl::Status RawLink(std::string_view rel, std::string_view target) {
    const std::string full = Full(rel);
    const std::string t(target);
    if (::symlink(t.c_str(), full.c_str()) == 0) return absl::OkStatus();
    if (errno == ENOENT) {
      FABRIC_RETURN_IF_ERROR(Dir(Parent(rel)));
      if (::symlink(t.c_str(), full.c_str()) == 0) return absl::OkStatus();
    }
    return absl::ErrnoToStatus(errno, Av(absl::StrCat("symlink ", full, " -> ", t)));
  }

 private:
  static std::string_view Parent(std::string_view rel) {
    const size_t slash = rel.rfind('/');
    return slash == std::string_view::npos ? std::string_view() : rel.substr(0, slash);
  }
  std::string Full(std::string_view rel) const { return absl::StrCat(root_, "/", Av(rel)); }

  std::string root_;
};

// ---------------------------------------------------------------------------------------------
// Validation and the derived facts the writer needs.

template <typename T>
using NameMap = std::map<std::string, T, std::less<>>;

struct Index {
  NameMap<const RootComplexSpec*> rc;
  NameMap<const PciFunctionSpec*> pci;
  NameMap<const NetdevSpec*> netdev;
  NameMap<std::string> pci_dir;                           // BDF -> sysfs-relative directory.
  NameMap<std::vector<const PciFunctionSpec*>> children;  // Parent name -> functions below it.
  NameMap<std::string> physfn;                            // VF BDF -> PF BDF.
  NameMap<int> ifindex;
  NameMap<std::string> netdev_dir;
  NameMap<std::vector<std::string>> uppers;  // Lower netdev -> its upper netdevs.
};

// The directory of a function, walking `parent` up to a root complex.
absl::StatusOr<std::string> PciDir(
    std::string_view bdf, const std::function<const PciFunctionSpec*(std::string_view)>& find_pci,
    const std::function<bool(std::string_view)>& is_rc) {
  std::vector<std::string> chain;
  std::string_view cur = bdf;
  for (int depth = 0;; ++depth) {
    if (depth > 64) {
      return Invalid(absl::StrCat("PCI function ", Av(bdf), ": parent chain loops"));
    }
    const PciFunctionSpec* f = find_pci(cur);
    if (f == nullptr) return absl::NotFoundError(absl::StrCat("no PCI function ", Av(cur)));
    chain.push_back(f->bdf);
    if (is_rc(f->parent)) {
      chain.push_back(f->parent);
      break;
    }
    cur = f->parent;
  }
  std::reverse(chain.begin(), chain.end());
  return absl::StrCat("devices/", absl::StrJoin(chain, "/"));
}

absl::StatusOr<Index> BuildIndex(const HostSpec& spec) {
  Index ix;
  for (const RootComplexSpec& rc : spec.root_complexes) {
    if (!ParseRootComplexName(rc.name)) {
      return Invalid(absl::StrCat("root complex name \"", rc.name, "\" is not pciDDDD:BB"));
    }
    if (!ix.rc.emplace(rc.name, &rc).second) {
      return Invalid(absl::StrCat("duplicate root complex ", rc.name));
    }
  }
  for (const PciFunctionSpec& f : spec.pci) {
    if (!ParseBdf(f.bdf)) {
      return Invalid(absl::StrCat("PCI address \"", f.bdf, "\" is not dddd:bb:dd.f (lower case)"));
    }
    if (!ix.pci.emplace(f.bdf, &f).second) {
      return Invalid(absl::StrCat("duplicate PCI function ", f.bdf));
    }
  }
  for (const PciFunctionSpec& f : spec.pci) {
    const BdfParts b = *ParseBdf(f.bdf);
    if (auto rc = ix.rc.find(f.parent); rc != ix.rc.end()) {
      const auto [domain, bus] = *ParseRootComplexName(f.parent);
      if (b.domain != domain || b.bus != bus) {
        return Invalid(
            absl::StrCat("PCI function ", f.bdf, " is not on the root bus of ", f.parent));
      }
    } else if (auto p = ix.pci.find(f.parent); p != ix.pci.end()) {
      if (!IsBridge(p->second->role)) {
        return Invalid(
            absl::StrCat("PCI function ", f.bdf, ": parent ", f.parent, " is not a bridge"));
      }
      if (ParseBdf(f.parent)->domain != b.domain) {
        return Invalid(
            absl::StrCat("PCI function ", f.bdf, ": parent ", f.parent, " is in another domain"));
      }
    } else {
      return Invalid(absl::StrCat("PCI function ", f.bdf, ": unknown parent \"", f.parent, "\""));
    }
    ix.children[f.parent].push_back(&f);
  }
  auto find_pci = [&](std::string_view bdf) -> const PciFunctionSpec* {
    auto it = ix.pci.find(bdf);
    return it == ix.pci.end() ? nullptr : it->second;
  };
  auto is_rc = [&](std::string_view name) { return ix.rc.count(name) > 0; };
  for (const PciFunctionSpec& f : spec.pci) {
    absl::StatusOr<std::string> dir = PciDir(f.bdf, find_pci, is_rc);
    if (!dir.ok()) return dir.status();
    ix.pci_dir[f.bdf] = *std::move(dir);
  }
  for (const PciFunctionSpec& f : spec.pci) {
    if (!f.sriov) continue;
    if (static_cast<int>(f.sriov->vfs.size()) > f.sriov->total_vfs) {
      return Invalid(absl::StrCat("PF ", f.bdf, ": ", f.sriov->vfs.size(), " VFs enabled, only ",
                                  f.sriov->total_vfs, " supported"));
    }
    for (const std::string& vf : f.sriov->vfs) {
      const PciFunctionSpec* v = find_pci(vf);
      if (v == nullptr) return Invalid(absl::StrCat("PF ", f.bdf, ": unknown VF ", vf));
      if (v->parent != f.parent) {
        return Invalid(absl::StrCat("PF ", f.bdf, ": VF ", vf, " is not its sibling"));
      }
      if (v->sriov || vf == f.bdf) return Invalid(absl::StrCat("VF ", vf, " is itself a PF"));
      if (!ix.physfn.emplace(vf, f.bdf).second) {
        return Invalid(absl::StrCat("VF ", vf, " belongs to two PFs"));
      }
    }
  }

  // Netdevs.
  std::set<int> used_ifindex;
  for (size_t i = 0; i < spec.netdevs.size(); ++i) {
    const NetdevSpec& n = spec.netdevs[i];
    if (n.name.empty() || n.name.find('/') != std::string::npos || n.name == "." ||
        n.name == "..") {
      return Invalid(absl::StrCat("bad netdev name \"", n.name, "\""));
    }
    if (!ix.netdev.emplace(n.name, &n).second) {
      return Invalid(absl::StrCat("duplicate netdev ", n.name));
    }
    if (!n.pci.empty() && find_pci(n.pci) == nullptr) {
      return Invalid(absl::StrCat("netdev ", n.name, ": unknown PCI function ", n.pci));
    }
    const int ifindex = n.ifindex != 0 ? n.ifindex : static_cast<int>(i) + 1;
    if (!used_ifindex.insert(ifindex).second) {
      return Invalid(absl::StrCat("netdev ", n.name, ": ifindex ", ifindex, " already used"));
    }
    ix.ifindex[n.name] = ifindex;
    if (!n.virtio.empty() && n.pci.empty()) {
      return Invalid(absl::StrCat("netdev ", n.name, ": virtio device without a PCI function"));
    }
    ix.netdev_dir[n.name] = n.pci.empty()
                                ? absl::StrCat("devices/virtual/net/", n.name)
                                : absl::StrCat(ix.pci_dir[n.pci], n.virtio.empty() ? "" : "/",
                                               n.virtio, "/net/", n.name);
  }
  for (const NetdevSpec& n : spec.netdevs) {
    if (n.lower.empty()) continue;
    if (n.lower == n.name || ix.netdev.count(n.lower) == 0) {
      return Invalid(absl::StrCat("netdev ", n.name, ": bad lower netdev \"", n.lower, "\""));
    }
    ix.uppers[n.lower].push_back(n.name);
  }

  // RDMA devices.
  std::set<std::string, std::less<>> rdma_names;
  std::set<int> uverbs;
  for (const RdmaDeviceSpec& r : spec.rdma) {
    if (r.name.empty() || r.name.find('/') != std::string::npos) {
      return Invalid(absl::StrCat("bad RDMA device name \"", r.name, "\""));
    }
    if (!rdma_names.insert(r.name).second) {
      return Invalid(absl::StrCat("duplicate RDMA device ", r.name));
    }
    if (!r.pci.empty() && find_pci(r.pci) == nullptr) {
      return Invalid(absl::StrCat("RDMA device ", r.name, ": unknown PCI function ", r.pci));
    }
    if (r.pci.empty() && !r.parent.empty() && ix.netdev.count(r.parent) == 0) {
      return Invalid(absl::StrCat("RDMA device ", r.name, ": unknown parent netdev ", r.parent));
    }
    if (r.uverbs) {
      if (*r.uverbs < 0 || !uverbs.insert(*r.uverbs).second) {
        return Invalid(absl::StrCat("RDMA device ", r.name, ": uverbs", *r.uverbs,
                                    " negative or already used"));
      }
    }
    std::set<int> ports;
    for (const RdmaPortSpec& p : r.ports) {
      const std::string where = absl::StrCat("RDMA device ", r.name, " port ", p.number);
      if (p.number < 1 || !ports.insert(p.number).second) {
        return Invalid(absl::StrCat(where, ": bad or duplicate port number"));
      }
      if (p.gid_table_size < 0 || p.pkey_table_size < 0) {
        return Invalid(absl::StrCat(where, ": negative table size"));
      }
      std::set<int> indices;
      for (const GidSpec& g : p.gids) {
        if (g.index < 0 || g.index >= p.gid_table_size) {
          return Invalid(absl::StrCat(where, ": GID index ", g.index, " outside the table of ",
                                      p.gid_table_size));
        }
        if (!indices.insert(g.index).second) {
          return Invalid(absl::StrCat(where, ": GID index ", g.index, " given twice"));
        }
        if (g.gid.empty()) return Invalid(absl::StrCat(where, ": GID ", g.index, " has no text"));
        if (!g.ndev.empty() && ix.netdev.count(g.ndev) == 0) {
          return Invalid(absl::StrCat(where, ": GID ", g.index, " names unknown netdev ", g.ndev));
        }
      }
    }
  }

  // Modules and routes.
  std::set<std::string, std::less<>> modules;
  for (const ModuleSpec& m : spec.modules) {
    if (m.name.empty() || m.name.find('/') != std::string::npos) {
      return Invalid(absl::StrCat("bad module name \"", m.name, "\""));
    }
    if (!modules.insert(m.name).second) return Invalid(absl::StrCat("duplicate module ", m.name));
  }
  for (const Ipv4RouteSpec& r : spec.ipv4_routes) {
    if (ix.netdev.count(r.iface) == 0) {
      return Invalid(absl::StrCat("IPv4 route on unknown netdev \"", r.iface, "\""));
    }
    auto dst = ParseIpv4(r.destination);
    if (!dst || !ParseIpv4(r.gateway) || r.prefix_len < 0 || r.prefix_len > 32) {
      return Invalid(absl::StrCat("bad IPv4 route ", r.destination, "/", r.prefix_len, " via ",
                                  r.gateway, " on ", r.iface));
    }
    const uint32_t host = (uint32_t{(*dst)[0]} << 24) | (uint32_t{(*dst)[1]} << 16) |
                          (uint32_t{(*dst)[2]} << 8) | (*dst)[3];
    const uint32_t mask = r.prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - r.prefix_len);
    if ((host & ~mask) != 0) {
      return Invalid(
          absl::StrCat("IPv4 route ", r.destination, "/", r.prefix_len, " has host bits set"));
    }
  }
  for (const Ipv6RouteSpec& r : spec.ipv6_routes) {
    if (ix.netdev.count(r.iface) == 0) {
      return Invalid(absl::StrCat("IPv6 route on unknown netdev \"", r.iface, "\""));
    }
    if (!ParseIpv6(r.destination) || !ParseIpv6(r.next_hop) || r.prefix_len < 0 ||
        r.prefix_len > 128) {
      return Invalid(absl::StrCat("bad IPv6 route ", r.destination, "/", r.prefix_len, " via ",
                                  r.next_hop, " on ", r.iface));
    }
  }
  if (spec.cpus_per_node < 1) return Invalid("cpus_per_node must be positive");
  for (int node : spec.numa_nodes) {
    if (node < 0 || node > 1023) return Invalid(absl::StrCat("bad NUMA node ", node));
  }
  return ix;
}

// ---------------------------------------------------------------------------------------------
// The writer.

class HostWriter {
 public:
  HostWriter(const HostSpec& spec, const Index& ix, const fs::path& dir)
      : spec_(spec), ix_(ix), sys_((dir / "sys").string()), proc_((dir / "proc").string()) {
    int max_node = 0;
    for (int n : spec.numa_nodes) max_node = std::max(max_node, n);
    nr_cpus_ = (max_node + 1) * spec.cpus_per_node;
  }

  absl::Status Write() {
    FABRIC_RETURN_IF_ERROR(WriteSkeleton());
    for (const RootComplexSpec& rc : spec_.root_complexes) {
      FABRIC_RETURN_IF_ERROR(WriteRootComplex(rc));
    }
    for (const PciFunctionSpec& f : spec_.pci) FABRIC_RETURN_IF_ERROR(WritePci(f));
    FABRIC_RETURN_IF_ERROR(WriteDrivers());
    for (const NetdevSpec& n : spec_.netdevs) FABRIC_RETURN_IF_ERROR(WriteNetdev(n));
    for (const RdmaDeviceSpec& r : spec_.rdma) FABRIC_RETURN_IF_ERROR(WriteRdma(r));
    FABRIC_RETURN_IF_ERROR(WriteModules());
    FABRIC_RETURN_IF_ERROR(WriteNuma());
    return WriteProc();
  }

 private:
  int NumaOf(const PciFunctionSpec& f) const {
    if (f.numa_node) return *f.numa_node;
    // The function inherits the node of its root complex.
    std::string_view cur = f.parent;
    for (int depth = 0; depth < 64; ++depth) {
      if (auto rc = ix_.rc.find(cur); rc != ix_.rc.end()) return rc->second->numa_node;
      auto p = ix_.pci.find(cur);
      if (p == ix_.pci.end()) break;
      if (p->second->numa_node) return *p->second->numa_node;
      cur = p->second->parent;
    }
    return -1;
  }

  std::vector<int> CpusOf(int numa) const {
    std::vector<int> cpus;
    for (int node : spec_.numa_nodes) {
      if (numa >= 0 && node != numa) continue;
      for (int c = 0; c < spec_.cpus_per_node; ++c) cpus.push_back(node * spec_.cpus_per_node + c);
    }
    return cpus;
  }

  // A cpumask as the kernel prints it: 32-bit words, most significant first.
  std::string CpuMask(const std::vector<int>& cpus) const {
    const int words = std::max(1, (nr_cpus_ + 31) / 32);
    std::vector<uint32_t> bits(static_cast<size_t>(words), 0);
    for (int c : cpus) bits[static_cast<size_t>(c / 32)] |= uint32_t{1} << (c % 32);
    std::string out;
    for (int w = words - 1; w >= 0; --w) {
      absl::StrAppendFormat(&out, "%s%08x", w == words - 1 ? "" : ",",
                            bits[static_cast<size_t>(w)]);
    }
    return out;
  }

  absl::Status WriteSkeleton() {
    for (const char* d :
         {"devices/virtual/net", "devices/system/node", "devices/system/cpu", "bus/pci/devices",
          "bus/pci/drivers", "class/net", "class/pci_bus", "module", "kernel", "firmware"}) {
      FABRIC_RETURN_IF_ERROR(sys_.Dir(d));
    }
    bool has_ib_core = !spec_.rdma.empty();
    bool has_uverbs = false;
    for (const RdmaDeviceSpec& r : spec_.rdma) has_uverbs |= r.uverbs.has_value();
    for (const ModuleSpec& m : spec_.modules) {
      has_ib_core |= m.name == "ib_core";
      has_uverbs |= m.name == "ib_uverbs";
    }
    // The RDMA classes exist once ib_core / ib_uverbs are loaded, even without devices.
    if (has_ib_core) FABRIC_RETURN_IF_ERROR(sys_.Dir("class/infiniband"));
    if (has_uverbs) FABRIC_RETURN_IF_ERROR(sys_.Attr("class/infiniband_verbs/abi_version", "6"));
    return absl::OkStatus();
  }

  absl::Status WritePciBus(const std::string& owner_dir, int domain, int bus, int numa) {
    const std::string name = absl::StrFormat("%04x:%02x", domain, bus);
    const std::string d = absl::StrCat(owner_dir, "/pci_bus/", name);
    const std::vector<int> cpus = CpusOf(numa);
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/cpuaffinity", CpuMask(cpus)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/cpulistaffinity", FormatIdList(cpus)));
    FABRIC_RETURN_IF_ERROR(sys_.File(d + "/uevent", ""));
    FABRIC_RETURN_IF_ERROR(sys_.Link(d + "/device", owner_dir));
    FABRIC_RETURN_IF_ERROR(sys_.Link(d + "/subsystem", "class/pci_bus"));
    return sys_.Link(absl::StrCat("class/pci_bus/", name), d);
  }

  absl::Status WriteRootComplex(const RootComplexSpec& rc) {
    const std::string d = absl::StrCat("devices/", rc.name);
    FABRIC_RETURN_IF_ERROR(sys_.File(d + "/uevent", ""));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/power/control", "auto"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/power/runtime_status", "unsupported"));
    FABRIC_RETURN_IF_ERROR(sys_.File(d + "/waiting_for_supplier", "0\n"));
    const auto [domain, bus] = *ParseRootComplexName(rc.name);
    return WritePciBus(d, domain, bus, rc.numa_node);
  }

  // Bus numbers below a bridge: {secondary, subordinate}, or nullopt without children.
  std::optional<std::pair<int, int>> BusRange(const std::string& bdf) const {
    auto it = ix_.children.find(bdf);
    if (it == ix_.children.end() || it->second.empty()) return std::nullopt;
    int secondary = 256;
    int subordinate = 0;
    for (const PciFunctionSpec* c : it->second) {
      const int bus = ParseBdf(c->bdf)->bus;
      secondary = std::min(secondary, bus);
      subordinate = std::max(subordinate, bus);
      if (auto below = BusRange(c->bdf)) subordinate = std::max(subordinate, below->second);
    }
    return std::make_pair(secondary, subordinate);
  }

  // Type 0/1 header plus a PCIe capability at 0x40, so that a reader of `config` sees the same
  // IDs, port type and link as the attribute files.
  std::string Config(const PciFunctionSpec& f) const {
    std::string c(256, '\0');
    auto put16 = [&](size_t off, uint32_t v) {
      c[off] = static_cast<char>(v & 0xff);
      c[off + 1] = static_cast<char>((v >> 8) & 0xff);
    };
    const bool vf = ix_.physfn.count(f.bdf) > 0;
    // A VF's vendor and device IDs read as all ones; sysfs shows the PF's IDs instead.
    put16(0x00, vf ? 0xffff : f.vendor);
    put16(0x02, vf ? 0xffff : f.device);
    put16(0x04, 0x0006);  // Memory space, bus master.
    put16(0x06, f.pcie ? 0x0010 : 0x0000);
    c[0x08] = static_cast<char>(f.revision);
    c[0x09] = static_cast<char>(f.class_code & 0xff);
    c[0x0a] = static_cast<char>((f.class_code >> 8) & 0xff);
    c[0x0b] = static_cast<char>((f.class_code >> 16) & 0xff);
    if (IsBridge(f.role)) {
      c[0x0e] = 0x01;
      c[0x18] = static_cast<char>(ParseBdf(f.bdf)->bus);
      if (auto range = BusRange(f.bdf)) {
        c[0x19] = static_cast<char>(range->first);
        c[0x1a] = static_cast<char>(range->second);
      }
    } else {
      put16(0x2c, f.subsystem_vendor);
      put16(0x2e, f.subsystem_device);
    }
    if (f.pcie) {
      c[0x34] = 0x40;
      int port_type = 0;  // PCI Express endpoint.
      switch (f.role) {
        case PciRole::kEndpoint:
          port_type = 0;
          break;
        case PciRole::kRootPort:
          port_type = 4;
          break;
        case PciRole::kSwitchUpstream:
          port_type = 5;
          break;
        case PciRole::kSwitchDownstream:
          port_type = 6;
          break;
        case PciRole::kPciBridge:
          port_type = 7;
          break;
      }
      c[0x40] = 0x10;  // PCI Express capability ID.
      put16(0x42, 0x0002 | static_cast<uint32_t>(port_type << 4));
      const auto link = [](const PciLinkSpec& l) {
        return static_cast<uint32_t>(LinkSpeedCode(l.speed) | ((l.width & 0x3f) << 4));
      };
      put16(0x4c, link(f.max_link));
      put16(0x52, link(f.current_link));
    }
    return c;
  }

  absl::Status WritePci(const PciFunctionSpec& f) {
    const std::string& d = ix_.pci_dir.at(f.bdf);
    const int numa = NumaOf(f);
    const std::vector<int> cpus = CpusOf(numa);
    auto hex4 = [](uint32_t v) { return absl::StrFormat("0x%04x", v); };
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/vendor", hex4(f.vendor)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/device", hex4(f.device)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/subsystem_vendor", hex4(f.subsystem_vendor)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/subsystem_device", hex4(f.subsystem_device)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/class", absl::StrFormat("0x%06x", f.class_code)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/revision", absl::StrFormat("0x%02x", f.revision)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/numa_node", absl::StrCat(numa)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/local_cpulist", FormatIdList(cpus)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/local_cpus", CpuMask(cpus)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/irq", absl::StrCat(f.irq)));
    const bool enabled = IsBridge(f.role) || !f.driver.empty();
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/enable", enabled ? "1" : "0"));
    const uint32_t cls = f.class_code;
    const std::string modalias = absl::StrFormat(
        "pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X", f.vendor, f.device, f.subsystem_vendor,
        f.subsystem_device, (cls >> 16) & 0xff, (cls >> 8) & 0xff, cls & 0xff);
    std::string uevent = f.driver.empty() ? "" : absl::StrCat("DRIVER=", f.driver, "\n");
    absl::StrAppendFormat(&uevent,
                          "PCI_CLASS=%X\nPCI_ID=%04X:%04X\nPCI_SUBSYS_ID=%04X:%04X\n"
                          "PCI_SLOT_NAME=%s\nMODALIAS=%s\n",
                          cls, f.vendor, f.device, f.subsystem_vendor, f.subsystem_device, f.bdf,
                          modalias);
    FABRIC_RETURN_IF_ERROR(sys_.File(d + "/uevent", uevent));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/modalias", modalias));
    std::string resource;
    for (int i = 0; i < 13; ++i) {
      resource += "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
    }
    FABRIC_RETURN_IF_ERROR(sys_.File(d + "/resource", resource));
    FABRIC_RETURN_IF_ERROR(sys_.File(d + "/config", Config(f)));
    for (const auto& [file, text] : f.attributes) {
      FABRIC_RETURN_IF_ERROR(sys_.Attr(absl::StrCat(d, "/", file), text));
    }
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/dma_mask_bits", "64"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/consistent_dma_mask_bits", "64"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/d3cold_allowed", "1"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/broken_parity_status", "0"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/msi_bus", "1"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/driver_override", "(null)"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/power/control", "on"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/power/runtime_status", "active"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/power/runtime_enabled", "forbidden"));
    FABRIC_RETURN_IF_ERROR(sys_.Link(d + "/subsystem", "bus/pci"));
    if (!f.driver.empty()) {
      FABRIC_RETURN_IF_ERROR(sys_.Link(d + "/driver", absl::StrCat("bus/pci/drivers/", f.driver)));
    }
    if (f.pcie) {
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/current_link_speed", f.current_link.speed));
      FABRIC_RETURN_IF_ERROR(
          sys_.Attr(d + "/current_link_width", absl::StrCat(f.current_link.width)));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/max_link_speed", f.max_link.speed));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/max_link_width", absl::StrCat(f.max_link.width)));
    }
    if (f.pcie && f.aer && ix_.physfn.count(f.bdf) == 0) {
      FABRIC_RETURN_IF_ERROR(
          sys_.File(d + "/aer_dev_correctable", ZeroAerCounts(kAerCorrectableBits, "ERR_COR")));
      FABRIC_RETURN_IF_ERROR(
          sys_.File(d + "/aer_dev_nonfatal", ZeroAerCounts(kAerUncorrectableBits, "ERR_NONFATAL")));
      FABRIC_RETURN_IF_ERROR(
          sys_.File(d + "/aer_dev_fatal", ZeroAerCounts(kAerUncorrectableBits, "ERR_FATAL")));
    }
    if (IsBridge(f.role)) {
      if (auto range = BusRange(f.bdf)) {
        FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/secondary_bus_number", absl::StrCat(range->first)));
        FABRIC_RETURN_IF_ERROR(
            sys_.Attr(d + "/subordinate_bus_number", absl::StrCat(range->second)));
        FABRIC_RETURN_IF_ERROR(WritePciBus(d, ParseBdf(f.bdf)->domain, range->first, numa));
      }
    }
    if (f.sriov) {
      const SriovSpec& s = *f.sriov;
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/sriov_totalvfs", absl::StrCat(s.total_vfs)));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/sriov_numvfs", absl::StrCat(s.vfs.size())));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/sriov_offset", absl::StrCat(s.offset)));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/sriov_stride", absl::StrCat(s.stride)));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/sriov_vf_device", absl::StrFormat("%x", s.vf_device)));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/sriov_drivers_autoprobe", "1"));
      for (size_t i = 0; i < s.vfs.size(); ++i) {
        FABRIC_RETURN_IF_ERROR(sys_.Link(absl::StrCat(d, "/virtfn", i), ix_.pci_dir.at(s.vfs[i])));
      }
    }
    if (auto pf = ix_.physfn.find(f.bdf); pf != ix_.physfn.end()) {
      FABRIC_RETURN_IF_ERROR(sys_.Link(d + "/physfn", ix_.pci_dir.at(pf->second)));
    }
    return sys_.Link(absl::StrCat("bus/pci/devices/", f.bdf), d);
  }

  bool HasModule(std::string_view name) const {
    return std::any_of(spec_.modules.begin(), spec_.modules.end(),
                       [&](const ModuleSpec& m) { return m.name == name; });
  }

  absl::Status WriteDrivers() {
    NameMap<std::vector<const PciFunctionSpec*>> by_driver;
    for (const PciFunctionSpec& f : spec_.pci) {
      if (!f.driver.empty()) by_driver[f.driver].push_back(&f);
    }
    for (const auto& [driver, functions] : by_driver) {
      const std::string d = absl::StrCat("bus/pci/drivers/", driver);
      for (const char* file : {"bind", "unbind", "new_id", "remove_id", "uevent"}) {
        FABRIC_RETURN_IF_ERROR(sys_.File(absl::StrCat(d, "/", file), ""));
      }
      if (HasModule(driver)) {
        FABRIC_RETURN_IF_ERROR(sys_.Link(d + "/module", absl::StrCat("module/", driver)));
      }
      for (const PciFunctionSpec* f : functions) {
        FABRIC_RETURN_IF_ERROR(sys_.Link(absl::StrCat(d, "/", f->bdf), ix_.pci_dir.at(f->bdf)));
      }
    }
    return absl::OkStatus();
  }

  absl::Status WriteNetdev(const NetdevSpec& n) {
    const std::string& d = ix_.netdev_dir.at(n.name);
    const int ifindex = ix_.ifindex.at(n.name);
    const int iflink = n.lower.empty() ? ifindex : ix_.ifindex.at(n.lower);
    std::string broadcast = n.broadcast;
    if (broadcast.empty()) {
      if (n.type == 32) {
        broadcast = "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff";
      } else if (n.type == 772) {
        broadcast = "00:00:00:00:00:00";
      } else {
        broadcast = "ff:ff:ff:ff:ff:ff";
      }
    }
    const size_t addr_len = n.mac.empty() ? 0 : (n.mac.size() + 1) / 3;
    const bool up = n.operstate == "up" || n.operstate == "unknown";
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/address", n.mac));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/broadcast", broadcast));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/addr_len", absl::StrCat(addr_len)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/mtu", absl::StrCat(n.mtu)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/operstate", n.operstate));
    if (n.speed_mbps) {
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/speed", absl::StrCat(*n.speed_mbps)));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/duplex", "full"));
    }
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/ifindex", absl::StrCat(ifindex)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/iflink", absl::StrCat(iflink)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/dev_port", absl::StrCat(n.dev_port)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/dev_id", "0x0"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/carrier", up ? "1" : "0"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/flags", up ? "0x1003" : "0x1002"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/type", absl::StrCat(n.type)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/tx_queue_len", "1000"));
    std::string uevent = n.devtype.empty() ? "" : absl::StrCat("DEVTYPE=", n.devtype, "\n");
    absl::StrAppend(&uevent, "INTERFACE=", n.name, "\nIFINDEX=", ifindex, "\n");
    FABRIC_RETURN_IF_ERROR(sys_.File(d + "/uevent", uevent));
    const uint64_t seed = static_cast<uint64_t>(ifindex);
    const std::pair<const char*, uint64_t> stats[] = {{"rx_bytes", seed * 1000003},
                                                      {"tx_bytes", seed * 2000003},
                                                      {"rx_packets", seed * 1001},
                                                      {"tx_packets", seed * 2001},
                                                      {"rx_errors", 0},
                                                      {"tx_errors", 0},
                                                      {"rx_dropped", 0},
                                                      {"tx_dropped", 0},
                                                      {"multicast", seed},
                                                      {"collisions", 0}};
    for (const auto& [name, value] : stats) {
      FABRIC_RETURN_IF_ERROR(sys_.Attr(absl::StrCat(d, "/statistics/", name), absl::StrCat(value)));
    }
    if (!n.pci.empty()) {
      std::string device = ix_.pci_dir.at(n.pci);
      if (!n.virtio.empty()) absl::StrAppend(&device, "/", n.virtio);
      FABRIC_RETURN_IF_ERROR(sys_.Link(d + "/device", device));
    }
    FABRIC_RETURN_IF_ERROR(sys_.Link(d + "/subsystem", "class/net"));
    if (!n.lower.empty()) {
      FABRIC_RETURN_IF_ERROR(
          sys_.Link(absl::StrCat(d, "/lower_", n.lower), ix_.netdev_dir.at(n.lower)));
    }
    if (auto it = ix_.uppers.find(n.name); it != ix_.uppers.end()) {
      for (const std::string& upper : it->second) {
        FABRIC_RETURN_IF_ERROR(
            sys_.Link(absl::StrCat(d, "/upper_", upper), ix_.netdev_dir.at(upper)));
      }
    }
    return sys_.Link(absl::StrCat("class/net/", n.name), d);
  }

  absl::Status WriteRdmaPort(const std::string& d, const RdmaPortSpec& p) {
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/state", p.state));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/phys_state", p.phys_state));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/rate", p.rate));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/link_layer", p.link_layer));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/lid", absl::StrFormat("0x%x", p.lid)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/sm_lid", absl::StrFormat("0x%x", p.sm_lid)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/lid_mask_count", absl::StrCat(p.lid_mask_count)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/sm_sl", absl::StrCat(p.sm_sl)));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/cap_mask", p.cap_mask));
    std::vector<const GidSpec*> by_index(static_cast<size_t>(p.gid_table_size), nullptr);
    for (const GidSpec& g : p.gids) by_index[static_cast<size_t>(g.index)] = &g;
    FABRIC_RETURN_IF_ERROR(sys_.Dir(d + "/gids"));
    FABRIC_RETURN_IF_ERROR(sys_.Dir(d + "/gid_attrs/types"));
    FABRIC_RETURN_IF_ERROR(sys_.Dir(d + "/gid_attrs/ndevs"));
    for (int i = 0; i < p.gid_table_size; ++i) {
      const GidSpec* g = by_index[static_cast<size_t>(i)];
      FABRIC_RETURN_IF_ERROR(
          sys_.Attr(absl::StrCat(d, "/gids/", i),
                    g != nullptr ? g->gid : "0000:0000:0000:0000:0000:0000:0000:0000"));
      if (g == nullptr) continue;
      FABRIC_RETURN_IF_ERROR(sys_.Attr(absl::StrCat(d, "/gid_attrs/types/", i), g->type));
      if (!g->ndev.empty()) {
        FABRIC_RETURN_IF_ERROR(sys_.Attr(absl::StrCat(d, "/gid_attrs/ndevs/", i), g->ndev));
      }
    }
    FABRIC_RETURN_IF_ERROR(sys_.Dir(d + "/pkeys"));
    for (int i = 0; i < p.pkey_table_size; ++i) {
      FABRIC_RETURN_IF_ERROR(
          sys_.Attr(absl::StrCat(d, "/pkeys/", i), i == 0 ? "0xffff" : "0x0000"));
    }
    for (const auto& [dir, list] :
         {std::pair<const char*, const CounterList*>{"counters", &p.counters},
          {"hw_counters", &p.hw_counters}}) {
      if (list->empty()) continue;
      const std::string cd = absl::StrCat(d, "/", dir);
      FABRIC_RETURN_IF_ERROR(sys_.Dir(cd));
      for (const auto& [name, value] : *list) {
        FABRIC_RETURN_IF_ERROR(sys_.Attr(absl::StrCat(cd, "/", name), absl::StrCat(value)));
      }
    }
    return absl::OkStatus();
  }

  absl::Status WriteRdma(const RdmaDeviceSpec& r) {
    const std::string pci_dir = r.pci.empty() ? "" : ix_.pci_dir.at(r.pci);
    const std::string d = r.pci.empty() ? absl::StrCat("devices/virtual/infiniband/", r.name)
                                        : absl::StrCat(pci_dir, "/infiniband/", r.name);
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/node_guid", r.node_guid));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/sys_image_guid",
                                     r.sys_image_guid.empty() ? r.node_guid : r.sys_image_guid));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/fw_ver", r.fw_ver));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/hca_type", r.hca_type));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/node_type", r.node_type));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/board_id", r.board_id));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/node_desc", r.node_desc));
    FABRIC_RETURN_IF_ERROR(sys_.File(d + "/uevent", absl::StrCat("NAME=", r.name, "\n")));
    FABRIC_RETURN_IF_ERROR(sys_.Link(d + "/subsystem", "class/infiniband"));
    if (r.pci.empty()) {
      if (!r.parent.empty()) FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/parent", r.parent));
    } else {
      FABRIC_RETURN_IF_ERROR(sys_.Link(d + "/device", pci_dir));
    }
    FABRIC_RETURN_IF_ERROR(sys_.Dir(d + "/ports"));
    for (const RdmaPortSpec& p : r.ports) {
      FABRIC_RETURN_IF_ERROR(WriteRdmaPort(absl::StrCat(d, "/ports/", p.number), p));
    }
    FABRIC_RETURN_IF_ERROR(sys_.Link(absl::StrCat("class/infiniband/", r.name), d));
    if (!r.uverbs) return absl::OkStatus();
    FABRIC_RETURN_IF_ERROR(WriteUmad(r, pci_dir));

    const int k = *r.uverbs;
    const std::string name = absl::StrCat("uverbs", k);
    const std::string u = r.pci.empty() ? absl::StrCat("devices/virtual/infiniband_verbs/", name)
                                        : absl::StrCat(pci_dir, "/infiniband_verbs/", name);
    // The fixed uverbs major covers 64 minors; beyond, the kernel takes a dynamic major.
    const int major = k < 64 ? 231 : 510;
    const int minor = k < 64 ? 192 + k : k - 64;
    FABRIC_RETURN_IF_ERROR(sys_.Attr(u + "/ibdev", r.name));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(u + "/abi_version", "1"));
    FABRIC_RETURN_IF_ERROR(sys_.Attr(u + "/dev", absl::StrCat(major, ":", minor)));
    FABRIC_RETURN_IF_ERROR(sys_.File(
        u + "/uevent",
        absl::StrCat("MAJOR=", major, "\nMINOR=", minor, "\nDEVNAME=infiniband/", name, "\n")));
    FABRIC_RETURN_IF_ERROR(sys_.Link(u + "/subsystem", "class/infiniband_verbs"));
    if (!r.pci.empty()) FABRIC_RETURN_IF_ERROR(sys_.Link(u + "/device", pci_dir));
    return sys_.Link(absl::StrCat("class/infiniband_verbs/", name), u);
  }

  absl::Status WriteUmad(const RdmaDeviceSpec& r, const std::string& pci_dir) {
    if (!r.umad || !absl::StartsWith(r.node_type, "1:")) return absl::OkStatus();
    for (const RdmaPortSpec& p : r.ports) {
      const std::string name = absl::StrCat("umad", next_umad_++);
      const std::string u = r.pci.empty() ? absl::StrCat("devices/virtual/infiniband_mad/", name)
                                          : absl::StrCat(pci_dir, "/infiniband_mad/", name);
      FABRIC_RETURN_IF_ERROR(sys_.Attr(u + "/ibdev", r.name));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(u + "/port", absl::StrCat(p.number)));
      FABRIC_RETURN_IF_ERROR(sys_.Link(u + "/subsystem", "class/infiniband_mad"));
      FABRIC_RETURN_IF_ERROR(sys_.Link(absl::StrCat("class/infiniband_mad/", name), u));
    }
    return sys_.Attr("class/infiniband_mad/abi_version", "5");
  }

  absl::Status WriteModules() {
    for (const ModuleSpec& m : spec_.modules) {
      const std::string d = absl::StrCat("module/", m.name);
      FABRIC_RETURN_IF_ERROR(sys_.Dir(d + "/parameters"));
      if (m.builtin) continue;
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/refcnt", absl::StrCat(m.refcount)));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/initstate", "live"));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/coresize", absl::StrCat(m.size)));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/taint", m.taint));
      FABRIC_RETURN_IF_ERROR(sys_.File(d + "/uevent", ""));
      if (!m.version.empty()) FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/version", m.version));
      FABRIC_RETURN_IF_ERROR(sys_.Dir(d + "/holders"));
      for (const std::string& user : m.used_by) {
        FABRIC_RETURN_IF_ERROR(
            sys_.Link(absl::StrCat(d, "/holders/", user), absl::StrCat("module/", user)));
      }
    }
    return absl::OkStatus();
  }

  absl::Status WriteNuma() {
    const std::string nodes = FormatIdList(spec_.numa_nodes);
    for (const char* f : {"online", "possible", "has_cpu", "has_memory", "has_normal_memory"}) {
      FABRIC_RETURN_IF_ERROR(sys_.Attr(absl::StrCat("devices/system/node/", f), nodes));
    }
    for (int node : spec_.numa_nodes) {
      const std::string d = absl::StrCat("devices/system/node/node", node);
      const std::vector<int> cpus = CpusOf(node);
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/cpulist", FormatIdList(cpus)));
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/cpumap", CpuMask(cpus)));
      std::vector<std::string> distance;
      for (int other : spec_.numa_nodes) distance.push_back(other == node ? "10" : "21");
      FABRIC_RETURN_IF_ERROR(sys_.Attr(d + "/distance", absl::StrJoin(distance, " ")));
    }
    const std::string cpus = FormatIdList(CpusOf(-1));
    for (const char* f : {"online", "possible", "present"}) {
      FABRIC_RETURN_IF_ERROR(sys_.Attr(absl::StrCat("devices/system/cpu/", f), cpus));
    }
    return absl::OkStatus();
  }

  absl::Status WriteProc() {
    FABRIC_RETURN_IF_ERROR(proc_.Attr("sys/kernel/hostname", spec_.hostname));
    FABRIC_RETURN_IF_ERROR(proc_.Attr("sys/kernel/osrelease", spec_.osrelease));
    FABRIC_RETURN_IF_ERROR(proc_.Attr("sys/kernel/ostype", "Linux"));
    FABRIC_RETURN_IF_ERROR(proc_.File(
        "version", absl::StrCat("Linux version ", spec_.osrelease,
                                " (builder@fabric-testhosts) (gcc (GCC) 12.2.0, GNU ld 2.40) #1 "
                                "SMP PREEMPT_DYNAMIC\n")));

    // /proc/net/route: the kernel pads every line (the header too) to 127 columns with spaces.
    auto padded = [](std::string line) {
      if (line.size() < 127) line.append(127 - line.size(), ' ');
      line += '\n';
      return line;
    };
    // Network-order bytes printed as a native little-endian integer: 10.0.60.0 -> 003C000A.
    auto le_hex = [](const std::array<uint8_t, 4>& a) {
      return absl::StrFormat("%02X%02X%02X%02X", a[3], a[2], a[1], a[0]);
    };
    std::string route = padded(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT");
    for (const Ipv4RouteSpec& r : spec_.ipv4_routes) {
      const std::array<uint8_t, 4> dst = *ParseIpv4(r.destination);
      const std::array<uint8_t, 4> gw = *ParseIpv4(r.gateway);
      std::array<uint8_t, 4> mask{};
      for (int bit = 0; bit < r.prefix_len; ++bit) {
        mask[static_cast<size_t>(bit / 8)] |= static_cast<uint8_t>(0x80 >> (bit % 8));
      }
      const bool has_gw = gw != std::array<uint8_t, 4>{};
      const uint32_t flags = r.flags ? *r.flags : (has_gw ? 0x0003 : 0x0001);
      route += padded(absl::StrFormat("%s\t%s\t%s\t%04X\t0\t0\t%d\t%s\t0\t0\t0", r.iface,
                                      le_hex(dst), le_hex(gw), flags, r.metric, le_hex(mask)));
    }
    FABRIC_RETURN_IF_ERROR(proc_.File("net/route", route));

    auto hex128 = [](const std::array<uint8_t, 16>& a) {
      std::string s;
      for (uint8_t b : a) absl::StrAppendFormat(&s, "%02x", b);
      return s;
    };
    std::string route6;
    for (const Ipv6RouteSpec& r : spec_.ipv6_routes) {
      const std::array<uint8_t, 16> dst = *ParseIpv6(r.destination);
      const std::array<uint8_t, 16> nh = *ParseIpv6(r.next_hop);
      const bool has_nh = nh != std::array<uint8_t, 16>{};
      const uint32_t flags = r.flags ? *r.flags : (has_nh ? 0x0003 : 0x0001);
      absl::StrAppendFormat(&route6, "%s %02x %s 00 %s %08x %08x %08x %08x %8s\n", hex128(dst),
                            r.prefix_len, std::string(32, '0'), hex128(nh), r.metric, 1, 0, flags,
                            r.iface);
    }
    FABRIC_RETURN_IF_ERROR(proc_.File("net/ipv6_route", route6));

    std::string modules;
    for (const ModuleSpec& m : spec_.modules) {
      if (m.builtin) continue;
      const std::string deps =
          m.used_by.empty() ? "-" : absl::StrCat(absl::StrJoin(m.used_by, ","), ",");
      absl::StrAppend(&modules, m.name, " ", m.size, " ", m.refcount, " ", deps,
                      " Live 0x0000000000000000", m.taint.empty() ? "" : " (", m.taint,
                      m.taint.empty() ? "" : ")", "\n");
    }
    FABRIC_RETURN_IF_ERROR(proc_.File("modules", modules));
    if (spec_.nvidia_version) {
      FABRIC_RETURN_IF_ERROR(proc_.File("driver/nvidia/version", *spec_.nvidia_version));
    }
    for (const auto& [bdf, text] : spec_.nvidia_gpu_information) {
      FABRIC_RETURN_IF_ERROR(
          proc_.File(absl::StrCat("driver/nvidia/gpus/", bdf, "/information"), text));
    }
    for (const auto& [path, value] : spec_.sysctls) {
      FABRIC_RETURN_IF_ERROR(proc_.File(absl::StrCat("sys/", path), value + "\n"));
    }
    return absl::OkStatus();
  }

  const HostSpec& spec_;
  const Index& ix_;
  TreeWriter sys_;
  TreeWriter proc_;
  int next_umad_ = 0;
  int nr_cpus_ = 0;
};

// Prepares `dir`: absent (created) or an empty directory.
absl::Status PrepareDir(const fs::path& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return absl::InternalError(absl::StrCat("stat ", dir.string(), ": ", ec.message()));
  }
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir.string(), " exists and is not a directory"));
    }
    const bool empty = fs::is_empty(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("list ", dir.string(), ": ", ec.message()));
    if (!empty) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir.string(), " exists and is not empty; refusing to write a host into it"));
    }
    return absl::OkStatus();
  }
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", dir.string(), ": ", ec.message()));
  return absl::OkStatus();
}

template <typename T>
auto FindByName(std::vector<T>& v, std::string_view name, std::string T::*field) -> T* {
  for (T& x : v) {
    if (x.*field == name) return &x;
  }
  return nullptr;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// HostSpec.

RootComplexSpec* HostSpec::FindRootComplex(std::string_view name) {
  return FindByName(root_complexes, name, &RootComplexSpec::name);
}
PciFunctionSpec* HostSpec::FindPci(std::string_view bdf) {
  return FindByName(pci, bdf, &PciFunctionSpec::bdf);
}
const PciFunctionSpec* HostSpec::FindPci(std::string_view bdf) const {
  return const_cast<HostSpec*>(this)->FindPci(bdf);
}
NetdevSpec* HostSpec::FindNetdev(std::string_view name) {
  return FindByName(netdevs, name, &NetdevSpec::name);
}
const NetdevSpec* HostSpec::FindNetdev(std::string_view name) const {
  return const_cast<HostSpec*>(this)->FindNetdev(name);
}
RdmaDeviceSpec* HostSpec::FindRdma(std::string_view name) {
  return FindByName(rdma, name, &RdmaDeviceSpec::name);
}
const RdmaDeviceSpec* HostSpec::FindRdma(std::string_view name) const {
  return const_cast<HostSpec*>(this)->FindRdma(name);
}
ModuleSpec* HostSpec::FindModule(std::string_view name) {
  return FindByName(modules, name, &ModuleSpec::name);
}

bool HostSpec::RemovePci(std::string_view bdf) {
  if (FindPci(bdf) == nullptr) return false;
  // Everything below the function, and the VFs of every PF removed, to a fixed point.
  std::set<std::string, std::less<>> gone = {std::string(bdf)};
  for (bool grew = true; grew;) {
    grew = false;
    for (const PciFunctionSpec& f : pci) {
      if (gone.count(f.bdf) > 0) {
        if (f.sriov) {
          for (const std::string& vf : f.sriov->vfs) grew |= gone.insert(vf).second;
        }
      } else if (gone.count(f.parent) > 0) {
        grew |= gone.insert(f.bdf).second;
      }
    }
  }
  std::erase_if(pci, [&](const PciFunctionSpec& f) { return gone.count(f.bdf) > 0; });
  for (PciFunctionSpec& f : pci) {
    if (f.sriov) {
      std::erase_if(f.sriov->vfs, [&](const std::string& vf) { return gone.count(vf) > 0; });
    }
  }
  std::erase_if(rdma, [&](const RdmaDeviceSpec& r) { return gone.count(r.pci) > 0; });
  std::vector<std::string> dead_netdevs;
  for (const NetdevSpec& n : netdevs) {
    if (gone.count(n.pci) > 0) dead_netdevs.push_back(n.name);
  }
  for (const std::string& n : dead_netdevs) RemoveNetdev(n);
  return true;
}

bool HostSpec::RemoveNetdev(std::string_view name) {
  if (FindNetdev(name) == nullptr) return false;
  std::set<std::string, std::less<>> gone = {std::string(name)};
  for (bool grew = true; grew;) {
    grew = false;
    for (const NetdevSpec& n : netdevs) {
      if (!n.lower.empty() && gone.count(n.lower) > 0) grew |= gone.insert(n.name).second;
    }
  }
  std::erase_if(netdevs, [&](const NetdevSpec& n) { return gone.count(n.name) > 0; });
  std::erase_if(rdma, [&](const RdmaDeviceSpec& r) {
    return r.pci.empty() && !r.parent.empty() && gone.count(r.parent) > 0;
  });
  for (RdmaDeviceSpec& r : rdma) {
    for (RdmaPortSpec& p : r.ports) {
      std::erase_if(p.gids, [&](const GidSpec& g) { return gone.count(g.ndev) > 0; });
    }
  }
  std::erase_if(ipv4_routes, [&](const Ipv4RouteSpec& r) { return gone.count(r.iface) > 0; });
  std::erase_if(ipv6_routes, [&](const Ipv6RouteSpec& r) { return gone.count(r.iface) > 0; });
  return true;
}

bool HostSpec::RemoveRdma(std::string_view name) {
  return std::erase_if(rdma, [&](const RdmaDeviceSpec& r) { return r.name == name; }) > 0;
}

bool HostSpec::RemoveModule(std::string_view name) {
  if (std::erase_if(modules, [&](const ModuleSpec& m) { return m.name == name; }) == 0) {
    return false;
  }
  for (ModuleSpec& m : modules) {
    const size_t dropped =
        std::erase_if(m.used_by, [&](const std::string& u) { return u == name; });
    m.refcount = std::max(0, m.refcount - static_cast<int>(dropped));
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Writing and paths.

absl::Status WriteHost(const HostSpec& spec, const std::filesystem::path& dir) {
  absl::StatusOr<Index> ix = BuildIndex(spec);
  if (!ix.ok()) return ix.status();
  FABRIC_RETURN_IF_ERROR(PrepareDir(dir));
  HostWriter writer(spec, *ix, dir);
  FABRIC_RETURN_IF_ERROR(writer.Write());
  if (spec.after_write) return spec.after_write(dir);
  return absl::OkStatus();
}

absl::StatusOr<std::string> PciFunctionPath(const HostSpec& spec, std::string_view bdf) {
  return PciDir(
      bdf, [&](std::string_view b) { return spec.FindPci(b); },
      [&](std::string_view name) {
        return std::any_of(spec.root_complexes.begin(), spec.root_complexes.end(),
                           [&](const RootComplexSpec& rc) { return rc.name == name; });
      });
}

absl::StatusOr<std::string> NetdevPath(const HostSpec& spec, std::string_view name) {
  const NetdevSpec* n = spec.FindNetdev(name);
  if (n == nullptr) return absl::NotFoundError(absl::StrCat("no netdev ", Av(name)));
  if (n->pci.empty()) return absl::StrCat("devices/virtual/net/", n->name);
  absl::StatusOr<std::string> pci = PciFunctionPath(spec, n->pci);
  if (!pci.ok()) return pci.status();
  return absl::StrCat(*pci, "/net/", n->name);
}

absl::StatusOr<std::string> RdmaDevicePath(const HostSpec& spec, std::string_view name) {
  const RdmaDeviceSpec* r = spec.FindRdma(name);
  if (r == nullptr) return absl::NotFoundError(absl::StrCat("no RDMA device ", Av(name)));
  if (r->pci.empty()) return absl::StrCat("devices/virtual/infiniband/", r->name);
  absl::StatusOr<std::string> pci = PciFunctionPath(spec, r->pci);
  if (!pci.ok()) return pci.status();
  return absl::StrCat(*pci, "/infiniband/", r->name);
}

// ---------------------------------------------------------------------------------------------
// GID and GUID text.

std::string Ipv4MappedGid(std::string_view ipv4) {
  auto a = ParseIpv4(ipv4);
  if (!a) return "";
  std::array<uint8_t, 16> g{};
  g[10] = 0xff;
  g[11] = 0xff;
  std::copy(a->begin(), a->end(), g.begin() + 12);
  return FormatGid(g);
}

std::string LinkLocalGidFromMac(std::string_view mac) {
  auto m = ParseHexGroups(mac, 2, 6);
  if (!m) return "";
  std::array<uint8_t, 16> g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  const std::array<uint8_t, 8> eui = {static_cast<uint8_t>((*m)[0] ^ 0x02),
                                      (*m)[1],
                                      (*m)[2],
                                      0xff,
                                      0xfe,
                                      (*m)[3],
                                      (*m)[4],
                                      (*m)[5]};
  std::copy(eui.begin(), eui.end(), g.begin() + 8);
  return FormatGid(g);
}

std::string LinkLocalGidFromGuid(std::string_view guid) {
  auto b = ParseHexGroups(guid, 4, 4);
  if (!b) return "";
  std::array<uint8_t, 16> g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  std::copy(b->begin(), b->end(), g.begin() + 8);
  return FormatGid(g);
}

std::string Mlx5GuidFromMac(std::string_view mac) {
  auto m = ParseHexGroups(mac, 2, 6);
  if (!m) return "";
  return FormatGuid({(*m)[0], (*m)[1], (*m)[2], 0x03, 0x00, (*m)[3], (*m)[4], (*m)[5]});
}

std::string Eui64GuidFromMac(std::string_view mac) {
  auto m = ParseHexGroups(mac, 2, 6);
  if (!m) return "";
  return FormatGuid({static_cast<uint8_t>((*m)[0] ^ 0x02), (*m)[1], (*m)[2], 0xff, 0xfe, (*m)[3],
                     (*m)[4], (*m)[5]});
}

}  // namespace fabric::testing
