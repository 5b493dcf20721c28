#include "cni-hook/plugin.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/common/errno.h"
#include "agent/common/fd.h"
#include "agent/common/ip.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"
#include "agent/fabric/announce/handoff.h"
#include "agent/fabric/announce/link.h"
#include "agent/publish/podrecord/pod_record.h"
#include "cni-hook/envfile.h"
#include "cni-hook/files.h"
#include "cni-hook/routing.h"

namespace fabric::cni {
namespace {

using announce::Job;
using announce::PacketLink;

constexpr int kCheckFailed = 103;  // CHECK: the pod's interface or address is not as ADD left it
constexpr char kChildName[] = "fabric-cni-bg";  // comm of the detached repeater

// One line per event, prefixed with the command and the attachment.
struct Ctx {
  const Env& env;
  const Config& config;
  const PluginOptions& options;
  std::string tag;
};

template <typename... Args>
void Info(const Ctx& c, const Args&... args) {
  Log(LogLevel::kInfo, c.tag, ": ", args...);
}
template <typename... Args>
void Warn(const Ctx& c, const Args&... args) {
  Log(LogLevel::kWarning, c.tag, ": ", args...);
}
template <typename... Args>
void Debug(const Ctx& c, const Args&... args) {
  Log(LogLevel::kDebug, c.tag, ": ", args...);
}

std::string IpText(const announce::Address& a) { return IpToString(a.family, a.addr); }

std::string AddressList(const std::vector<announce::Address>& addrs) {
  std::vector<std::string> s;
  for (const auto& a : addrs) s.push_back(absl::StrCat(IpText(a), "/", a.prefix_len));
  return s.empty() ? "no addresses" : absl::StrJoin(s, ", ");
}

// ---- Small OS helpers ----

bool AgentAccepts(const std::string& path) {
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); 0 when gone.
uint64_t StartTime(pid_t pid) {
  auto stat = ReadText(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return 0;
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos) return 0;
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::string_view(*stat).substr(paren + 2), ' ', absl::SkipEmpty());
  uint64_t t = 0;
  // After "pid (comm) " the fields start at 3 (state): starttime (22) is index 19.
  if (f.size() <= 19 || !absl::SimpleAtoi(f[19], &t)) return 0;
  return t;
}

// ---- The detached repeater ----

struct Recorded {
  pid_t pid = 0;
  uint64_t start_time = 0;
  std::string container_id;
  std::string ifname;
};

std::optional<Recorded> ReadState(const std::string& path) {
  auto text = ReadText(path);
  if (!text) return std::nullopt;
  std::vector<std::string> f = absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  Recorded r;
  if (f.size() != 4 || !absl::SimpleAtoi(f[0], &r.pid) || r.pid <= 1 ||
      !absl::SimpleAtoi(f[1], &r.start_time)) {
    return std::nullopt;
  }
  r.container_id = f[2];
  r.ifname = f[3];
  return r;
}

// SIGTERM to a recorded child, only when it is still that process (same start time and name),
// through a pidfd so the pid cannot be reused between the check and the signal; waits briefly
// for it to be gone so no frame follows DEL.
void StopRecorded(const Ctx& c, const Recorded& r) {
  const UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, r.pid, 0)));
  if (!pidfd.valid()) {
    Debug(c, "repeater ", r.pid, " already gone");
    return;
  }
  auto comm = ReadText(absl::StrCat("/proc/", r.pid, "/comm"));
  const bool same = StartTime(r.pid) == r.start_time && comm &&
                    absl::StripTrailingAsciiWhitespace(*comm) == kChildName;
  if (!same) {
    Debug(c, "pid ", r.pid, " is no longer the repeater: not signalled");
  } else if (syscall(SYS_pidfd_send_signal, pidfd.get(), SIGTERM, nullptr, 0) == 0) {
    pollfd p{pidfd.get(), POLLIN, 0};  // readable once the process has exited
    const bool gone = poll(&p, 1, 500) == 1;
    Info(c, "stopped repeater ", r.pid, gone ? "" : " (still exiting)");
  } else {
    Warn(c, "cannot signal repeater ", r.pid, ": ", ErrnoText(errno));
  }
}

