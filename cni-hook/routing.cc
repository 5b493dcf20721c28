#include "cni-hook/routing.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"
#include "agent/fabric/announce/link.h"
#include "cni-hook/envfile.h"
#include "cni-hook/files.h"

namespace fabric::cni {
namespace {

using announce::RoutingConfig;
using announce::RoutingOsImpl;
using announce::Undo;

constexpr char kHeader[] = "fabric-cni routes v1";

struct Record {
  std::string container_id, ifname, netns;
  std::vector<std::pair<std::string, uint32_t>> tables;  // interface, table
  std::vector<Undo::Sysctl> sysctls;                     // values before ADD
};

std::string RecordPath(const Config& config, std::string_view id, std::string_view ifname) {
  return absl::StrCat(config.state_dir, "/", RoutingFileName(id, ifname));
}

std::string Render(const Record& r) {
  std::string s = absl::StrCat(kHeader, "\nattachment ", r.container_id, " ", r.ifname, "\nnetns ",
                               r.netns, "\n");
  for (const auto& [ifname, table] : r.tables)
    absl::StrAppend(&s, "table ", ifname, " ", table, "\n");
  for (const Undo::Sysctl& c : r.sysctls) {
    absl::StrAppend(&s, "sysctl ", c.ifname, " ", c.key, " ", c.old_value, "\n");
  }
  return s;
}

std::optional<Record> ReadRecord(const std::string& path) {
  auto text = ReadText(path);
  if (!text) return std::nullopt;
  std::vector<std::string> lines = absl::StrSplit(*text, '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != kHeader) return std::nullopt;
  Record r;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f = absl::StrSplit(lines[i], ' ', absl::SkipEmpty());
    uint32_t table = 0;
    if (f.size() == 3 && f[0] == "attachment") {
      r.container_id = f[1];
      r.ifname = f[2];
    } else if (f.size() >= 2 && f[0] == "netns") {
      r.netns = lines[i].substr(6);
    } else if (f.size() == 3 && f[0] == "table" && absl::SimpleAtoi(f[2], &table)) {
      r.tables.emplace_back(f[1], table);
    } else if (f.size() == 4 && f[0] == "sysctl") {
      r.sysctls.push_back({f[1], f[2], f[3]});
    }
  }
  if (r.container_id.empty()) return std::nullopt;
  return r;
}

absl::Status OsError(const std::string& ifname, const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return Error(kIoFailure, absl::StrCat("interface ", ifname, " disappeared during ADD"),
                   Sv(s.message()));
    case absl::StatusCode::kPermissionDenied:
      return Error(kIoFailure, absl::StrCat("pod routing on ", ifname, ": ", s.message()));
    default:
      return Error(kPodRoutingFailed, absl::StrCat("pod routing on ", ifname, ": ", s.message()));
  }
}

// Whether ADD applies to `pod`, and the interfaces in the same subnet (auto mode only).
absl::StatusOr<bool> Wanted(announce::RoutingOs& os, const Config& config,
                            const std::string& sysfs_root, const PodInterface& pod,
                            std::vector<std::string>* siblings) {
  if (config.routing.mode == RoutingConfig::Mode::kOn) return true;
  auto sib = announce::SameSubnetSiblings(os, pod.name, pod.addresses);
  if (!sib.ok()) return sib.status();
  *siblings = std::move(*sib);
  if (!siblings->empty()) return true;
  return !FindRdma(sysfs_root, {{pod.name, BusInfo(pod.name), "", pod.addresses, pod.mac}}).empty();
}

// Runs `f` inside `netns`; false when the namespace is gone (NotFound), with a log line for any
// other failure to enter.
template <typename F>
bool InNetns(const std::string& netns, const char* what, F f) {
  auto ns = announce::ScopedNetns::Enter(netns);
  if (!ns.ok()) {
    if (ns.status().code() != absl::StatusCode::kNotFound) {
      Log(LogLevel::kWarning, what, ": ", ns.status().message());
    }
    return false;
  }
  f();
  return true;
}

}  // namespace

