#include "agent/fabric/doctor/read_facts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/common/errno.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/hostfs/dev_nodes.h"
#include "agent/hostfs/host_fs.h"
#include "agent/hostfs/pci_acs.h"
#include "agent/hostfs/process_limits.h"
#include "agent/inventory/discovery/discovery.h"

namespace fabric::doctor {
namespace {

constexpr size_t kMaxBridges = 64;
constexpr size_t kMaxLibDirs = 64;  // LD_LIBRARY_PATH is the job's: bound the stats.

// "0000:17:00.0": the only form joined into a sysfs path, so that no name climbs out of it.
bool IsBdf(std::string_view s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11}) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

std::string PciDir(std::string_view bdf) { return JoinPath("bus/pci/devices", bdf); }

std::string Message(const absl::Status& s) { return std::string(s.message()); }

void ReadDevNodes(const ReadOptions& opt, DoctorFacts* facts) {
  auto nodes = OpenRdmaNodes(opt.dev_dir);
  if (nodes.ok()) {
    facts->dev_nodes = *std::move(nodes);
  } else if (absl::IsNotFound(nodes.status())) {
    facts->dev_missing = true;
  } else {
    facts->dev_error = Message(nodes.status());
  }
}

void OpenNamedDevices(const ReadOptions& opt, const std::vector<std::string>& named,
                      DoctorFacts* facts) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const std::string& n : named) {
    if (seen.insert(n).second) names.push_back(n);
  }
  std::vector<VerbsOpen> opened;
  for (size_t i = 0; i < names.size() && i < opt.max_verbs_opens; ++i) {
    opened.push_back(opt.open_verbs(names[i]));
  }
  if (names.size() > opt.max_verbs_opens) {
    // An entry of its own, so that no device that opened reads as failed.
    const size_t skipped = names.size() - opt.max_verbs_opens;
    VerbsOpen rest;
    rest.device = names[opt.max_verbs_opens];
    rest.error = absl::StrCat("not opened: the variables name ", names.size(),
                              " devices and only the first ", opt.max_verbs_opens, " are opened (",
                              skipped, " skipped, from ", rest.device, ")");
    opened.push_back(std::move(rest));
  }
  facts->verbs = std::move(opened);
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Whether `dir`/libibverbs holds a provider: without one, libibverbs lists no device and NCCL
// falls back to sockets.
bool HasProvider(const std::string& dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (absl::StartsWith(name, "lib") && absl::StrContains(name, "-rdmav") &&
        absl::EndsWith(name, ".so")) {
      return true;
    }
  }
  return false;
}

void LookForLibibverbs(const ReadOptions& opt, DoctorFacts* facts) {
  std::string ld_path;
  if (opt.ld_library_path.has_value()) {
    ld_path = *opt.ld_library_path;
  } else if (const char* v = std::getenv("LD_LIBRARY_PATH"); v != nullptr) {
    ld_path = v;
  }
  std::vector<std::string> dirs;
  std::set<std::string> seen;
  auto add = [&](std::string d) {
    if (dirs.size() < kMaxLibDirs && seen.insert(d).second) dirs.push_back(std::move(d));
  };
  for (absl::string_view d : absl::StrSplit(Av(ld_path), ':', absl::SkipEmpty())) {
    add(std::string(d));
  }
  for (const std::string& d : opt.lib_dirs) add(d);
  for (const std::string& d : dirs) {
    const std::string lib = JoinPath(d, "libibverbs.so.1");
    if (!IsRegularFile(lib)) continue;
    const std::string providers = JoinPath(d, "libibverbs");
    if (HasProvider(providers)) {
      facts->libibverbs = true;
      facts->libibverbs_detail = lib;
    } else {
      facts->libibverbs = false;
      facts->libibverbs_detail =
          absl::StrCat(lib, "; no verbs providers in ", providers, " (it would list no device)");
    }
    return;
  }
  facts->libibverbs = false;
  facts->libibverbs_detail =
      absl::StrCat("libibverbs.so.1 is in none of ", absl::StrJoin(dirs, ", "));
}

// The PCI functions the IOMMU and ACS checks look at: the job's GPUs, then the named devices'.
struct Functions {
  std::vector<std::string> addresses;
  std::vector<std::string> bridges;  // On their PCIe paths, deduplicated, bounded.
  bool bridges_cut = false;
};