// Closes every fd from 3 up except `keep`.
void CloseAllBut(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned int from = 3;
  for (int k : keep) {
    if (k < 3) continue;
    if (static_cast<unsigned int>(k) > from) syscall(SYS_close_range, from, k - 1, 0);
    from = static_cast<unsigned int>(k) + 1;
  }
  syscall(SYS_close_range, from, ~0U, 0);
}

// Double fork + setsid: the repeater is reparented away, holds none of our stdio (libcni waits
// for EOF on stdout and stderr) and no fd but its sockets. Returns its pid.
absl::StatusOr<pid_t> SpawnRepeater(std::vector<Job*> jobs, const std::vector<int>& keep) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    return Error(kIoFailure, absl::StrCat("pipe: ", ErrnoText(errno)));
  }
  UniqueFd read_end(pipefd[0]), write_end(pipefd[1]);
  const pid_t first = fork();
  if (first < 0) return Error(kIoFailure, absl::StrCat("fork: ", ErrnoText(errno)));
  if (first == 0) {
    // The child ends in _exit: no destructor runs here, so each end is closed explicitly.
    read_end.reset();
    setsid();
    const pid_t second = fork();
    if (second != 0) _exit(second < 0 ? 1 : 0);
    // Named before the parent learns the pid: DEL and GC only signal a process of this name.
    prctl(PR_SET_NAME, kChildName, 0, 0, 0);
    const pid_t self = getpid();
    (void)!write(write_end.get(), &self, sizeof(self));
    write_end.reset();
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    CloseAllBut(keep);
    (void)!chdir("/");
    if (jobs.size() == 1) {
      announce::RunToCompletion(*jobs[0]);
    } else {
      std::vector<std::thread> threads;
      for (Job* j : jobs) threads.emplace_back([j] { announce::RunToCompletion(*j); });
      for (auto& t : threads) t.join();
    }
    _exit(0);
  }
  write_end.reset();  // so that the read sees EOF if the repeater dies first
  pid_t child = -1;
  ssize_t n;
  do {
    n = read(read_end.get(), &child, sizeof(child));
  } while (n < 0 && errno == EINTR);
  read_end.reset();
  int st;
  while (waitpid(first, &st, 0) < 0 && errno == EINTR) {
  }
  if (n != sizeof(child) || child <= 0) return Error(kIoFailure, "fork of the repeater failed");
  return child;
}

// ---- Commands ----

struct Prepared {
  PodInterface pod;
  std::string bus_info;
  int parent_ifindex = 0;  // A macvlan's lower device, in the host's namespace.
  std::unique_ptr<Job> job;
  PacketLink* link = nullptr;  // owned by job
  bool handed_off = false;
};

absl::Status NetnsError(const Ctx& c, const absl::Status& s) {
  if (s.code() == absl::StatusCode::kNotFound) {
    return Error(kInvalidEnv,
                 absl::StrCat("CNI_NETNS ", c.env.netns, ": no such network namespace"),
                 Sv(s.message()));
  }
  return Error(kIoFailure, absl::StrCat("cannot enter CNI_NETNS ", c.env.netns), Sv(s.message()));
}

