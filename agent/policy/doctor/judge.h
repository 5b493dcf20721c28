// The doctor's judgement of a job's facts (facts.h): one check per thing that decides whether
// NCCL and UCX will really use RDMA, each with its evidence and fix, and one verdict line.
// Pure: fabricctl, the static fabric-env and the agent's Doctor call share it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/policy/doctor/facts.h"
#include "fabric/v1/doctor.pb.h"
#include "fabric/v1/host.pb.h"

namespace fabric::doctor {

// The RDMA devices of `host` the job's variables name (NCCL_IB_HCA, UCX_NET_DEVICES and the
// other consumers' device lists), or every device when none names any: what the reader opens.
std::vector<std::string> NamedDevices(const std::map<std::string, std::string>& env,
                                      const v1::Host& host);

v1::DoctorReport Judge(const DoctorFacts& facts);

// The exit code of a report, as `health`'s: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
int ExitCodeOf(const v1::DoctorReport& report);

}  // namespace fabric::doctor
