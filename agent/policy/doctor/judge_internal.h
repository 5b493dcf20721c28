// What the judge's areas (judge_*.cc) share: the report being written, the variables as the
// consumers read them, and what the earlier areas found (the ports NCCL will use, the first
// reason it leaves RDMA).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/policy/doctor/consumer_vars.h"
#include "agent/policy/doctor/facts.h"
#include "agent/rdma/gid_choice.h"
#include "fabric/v1/doctor.pb.h"

namespace fabric::doctor::judge_internal {

struct Ctx {
  const DoctorFacts& f;
  v1::DoctorReport* r;

  const std::string* Var(const char* name) const {
    auto it = f.env.find(name);
    return it == f.env.end() ? nullptr : &it->second;
  }

  // NCCL_IB_HCA as NCCL reads it (unset: every device).
  DeviceList hca;
  bool hca_set = false;
  // The ports NCCL will use: selected, ACTIVE, their device's node present and openable.
  std::vector<DevicePort> nccl_ports;
  // Why NCCL leaves NET/IB (the first reason found), and whether it fails outright.
  std::string socket_why;
  std::string fails_why;
  std::string unjudged_why;  // A plugin net: the transport is not ours to judge.

  void Socket(std::string why) {
    if (socket_why.empty()) socket_why = std::move(why);
  }
};

v1::DoctorCheck* Add(Ctx& c, const char* area, const char* check, v1::Severity severity,
                     std::string subject, std::string verdict);

// A port's GID table from the model (empty slots are absent there).
std::vector<rdma::GidSlot> SlotsOf(const v1::Port& port);

// "1 GiB", "64 MiB", "512 KiB", "100 bytes".
std::string Bytes(uint64_t n);

// The areas, in the order the report lists them.
void JudgeDevices(Ctx& c);
void JudgeGids(Ctx& c);
void JudgeLimits(Ctx& c);
void JudgeFallbacks(Ctx& c);
void JudgeGpuDirect(Ctx& c);  // Sets the report's transport between NET_IB and NET_IB_GDRDMA.
void JudgeJob(Ctx& c);
void JudgeVendors(Ctx& c);  // The NIC vendor's recipe; GPUs of two vendors in one job.

}  // namespace fabric::doctor::judge_internal