// Inside the pod's netns: the interfaces' facts and a packet socket on each, then the pod routing
// steps (ARP sysctls, source routing), all before the first announcement.
absl::StatusOr<std::vector<Prepared>> Prepare(const Ctx& c, std::vector<PodInterface> pods,
                                              absl::Time start, PodRoutingAdded* routed) {
  auto ns = announce::ScopedNetns::Enter(c.env.netns);
  if (!ns.ok()) return NetnsError(c, ns.status());
  std::vector<Prepared> out;
  for (PodInterface& pod : pods) {
    // prevResult has the addresses: only the ifindex and MAC are needed (no address dump).
    auto target = announce::DescribeInterface(pod.name, /*with_addresses=*/false);
    if (!target.ok()) {
      if (target.status().code() == absl::StatusCode::kNotFound) {
        return Error(kInvalidConfig,
                     absl::StrCat("interface ", pod.name, " of prevResult is not in ", c.env.netns),
                     Sv(target.status().message()));
      }
      return Error(kIoFailure,
                   absl::StrCat("interface ", pod.name, ": ", target.status().message()));
    }
    target->addresses = pod.addresses;  // prevResult's, with their gateways
    bool has_ipv6 = false;
    for (const announce::Address& a : pod.addresses) has_ipv6 |= a.family == AF_INET6;
    // The DAD-state socket only matters for IPv6 NAs.
    auto link = PacketLink::Open(target->ifindex, has_ipv6 && c.config.plan.ipv6);
    if (!link.ok()) {
      return Error(kAnnounceFailed, absl::StrCat("cannot open a packet socket on ", pod.name, ": ",
                                                 link.status().message()));
    }
    Prepared p;
    if (!c.config.env_dir.empty()) p.bus_info = BusInfo(pod.name);
    p.parent_ifindex = target->parent_ifindex;
    p.link = link->get();
    p.job = std::make_unique<Job>(*target, c.config.plan, std::move(*link), start);
    p.pod = std::move(pod);
    out.push_back(std::move(p));
  }
  std::vector<PodInterface> handled;
  for (const Prepared& p : out) handled.push_back(p.pod);
  auto r = AddPodRouting(c.env, c.config, c.config.sysfs_root, handled);
  if (!r.ok()) return r.status();
  *routed = std::move(*r);
  return out;
}

// The first round of each interface, before ADD returns. Only a conflict probe makes this wait
// (bounded by its timeout); gateway priming happens in the repeats.
absl::Status FirstRound(const Ctx& c, std::vector<Prepared>& prepared) {
  for (Prepared& p : prepared) {
    Job& job = *p.job;
    absl::Time next = job.Step(announce::MonotonicNow());
    // Whatever is due at once too (a one-round schedule then needs no repeater).
    for (int i = 0; i < 4 && !job.done() && next <= announce::MonotonicNow(); ++i) {
      next = job.Step(announce::MonotonicNow());
    }
    const absl::Time deadline =
        announce::MonotonicNow() + c.config.plan.conflict_timeout + absl::Milliseconds(50);
    while (c.config.plan.conflict_probe && !job.first_round_sent() && !job.done() &&
           job.report().conflicts.empty()) {
      const absl::Time now = announce::MonotonicNow();
      if (now >= deadline) break;
      const absl::Duration wait = std::min(next, deadline) - now;
      pollfd pfd{job.poll_fd(), POLLIN, 0};
      poll(pfd.fd >= 0 ? &pfd : nullptr, pfd.fd >= 0 ? 1 : 0,
           static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1)))));
      next = job.Step(announce::MonotonicNow());
    }
    const announce::Report& r = job.report();
    if (!r.conflicts.empty()) {
      std::vector<std::string> who;
      for (const auto& cf : r.conflicts) {
        who.push_back(
            absl::StrCat(cf.address, " (claimed by ", announce::MacString(cf.owner), ")"));
      }
      return Error(kAddressConflict, absl::StrCat("address conflict on ", p.pod.name, ": ",
                                                  absl::StrJoin(who, ", ")));
    }
    if (r.send_errors > 0) Warn(c, p.pod.name, ": first round: ", r.last_error);
    Info(c, "announced ", AddressList(p.pod.addresses), " on ", p.pod.name, " (", r.arp_sent,
         " ARP, ", r.na_sent, " NA)");
  }
  return absl::OkStatus();
}

