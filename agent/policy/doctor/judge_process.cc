// Limits and fallbacks: what the job's process registers memory and shares buffers under, and the
// variables that make NCCL or UCX leave RDMA however good the devices are.
#include <strings.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/excerpt.h"
#include "agent/policy/doctor/judge_internal.h"

namespace fabric::doctor::judge_internal {
namespace {

constexpr uint64_t kMiB = 1 << 20;
// Below this RLIMIT_MEMLOCK, ibv_reg_mr of NCCL's buffers fails outright (Docker's default is
// 64 KiB, many distributions' 8 MiB).
constexpr uint64_t kMemlockFloor = 64 * kMiB;
// NCCL's shared-memory segments (intra-node SHM transport, proxy state) per local GPU; Docker's
// 64 MiB default fails 8-GPU jobs with "Error while creating shared memory segment".
constexpr uint64_t kShmPerGpu = 128 * kMiB;
constexpr uint64_t kShmFloor = 256 * kMiB;
// NCCL opens sockets per peer and channel; 1024 runs out in large jobs.
constexpr uint64_t kNofileFloor = 4096;

void JudgeMemlock(Ctx& c, const ProcessLimits& l) {
  if (l.cap_ipc_lock.value_or(false)) {
    Add(c, "limits", "memlock", v1::SEVERITY_OK, "RLIMIT_MEMLOCK",
        "CAP_IPC_LOCK: memory registration is not limited");
    return;
  }
  if (!l.memlock_soft) {
    Add(c, "limits", "memlock", v1::SEVERITY_OK, "RLIMIT_MEMLOCK", "unlimited");
    return;
  }
  const uint64_t m = *l.memlock_soft;
  v1::DoctorCheck* k =
      Add(c, "limits", "memlock", m < kMemlockFloor ? v1::SEVERITY_CRITICAL : v1::SEVERITY_WARNING,
          "RLIMIT_MEMLOCK",
          absl::StrCat("locked memory is limited to ", Bytes(m),
                       m < kMemlockFloor ? ": ibv_reg_mr of NCCL's buffers fails"
                                         : ": large registrations (UCX, NIXL, NVSHMEM) may fail"));
  k->add_evidence(absl::StrCat("RLIMIT_MEMLOCK soft ", m, " bytes; CAP_IPC_LOCK ",
                               l.cap_ipc_lock ? "not held" : "unreadable"));
  k->set_fix(
      "raise it to unlimited (--ulimit memlock=-1, LimitMEMLOCK=infinity, Slurm's "
      "PropagateResourceLimits) or grant IPC_LOCK (Kubernetes: securityContext.capabilities)");
}

void JudgeShm(Ctx& c, const ProcessLimits& l) {
  const uint64_t gpus = std::max<size_t>(c.f.gpus.size(), 1);
  const uint64_t need = std::max(kShmFloor, kShmPerGpu * gpus);
  const std::string fix = absl::StrCat("give /dev/shm at least ", Bytes(need),
                                       " (--shm-size, or a memory-backed emptyDir at /dev/shm)");
  if (l.shm && l.shm->read_only) {
    Add(c, "limits", "shm", v1::SEVERITY_CRITICAL, "/dev/shm",
        "/dev/shm is read-only: NCCL cannot create its shared-memory segments")
        ->set_fix(fix);
    return;
  }
  if (!l.shm_size) {
    Add(c, "limits", "shm", v1::SEVERITY_UNKNOWN, "/dev/shm", "/dev/shm cannot be read here")
        ->set_fix(fix);
    return;
  }
  const uint64_t size = *l.shm_size;
  const uint64_t free = l.shm_free.value_or(size);
  if (size < need) {
    v1::DoctorCheck* k =
        Add(c, "limits", "shm", size < need / 2 ? v1::SEVERITY_CRITICAL : v1::SEVERITY_WARNING,
            "/dev/shm",
            absl::StrCat("/dev/shm holds ", Bytes(size), ", NCCL needs about ", Bytes(need),
                         " for ", gpus, " local GPU", gpus == 1 ? "" : "s"));
    k->add_evidence(
        absl::StrCat(l.shm ? l.shm->fstype : "not a mount point", ", ", Bytes(free), " free"));
    k->set_fix(fix);
  } else if (free < need) {
    Add(c, "limits", "shm", v1::SEVERITY_WARNING, "/dev/shm",
        absl::StrCat("/dev/shm has ", Bytes(free), " free of ", Bytes(size),
                     ": other processes' segments fill it"))
        ->set_fix("remove stale segments (ls /dev/shm) or give it more room");
  } else {
    Add(c, "limits", "shm", v1::SEVERITY_OK, "/dev/shm",
        absl::StrCat(Bytes(size), " (", Bytes(free), " free)"));
  }
}

void JudgeNofile(Ctx& c, const ProcessLimits& l) {
  if (!l.nofile_soft || *l.nofile_soft >= kNofileFloor) return;
  Add(c, "limits", "nofile", v1::SEVERITY_WARNING, "RLIMIT_NOFILE",
      absl::StrCat("open files are limited to ", *l.nofile_soft,
                   ": NCCL's sockets and shared memory run out in large jobs"))
      ->set_fix(absl::StrCat("raise the soft limit (ulimit -n ",
                             l.nofile_hard ? std::to_string(*l.nofile_hard) : "1048576", ")"));
}

// NCCL_SOCKET_IFNAME: NCCL's bootstrap and NET/Socket take only matching interfaces.
void JudgeSocketIfname(Ctx& c, const std::string& value) {
  const DeviceList l = ParseNcclList(value, kNcclMaxIfs);
  if (!l.problems.empty()) {
    v1::DoctorCheck* k = Add(c, "fallbacks", "socket_ifname_syntax", v1::SEVERITY_WARNING,
                             "NCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME does not read as it looks");
    for (const std::string& p : l.problems) k->add_evidence(p);
  }
  if (!c.f.interfaces) return;
  std::vector<std::string> up, down, all;
  for (const Interface& i : *c.f.interfaces) {
    all.push_back(i.name);
    if (!Selects(l, i.name, -1)) continue;
    (i.up ? up : down).push_back(i.name);
  }
  if (!up.empty()) {
    Add(c, "fallbacks", "socket_ifname", v1::SEVERITY_OK, "NCCL_SOCKET_IFNAME",
        absl::StrCat("NCCL_SOCKET_IFNAME=", Excerpt(value), " selects ", absl::StrJoin(up, ", ")));
    return;
  }
  v1::DoctorCheck* k =
      Add(c, "fallbacks", "socket_ifname", v1::SEVERITY_CRITICAL, "NCCL_SOCKET_IFNAME",
          absl::StrCat("NCCL_SOCKET_IFNAME=", Excerpt(value),
                       down.empty() ? " matches no interface here"
                                    : " matches only interfaces that are down",
                       ": NCCL's bootstrap finds no socket and init fails"));
  k->add_evidence(absl::StrCat("interfaces here: ", absl::StrJoin(all, ", ")));
  if (!down.empty()) k->add_evidence(absl::StrCat("down: ", absl::StrJoin(down, ", ")));
  k->set_fix("name an interface of this network namespace that is up (`fabricctl env` renders it)");
  if (c.fails_why.empty()) {
    c.fails_why =
        absl::StrCat("NCCL_SOCKET_IFNAME=", Excerpt(value), " matches no interface that is up");
  }
}

}  // namespace

void JudgeLimits(Ctx& c) {
  if (!c.f.limits) return;
  const ProcessLimits& l = *c.f.limits;
  JudgeMemlock(c, l);
  JudgeShm(c, l);
  JudgeNofile(c, l);
  if (!l.unreadable.empty()) {
    v1::DoctorCheck* k = Add(c, "limits", "limits_unreadable", v1::SEVERITY_UNKNOWN, "",
                             "some limits cannot be read here");
    for (const std::string& u : l.unreadable) k->add_evidence(u);
  }
}

void JudgeFallbacks(Ctx& c) {
  if (const std::string* v = c.Var("NCCL_IB_DISABLE")) {
    const NcclInt n = ReadNcclInt("NCCL_IB_DISABLE", *v, 0);
    if (n.value != 0) {
      v1::DoctorCheck* k =
          Add(c, "fallbacks", "nccl_ib_disable", v1::SEVERITY_CRITICAL, "NCCL_IB_DISABLE",
              absl::StrCat("NCCL_IB_DISABLE=", *v, ": NCCL does not load NET/IB and uses sockets"));
      if (!n.problem.empty()) k->add_evidence(n.problem);
      k->set_fix("unset NCCL_IB_DISABLE");
      c.Socket(absl::StrCat("NCCL_IB_DISABLE=", *v));
    } else if (!n.problem.empty()) {
      Add(c, "fallbacks", "nccl_ib_disable", v1::SEVERITY_WARNING, "NCCL_IB_DISABLE", n.problem)
          ->set_fix("unset it, or write 0 or 1");
    }
  }
  if (const std::string* v = c.Var("NCCL_NET")) {
    if (strcasecmp(v->c_str(), "Socket") == 0) {
      Add(c, "fallbacks", "nccl_net", v1::SEVERITY_CRITICAL, "NCCL_NET",
          absl::StrCat("NCCL_NET=", *v, ": NCCL uses sockets"))
          ->set_fix("unset NCCL_NET (or NCCL_NET=IB)");
      c.Socket(absl::StrCat("NCCL_NET=", *v));
    } else if (strcasecmp(v->c_str(), "IB") != 0) {
      Add(c, "fallbacks", "nccl_net", v1::SEVERITY_WARNING, "NCCL_NET",
          absl::StrCat("NCCL_NET=", Excerpt(*v),
                       " names a plugin's network: the doctor judges NET/IB only, and NCCL fails "
                       "to start when no plugin provides it"))
          ->set_fix("check the plugin's own log line (NCCL_DEBUG=INFO: \"NET/<name>\")");
      c.unjudged_why = absl::StrCat("NCCL_NET=", Excerpt(*v), " is a plugin's network");
    }
  }
  if (const std::string* v = c.Var("UCX_TLS")) {
    const UcxTransports t = ParseUcxTls(*v);
    v1::DoctorCheck* k = Add(c, "fallbacks", "ucx_tls",
                             t.rdma ? (t.problems.empty() ? v1::SEVERITY_OK : v1::SEVERITY_WARNING)
                                    : v1::SEVERITY_CRITICAL,
                             "UCX_TLS",
                             t.rdma ? t.why
                                    : absl::StrCat(t.why,
                                                   ": UCX (and NIXL over it) moves data "
                                                   "over TCP or shared memory"));
    for (const std::string& p : t.problems) k->add_evidence(p);
    if (!t.rdma) k->set_fix("add rc (or ib) to UCX_TLS, or unset it");
  }
  if (const std::string* v = c.Var("NCCL_SOCKET_IFNAME")) JudgeSocketIfname(c, *v);
  // NCCL and UCX in one job on different NICs: the check users write by hand before a job.
  const std::string* hca = c.Var("NCCL_IB_HCA");
  const std::string* ucx = c.Var("UCX_NET_DEVICES");
  if (hca != nullptr && ucx != nullptr && c.f.host) {
    std::vector<DevicePort> ports;
    for (const v1::RdmaDevice& d : c.f.host->rdma_devices()) {
      for (const v1::Port& p : d.ports()) ports.push_back({d.name(), static_cast<int>(p.number())});
    }
    const DeviceList n = ParseNcclList(*hca), u = ParseUcxDevices(*ucx);
    const std::vector<DevicePort> ucx_only = UsedOnlyBy(u, n, ports);
    const std::vector<DevicePort> nccl_only = UsedOnlyBy(n, u, ports);
    if (!ucx_only.empty() || !nccl_only.empty()) {
      v1::DoctorCheck* k = Add(c, "fallbacks", "consumers_disagree", v1::SEVERITY_WARNING, "",
                               "NCCL_IB_HCA and UCX_NET_DEVICES name different ports");
      auto list = [](const std::vector<DevicePort>& ps) {
        std::vector<std::string> out;
        for (const DevicePort& p : ps) out.push_back(absl::StrCat(p.device, ":", p.port));
        return absl::StrJoin(out, ", ");
      };
      if (!ucx_only.empty()) k->add_evidence(absl::StrCat("only UCX uses ", list(ucx_only)));
      if (!nccl_only.empty()) k->add_evidence(absl::StrCat("only NCCL uses ", list(nccl_only)));
      k->set_fix("render both from one answer: `fabricctl env --consumers=nccl,ucx`");
    }
  }
}

}  // namespace fabric::doctor::judge_internal