absl::StatusOr<PodRoutingAdded> AddPodRouting(const Env& env, const Config& config,
                                              const std::string& sysfs_root,
                                              const std::vector<PodInterface>& pods) {
  PodRoutingAdded added;
  if (config.routing.mode == RoutingConfig::Mode::kOff || pods.empty()) return added;
  const absl::Time t0 = absl::Now();
  auto os = RoutingOsImpl::Open();
  if (!os.ok()) return Error(kIoFailure, "pod routing: route netlink", Sv(os.status().message()));
  const std::string path = RecordPath(config, env.container_id, env.ifname);
  std::optional<Record> old = ReadRecord(path);
  Record rec{env.container_id, env.ifname, env.netns, {}, old ? old->sysctls : Undo{}.sysctls};
  Undo& undo = added.undo;
  absl::Status failed;
  for (const PodInterface& pod : pods) {
    std::vector<std::string> siblings;
    auto want = Wanted(**os, config, sysfs_root, pod, &siblings);
    if (!want.ok()) {
      failed = OsError(pod.name, want.status());
      break;
    }
    if (!*want) {
      Log(LogLevel::kDebug, "pod routing: ", pod.name,
          ": no RDMA device, no sibling in its subnet");
      continue;
    }
    if (absl::Status s = announce::SetArpSysctls(**os, pod.name, &undo); !s.ok()) {
      failed = OsError(pod.name, s);
      break;
    }
    for (const std::string& sib : siblings) {
      if (absl::Status s = announce::SetArpSysctls(**os, sib, &undo); !s.ok()) {
        Log(LogLevel::kWarning, "pod routing: ARP sysctls on ", sib, ": ", s.message());
      }
    }
    auto table = announce::ApplySourceRouting(**os, config.routing,
                                              {pod.name, pod.addresses, pod.routes}, &undo);
    if (table.status().code() == absl::StatusCode::kFailedPrecondition) {
      Log(LogLevel::kInfo, "pod routing: ", table.status().message());
      continue;
    }
    if (!table.ok()) {
      failed = OsError(pod.name, table.status());
      break;
    }
    rec.tables.emplace_back(pod.name, *table);
    Log(LogLevel::kInfo, "pod routing: ", pod.name, ": arp_ignore=1 arp_announce=2 rp_filter=2",
        siblings.empty() ? "" : absl::StrCat(" (also on ", absl::StrJoin(siblings, ","), ")"),
        ", table ", *table);
  }
  // Only the attachment's own interfaces: a sibling's sysctls serve the sibling as long as it
  // lives, so this attachment's DEL must not turn them back.
  for (const Undo::Sysctl& c : undo.sysctls) {
    const bool own = std::any_of(pods.begin(), pods.end(),
                                 [&](const PodInterface& p) { return p.name == c.ifname; });
    if (!own) continue;
    const bool known = std::any_of(rec.sysctls.begin(), rec.sysctls.end(), [&](const auto& o) {
      return o.ifname == c.ifname && o.key == c.key;
    });
    if (!known) rec.sysctls.push_back(c);
  }
  if (failed.ok() && (!rec.tables.empty() || !rec.sysctls.empty())) {
    failed = WriteAtomically(config.state_dir, RoutingFileName(env.container_id, env.ifname),
                             Render(rec));
    added.new_record = !old && failed.ok();
  }
  if (!failed.ok()) {
    if (absl::Status s = announce::Revert(**os, undo); !s.ok()) {
      Log(LogLevel::kWarning, "pod routing: rollback: ", s.message());
    }
    return failed;
  }
  Log(LogLevel::kDebug, "pod routing: done in ", absl::FormatDuration(absl::Now() - t0));
  return added;
}

void UndoPodRouting(const Env& env, const Config& config, const PodRoutingAdded& added) {
  if (!added.undo.empty()) {
    InNetns(env.netns, "pod routing rollback", [&] {
      auto os = RoutingOsImpl::Open();
      absl::Status s = os.ok() ? announce::Revert(**os, added.undo) : os.status();
      if (!s.ok()) Log(LogLevel::kWarning, "pod routing rollback: ", s.message());
    });
  }
  if (added.new_record) unlink(RecordPath(config, env.container_id, env.ifname).c_str());
}