void CancelAgent(const Ctx& c, absl::Duration timeout) {
  struct stat st;
  if (stat(c.config.agent_socket.c_str(), &st) != 0) return;  // no agent: nothing to cancel
  announce::Handoff h;
  h.kind = announce::Handoff::Kind::kCancel;
  h.container_id = c.env.container_id;
  h.netns = c.env.netns;
  h.target.ifname = c.env.ifname;  // Only this attachment: other networks of the pod stay.
  if (absl::Status s = announce::SendHandoff(c.config.agent_socket, h, {}, timeout); !s.ok()) {
    Debug(c, "cancel at the agent: ", s.message());
  }
}

std::string StatePath(const Ctx& c) {
  return absl::StrCat(c.config.state_dir, "/", StateFileName(c.env.container_id, c.env.ifname));
}

std::string EnvPath(const Config& config, std::string_view container_id) {
  return absl::StrCat(config.env_dir, "/", Av(container_id), ".env");
}

std::string RecordsDir(const Config& config) {
  return absl::StrCat(config.env_dir, "/", podrecord::kDirName);
}

// Removes this attachment's pod records (whatever namespace inode they were written under: at DEL
// the namespace may be gone); `keep` is the one just written.
void RemoveRecords(const Ctx& c, const std::string& keep = "") {
  const std::string dir = RecordsDir(c.config);
  for (const std::string& name : ListDir(dir)) {
    if (name == keep || !podrecord::IsRecordOf(name, c.env.container_id, c.env.ifname)) continue;
    const std::string path = absl::StrCat(dir, "/", name);
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
      Warn(c, "remove ", path, ": ", ErrnoText(errno));
  }
}

// Stops what ADD started for this attachment: the agent's jobs, a repeater, the files.
void Teardown(const Ctx& c) {
  CancelAgent(c, c.options.cancel_timeout);
  const std::string state = StatePath(c);
  if (auto r = ReadState(state)) StopRecorded(c, *r);
  if (unlink(state.c_str()) != 0 && errno != ENOENT) {
    Warn(c, "remove ", state, ": ", ErrnoText(errno));
  }
  if (!c.config.env_dir.empty()) {
    const std::string env = EnvPath(c.config, c.env.container_id);
    if (unlink(env.c_str()) != 0 && errno != ENOENT)
      Warn(c, "remove ", env, ": ", ErrnoText(errno));
    RemoveRecords(c);
  }
}

absl::Status HandOff(const Ctx& c, std::vector<Prepared>& prepared, const absl::Time start) {
  std::vector<Job*> rest;
  std::vector<int> keep;
  absl::Status agent_error;
  for (Prepared& p : prepared) {
    if (p.job->done()) continue;  // a schedule of one round
    std::vector<int> fds = {p.link->packet_fd()};
    if (p.link->netlink_fd() >= 0) fds.push_back(p.link->netlink_fd());
    if (agent_error.ok()) {
      announce::Handoff h;
      h.container_id = c.env.container_id;
      h.netns = c.env.netns;
      h.target = p.job->target();
      h.plan = c.config.plan;
      h.start = start;
      h.first_done = p.job->first_round_sent();
      agent_error = announce::SendHandoff(c.config.agent_socket, h, fds, c.options.agent_timeout);
      if (agent_error.ok()) {
        p.handed_off = true;
        Debug(c, p.pod.name, ": repeats handed to the agent");
        continue;
      }
    }
    rest.push_back(p.job.get());
    keep.insert(keep.end(), fds.begin(), fds.end());
  }
  if (rest.empty()) {
    if (!prepared.empty()) Info(c, "repeats handed to the agent");
    return absl::OkStatus();
  }
  if (c.config.require_agent) {
    CancelAgent(c, c.options.cancel_timeout);  // undo a partial hand-off
    return Error(kTryAgain,
                 absl::StrCat("the agent at ", c.config.agent_socket, " is not available"),
                 Sv(agent_error.message()));
  }
  auto pid = SpawnRepeater(rest, keep);
  if (!pid.ok()) return pid.status();
  const uint64_t started = StartTime(*pid);
  if (started == 0) {
    Info(c, "repeater ", *pid, " already finished");
    return absl::OkStatus();
  }
  Recorded r{*pid, started, c.env.container_id, c.env.ifname};
  absl::Status written = WriteAtomically(
      c.config.state_dir, StateFileName(c.env.container_id, c.env.ifname),
      absl::StrCat(r.pid, " ", r.start_time, " ", r.container_id, " ", r.ifname, "\n"));
  if (!written.ok()) {
    StopRecorded(c, r);  // nothing may run that DEL cannot find
    return written;
  }
  Info(c, "agent not available (", agent_error.message(), "): repeats run in detached pid ", *pid);
  return absl::OkStatus();
}