Functions FunctionsOf(const DoctorFacts& facts, const std::vector<std::string>& named,
                      const std::vector<std::string>& gpus) {
  Functions f;
  std::set<std::string> seen_bridge;
  auto add = [&](const std::string& address, const v1::PciFunction* pci) {
    f.addresses.push_back(address);
    if (pci == nullptr) return;
    for (const std::string& b : pci->path()) {
      if (absl::StartsWith(b, "pci")) continue;  // The root complex ("pci0000:15").
      if (seen_bridge.count(b) > 0) continue;
      if (f.bridges.size() >= kMaxBridges) {
        f.bridges_cut = true;
        return;
      }
      seen_bridge.insert(b);
      f.bridges.push_back(b);
    }
  };
  if (gpus.empty()) {
    if (facts.host.has_value()) {
      for (const v1::Accelerator& a : facts.host->accelerators()) {
        if (!a.management_display()) add(a.pci_address(), &a.pci());
      }
    }
  } else {
    for (const std::string& g : gpus) {
      const v1::PciFunction* pci = nullptr;
      if (facts.host.has_value()) {
        for (const v1::Accelerator& a : facts.host->accelerators()) {
          if (a.pci_address() == g) pci = &a.pci();
        }
      }
      add(g, pci);
    }
  }
  if (facts.host.has_value()) {
    const std::set<std::string> names(named.begin(), named.end());
    for (const v1::RdmaDevice& d : facts.host->rdma_devices()) {
      if (names.count(d.name()) > 0 && !d.pci().address().empty()) {
        add(d.pci().address(), &d.pci());
      }
    }
  }
  return f;
}

void ReadIommu(const HostFs& sys, const Functions& f, DoctorFacts* facts) {
  for (const std::string& bdf : f.addresses) {
    if (!IsBdf(bdf)) continue;
    auto type = sys.ReadFile(JoinPath(PciDir(bdf), "iommu_group/type"));
    if (!type.ok()) continue;
    const std::string t(absl::StripAsciiWhitespace(*type));
    if (!t.empty()) {
      facts->iommu = t;
      return;
    }
  }
  // No group type: class/iommu tells whether there is an IOMMU at all (empty or absent: none).
  // A sysfs without PCI devices is not this host's (or not readable): it cannot tell.
  if (!sys.Exists("bus/pci/devices")) return;
  auto units = sys.ListDir("class/iommu");
  if ((units.ok() && units->empty()) || absl::IsNotFound(units.status())) facts->iommu = "off";
}

void ReadAcs(const HostFs& sys, const Functions& f, DoctorFacts* facts) {
  for (const std::string& bdf : f.bridges) {
    AcsBridge b;
    b.bridge = bdf;
    if (!IsBdf(bdf)) {
      b.error = "not a PCI address";
    } else if (auto config = sys.ReadFile(JoinPath(PciDir(bdf), "config")); !config.ok()) {
      b.error = Message(config.status());
    } else if (auto control = ParseAcsControl(*config); !control.ok()) {
      b.error = Message(control.status());
    } else {
      b.control = *control;
    }
    facts->acs.push_back(std::move(b));
  }
  if (f.bridges_cut) {
    // Said where the judge reads ACS, rather than dropped silently.
    AcsBridge more;
    more.error = absl::StrCat("only the first ", kMaxBridges, " bridges were read");
    facts->acs.push_back(std::move(more));
  }
}

}  // namespace

void ReadFacts(const ReadOptions& opt, const NamedFn& named, const std::vector<std::string>& gpus,
               DoctorFacts* facts) {
  facts->context = opt.context;
  const HostFsImpl sys(opt.sysfs);
  const HostFsImpl proc(opt.procfs);
  if (opt.host != nullptr) {
    facts->host = *opt.host;
  } else if (auto host = Discover(sys, proc); host.ok()) {
    facts->host = *std::move(host);
  } else {
    facts->host_error = Message(host.status());
  }
  const std::vector<std::string> named_devices =
      facts->host && named ? named(*facts->host) : std::vector<std::string>{};
  ReadDevNodes(opt, facts);
  if (opt.open_verbs) OpenNamedDevices(opt, named_devices, facts);
  if (opt.look_for_libibverbs) LookForLibibverbs(opt, facts);
  facts->limits = ReadProcessLimits(opt.proc_self, opt.shm);
  if (auto ifs = ReadInterfaces(); ifs.ok()) facts->interfaces = *std::move(ifs);
  const Functions f = FunctionsOf(*facts, named_devices, gpus);
  ReadIommu(sys, f, facts);
  ReadAcs(sys, f, facts);
}

absl::StatusOr<std::vector<Interface>> ReadInterfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return absl::UnavailableError(absl::StrCat("getifaddrs: ", ErrnoText(errno)));
  }
  std::map<std::string, Interface> by_name;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_name == nullptr) continue;
    Interface& i = by_name[a->ifa_name];
    i.name = a->ifa_name;
    i.up = (a->ifa_flags & IFF_UP) != 0 && (a->ifa_flags & IFF_RUNNING) != 0;
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN];
    if (a->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      if (::inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text)) != nullptr) {
        i.ipv4.emplace_back(text);
      }
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (::inet_ntop(AF_INET6, &sin6->sin6_addr, text, sizeof(text)) != nullptr) {
        i.ipv6.emplace_back(text);
      }
    }
  }
  ::freeifaddrs(list);
  std::vector<Interface> out;
  out.reserve(by_name.size());
  for (auto& [name, i] : by_name) out.push_back(std::move(i));
  std::sort(out.begin(), out.end(),
            [](const Interface& a, const Interface& b) { return NaturalLess(a.name, b.name); });
  return out;
}

}  // namespace fabric::doctor