absl::Status DelPodRouting(const Env& env, const Config& config,
                           const std::vector<std::string>& ifnames) {
  const std::string path = RecordPath(config, env.container_id, env.ifname);
  std::optional<Record> rec = ReadRecord(path);
  if (!rec && config.routing.mode == RoutingConfig::Mode::kOff) return absl::OkStatus();
  const std::string netns = !env.netns.empty() ? env.netns : rec ? rec->netns : "";
  absl::Status result;
  if (!netns.empty()) {
    InNetns(netns, "pod routing DEL", [&] {
      auto os = RoutingOsImpl::Open();
      if (!os.ok()) {
        result = Error(kIoFailure, "pod routing: route netlink", Sv(os.status().message()));
        return;
      }
      std::set<uint32_t> tables;
      std::vector<std::string> names = ifnames;
      if (rec) {
        for (const auto& [ifname, table] : rec->tables) {
          tables.insert(table);
          names.push_back(ifname);
        }
      }
      auto n = announce::RemoveSourceRouting(**os, config.routing, tables, names);
      if (!n.ok()) {
        result = Error(kPodRoutingFailed, "pod routing: removing rules and routes",
                       Sv(n.status().message()));
        return;
      }
      if (rec) {
        for (const Undo::Sysctl& c : rec->sysctls) {
          absl::Status s = (*os)->WriteSysctl(c.ifname, c.key, c.old_value);
          if (!s.ok() && s.code() != absl::StatusCode::kNotFound) {
            Log(LogLevel::kWarning, "pod routing DEL: ", s.message());
          }
        }
      }
      if (*n > 0) Log(LogLevel::kInfo, "pod routing: removed ", *n, " rules and routes");
    });
  }
  if (result.ok() && unlink(path.c_str()) != 0 && errno != ENOENT) {
    Log(LogLevel::kWarning, "remove ", path, ": ", ErrnoText(errno));
  }
  return result;
}

absl::Status CheckPodRouting(const Env& env, const Config& config,
                             const std::vector<PodInterface>& pods) {
  std::optional<Record> rec = ReadRecord(RecordPath(config, env.container_id, env.ifname));
  if (!rec) {
    const bool expected =
        config.routing.mode == RoutingConfig::Mode::kOn &&
        std::any_of(pods.begin(), pods.end(), [](const PodInterface& p) {
          return std::any_of(p.addresses.begin(), p.addresses.end(), announce::Routable);
        });
    if (expected) return absl::NotFoundError("no record of the pod routing ADD set up");
    return absl::OkStatus();
  }
  auto os = RoutingOsImpl::Open();
  if (!os.ok()) return os.status();
  for (const auto& [ifname, table] : rec->tables) {
    announce::PodIface iface{ifname, {}, {}};
    for (const PodInterface& p : pods) {
      if (p.name == ifname) iface.addresses = p.addresses;
    }
    FABRIC_RETURN_IF_ERROR(announce::VerifySourceRouting(**os, config.routing, iface, table));
    for (const char* key : {"arp_ignore", "arp_announce"}) {
      auto v = (*os)->ReadSysctl(ifname, key);
      if (!v.ok()) return v.status();
      if (*v != (absl::string_view(key) == "arp_ignore" ? "1" : "2")) {
        return absl::FailedPreconditionError(
            absl::StrCat("net.ipv4.conf.", ifname, ".", key, " is ", *v, " again"));
      }
    }
  }
  return absl::OkStatus();
}

int GcPodRouting(const Config& config, const std::set<std::pair<std::string, std::string>>& valid) {
  int removed = 0;
  for (const std::string& name : ListDir(config.state_dir)) {
    if (!absl::EndsWith(name, ".routes")) continue;
    const std::string path = absl::StrCat(config.state_dir, "/", name);
    std::optional<Record> rec = ReadRecord(path);
    if (rec && valid.count({rec->container_id, rec->ifname}) > 0) continue;
    if (rec && !rec->netns.empty()) {
      // Only the recorded tables: the interface names may belong to a new attachment by now.
      InNetns(rec->netns, "pod routing GC", [&] {
        std::set<uint32_t> tables;
        for (const auto& t : rec->tables) tables.insert(t.second);
        auto os = RoutingOsImpl::Open();
        auto n = os.ok() ? announce::RemoveSourceRouting(**os, config.routing, tables, {})
                         : absl::StatusOr<int>(os.status());
        if (!n.ok()) Log(LogLevel::kWarning, "pod routing GC: ", n.status().message());
      });
    }
    if (unlink(path.c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace fabric::cni