// The env file (<envDir>/<containerid>.env) and the pod record (<envDir>/pods/), which the pod's
// fabric-env finds by its network namespace's inode.
absl::Status WriteEnvFile(const Ctx& c, const std::vector<Prepared>& prepared) {
  std::vector<EnvInterface> ifaces;
  for (const Prepared& p : prepared) {
    std::string bus = p.bus_info;
    // A macvlan has no bus of its own: its lower device's (a PF or VF) carries the RDMA port
    // whose GID table holds the pod's address. Looked up here, in the host's namespace.
    char lower[IF_NAMESIZE] = {};
    if (bus.empty() && p.parent_ifindex > 0 &&
        if_indextoname(static_cast<unsigned>(p.parent_ifindex), lower) != nullptr) {
      bus = BusInfo(lower);
      if (!bus.empty()) Debug(c, p.pod.name, ": lower device ", lower, " at ", bus);
    }
    ifaces.push_back(
        {p.pod.name, bus, bus.empty() ? std::string(lower) : "", p.pod.addresses, p.pod.mac});
  }
  const std::vector<RdmaMatch> rdma = FindRdma(c.config.sysfs_root, ifaces);
  FABRIC_RETURN_IF_ERROR(
      WriteAtomically(c.config.env_dir, c.env.container_id + ".env", RenderEnvFile(ifaces, rdma)));
  podrecord::PodRecord record = PodRecordOf(ifaces, rdma);
  record.pod_uid = PodUid(c.env);
  record.container_id = c.env.container_id;
  record.ifname = c.env.ifname;
  record.netns = c.env.netns;
  const std::optional<uint64_t> inode = InodeOf(c.env.netns);
  if (!inode) {
    return Error(kIoFailure, absl::StrCat("stat CNI_NETNS ", c.env.netns, ": ", ErrnoText(errno)));
  }
  record.netns_inode = *inode;
  const std::string name = podrecord::FileName(*inode, c.env.container_id, c.env.ifname);
  FABRIC_RETURN_IF_ERROR(MakeDirOwnedLike(RecordsDir(c.config), c.config.env_dir));
  FABRIC_RETURN_IF_ERROR(
      WriteAtomically(RecordsDir(c.config), name, podrecord::RecordJson(record)));
  RemoveRecords(c, name);  // A repeated ADD in a new namespace leaves one record.
  std::vector<std::string> devs;
  for (const RdmaMatch& m : rdma) devs.push_back(absl::StrCat(m.device, ":", m.port));
  Info(c, "wrote ", EnvPath(c.config, c.env.container_id), " and ", RecordsDir(c.config), "/", name,
       " (", devs.empty() ? "no RDMA device" : absl::StrJoin(devs, ","), ")");
  return absl::OkStatus();
}

absl::Status Add(const Ctx& c, std::string* out) {
  auto pods = PodInterfaces(*c.config.prev_result, c.config.cni_version);
  if (!pods.ok()) return pods.status();
  if (pods->empty()) Info(c, "prevResult has no container interface: nothing to announce");
  const absl::Time start = announce::MonotonicNow();
  PodRoutingAdded routed;
  auto prepared = Prepare(c, std::move(*pods), start, &routed);
  if (!prepared.ok()) return prepared.status();
  absl::Status s = FirstRound(c, *prepared);
  if (s.ok()) s = HandOff(c, *prepared, start);
  if (s.ok() && !c.config.env_dir.empty()) {
    s = WriteEnvFile(c, *prepared);
    if (!s.ok()) Teardown(c);
  }
  if (!s.ok()) {
    UndoPodRouting(c.env, c.config, routed);  // nothing half-done stays in the pod
    return s;
  }
  *out = ResultJson(c.config);
  return absl::OkStatus();
}

absl::Status Del(const Ctx& c) {
  Teardown(c);
  std::vector<std::string> ifnames = {c.env.ifname};
  if (c.config.prev_result) {
    auto pods = PodInterfaces(*c.config.prev_result, c.config.cni_version);
    for (const PodInterface& p : pods.ok() ? *pods : std::vector<PodInterface>{}) {
      ifnames.push_back(p.name);
    }
  }
  FABRIC_RETURN_IF_ERROR(DelPodRouting(c.env, c.config, ifnames));
  Info(c, "deleted");
  return absl::OkStatus();
}

absl::Status Check(const Ctx& c) {
  auto pods = PodInterfaces(*c.config.prev_result, c.config.cni_version);
  if (!pods.ok()) return pods.status();
  {
    auto ns = announce::ScopedNetns::Enter(c.env.netns);
    if (!ns.ok()) return NetnsError(c, ns.status());
    for (const PodInterface& pod : *pods) {
      auto t = announce::DescribeInterface(pod.name);
      if (!t.ok()) {
        return Error(kCheckFailed, absl::StrCat("interface ", pod.name, " is not in ", c.env.netns),
                     Sv(t.status().message()));
      }
      for (const announce::Address& want : pod.addresses) {
        const bool held = std::any_of(t->addresses.begin(), t->addresses.end(), [&](auto& a) {
          return a.family == want.family && std::memcmp(&a.addr, &want.addr, sizeof(a.addr)) == 0;
        });
        if (!held) {
          return Error(kCheckFailed, absl::StrCat(pod.name, " no longer holds ", IpText(want), "/",
                                                  want.prefix_len));
        }
      }
    }
    if (absl::Status s = CheckPodRouting(c.env, c.config, *pods); !s.ok()) {
      return Error(kCheckFailed, absl::StrCat("pod routing: ", s.message()));
    }
  }
  if (!c.config.env_dir.empty()) {
    const std::string env = EnvPath(c.config, c.env.container_id);
    if (access(env.c_str(), F_OK) != 0) {
      return Error(kCheckFailed, absl::StrCat("env file ", env, " is missing"));
    }
  }
  if (c.config.require_agent && !AgentAccepts(c.config.agent_socket)) {
    return Error(kTryAgain,
                 absl::StrCat("the agent at ", c.config.agent_socket, " is not available"));
  }
  return absl::OkStatus();
}

absl::Status StatusCommand(const Ctx& c) {
  if (c.config.require_agent && !AgentAccepts(c.config.agent_socket)) {
    return Error(kNotAvailable, absl::StrCat("the agent at ", c.config.agent_socket,
                                             " does not accept connections"));
  }
  return absl::OkStatus();
}

absl::Status Gc(const Ctx& c) {
  if (!c.config.valid_attachments) {
    Warn(c, "no cni.dev/valid-attachments: nothing collected");
    return absl::OkStatus();
  }
  std::set<std::pair<std::string, std::string>> valid;
  std::set<std::string> valid_ids;
  for (const Attachment& a : *c.config.valid_attachments) {
    valid.emplace(a.container_id, a.ifname);
    valid_ids.insert(a.container_id);
  }
  int removed = 0;
  std::set<std::string> stale_ids;
  for (const std::string& name : ListDir(c.config.state_dir)) {
    if (!absl::EndsWith(name, ".pid")) continue;
    const std::string path = absl::StrCat(c.config.state_dir, "/", name);
    auto r = ReadState(path);
    if (r && valid.count({r->container_id, r->ifname}) > 0) continue;
    if (r) {
      StopRecorded(c, *r);
      stale_ids.insert(r->container_id);
    }
    if (unlink(path.c_str()) == 0) ++removed;
  }
  if (!c.config.env_dir.empty()) {
    for (const std::string& name : ListDir(c.config.env_dir)) {
      if (!absl::EndsWith(name, ".env")) continue;
      const std::string id = name.substr(0, name.size() - 4);
      if (valid_ids.count(id) > 0) continue;
      stale_ids.insert(id);
      if (unlink(absl::StrCat(c.config.env_dir, "/", name).c_str()) == 0) ++removed;
    }
  }
  if (!c.config.env_dir.empty()) {
    const std::string dir = RecordsDir(c.config);
    for (const std::string& name : ListDir(dir)) {
      auto r = ReadText(absl::StrCat(dir, "/", name));
      auto record = r ? podrecord::ParseRecord(*r) : absl::NotFoundError("gone");
      // A record that does not parse is nobody's: removed too.
      if (record.ok() && valid.count({record->container_id, record->ifname}) > 0) continue;
      if (record.ok()) stale_ids.insert(record->container_id);
      if (unlink(absl::StrCat(dir, "/", name).c_str()) == 0) ++removed;
    }
  }
  removed += GcPodRouting(c.config, valid);
  for (const std::string& id : stale_ids) {
    Env env = c.env;
    env.container_id = id;
    CancelAgent(Ctx{env, c.config, c.options, c.tag}, c.options.cancel_timeout);
  }
  Info(c, "collected ", removed, " stale files of ", stale_ids.size(), " containers");
  return absl::OkStatus();
}

int Fail(const Env* env, std::string_view version, const absl::Status& s, std::string* out) {
  *out = ErrorJson(version, s);
  const std::string tag =
      env == nullptr ? ""
                     : absl::StrCat(Av(CommandName(env->command)), " ", env->container_id,
                                    env->container_id.empty() ? "" : " ", env->ifname, ": ");
  const std::string details = DetailsOf(s);
  Log(LogLevel::kError, tag, "error ", CodeOf(s), ": ", s.message(), details.empty() ? "" : " (",
      details, details.empty() ? "" : ")");
  return 1;
}

}  // namespace

int RunPlugin(const EnvMap& env_map, std::string_view stdin_bytes, const PluginOptions& options,
              std::string* out) {
  out->clear();
  InitLog("fabric-cni", LogLevel::kInfo);
  const std::string version = PeekVersion(stdin_bytes);
  auto env = ParseEnv(env_map);
  if (!env.ok()) return Fail(nullptr, version, env.status(), out);
  if (env->command == Command::kVersion) {
    *out = VersionJson();
    return 0;
  }
  auto config = ParseConfig(stdin_bytes, env->command);
  if (!config.ok()) return Fail(&*env, version, config.status(), out);
  if (config->log_level) InitLog("fabric-cni", *config->log_level);
  std::string tag(CommandName(env->command));
  if (!env->container_id.empty()) absl::StrAppend(&tag, " ", env->container_id, " ", env->ifname);
  Ctx c{*env, *config, options, tag};
  const absl::Time t0 = absl::Now();
  absl::Status s;
  switch (env->command) {
    case Command::kAdd:
      s = Add(c, out);
      break;
    case Command::kDel:
      s = Del(c);
      break;
    case Command::kCheck:
      s = Check(c);
      break;
    case Command::kStatus:
      s = StatusCommand(c);
      break;
    case Command::kGc:
      s = Gc(c);
      break;
    case Command::kVersion:
      break;
  }
  if (!s.ok()) return Fail(&*env, config->cni_version, s, out);
  Debug(c, "done in ", absl::FormatDuration(absl::Now() - t0));
  return 0;
}

}  // namespace fabric::cni
