// The job against its vendors: the NIC vendor's recipe for NCCL/RCCL (jobenv's profiles), and
// GPUs of two vendors in one job, which NCCL and RCCL cannot join in one communicator.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/excerpt.h"
#include "agent/common/strings.h"
#include "agent/policy/doctor/judge_internal.h"
#include "agent/policy/jobenv/profiles.h"

namespace fabric::doctor::judge_internal {
namespace {

// The profile every port NCCL uses has; empty when they differ or none is known.
const jobenv::Profile* ProfileOfPorts(const Ctx& c, std::string* names) {
  std::set<std::string> profiles;
  for (const DevicePort& p : c.nccl_ports) {
    for (const v1::RdmaDevice& d : c.f.host->rdma_devices()) {
      if (d.name() == p.device) profiles.emplace(jobenv::ProfileOf(d.pci().driver(), d.name()));
    }
  }
  *names = absl::StrJoin(profiles, ", ");
  if (profiles.size() != 1 || profiles.begin()->empty()) return nullptr;
  return jobenv::FindProfile(*profiles.begin());
}

void JudgeNicProfile(Ctx& c) {
  // With the agent's answer, its comparison covers the profile and the site's changes to it.
  if (!c.f.host || c.nccl_ports.empty() || c.f.agent_env) return;
  std::string names;
  const jobenv::Profile* p = ProfileOfPorts(c, &names);
  if (p == nullptr || p->vars.empty()) return;
  std::vector<std::string> differ;
  for (const jobenv::ProfileVar& v : p->vars) {
    const std::string* have = c.Var(std::string(v.name).c_str());
    if (have == nullptr) {
      differ.push_back(
          absl::StrCat(Av(v.name), " is not set (", Av(v.source), ": ", Av(v.value), ")"));
    } else if (*have != v.value) {
      differ.push_back(absl::StrCat(Av(v.name), "=", Excerpt(*have), " (", Av(v.source), ": ",
                                    Av(v.value), ")"));
    }
  }
  if (differ.empty()) {
    Add(c, "job", "nic_profile", v1::SEVERITY_OK, "",
        absl::StrCat("the job has the recipe for ", Av(p->what)));
    return;
  }
  v1::DoctorCheck* k =
      Add(c, "job", "nic_profile", v1::SEVERITY_WARNING, "",
          absl::StrCat(differ.size(), " of the NIC vendor's variables for ", Av(p->what),
                       differ.size() == 1 ? " differs" : " differ",
                       " (a site may have changed them on purpose: selection.nicProfiles)"));
  for (const std::string& d : differ) k->add_evidence(d);
  k->set_fix(
      "start the job through `fabric-env exec` (or NCCL_ENV_PLUGIN=fabric), which sets them");
}

void JudgeGpuVendors(Ctx& c) {
  if (!c.f.host) return;
  std::map<std::string, std::vector<std::string>> by;
  for (const std::string& g : c.f.gpus) {
    for (const v1::Accelerator& a : c.f.host->accelerators()) {
      if (a.pci_address() != g) continue;
      if (a.vendor() == v1::ACCELERATOR_VENDOR_NVIDIA) by["NVIDIA (NCCL)"].push_back(g);
      if (a.vendor() == v1::ACCELERATOR_VENDOR_AMD) by["AMD (RCCL)"].push_back(g);
    }
  }
  if (by.size() < 2) return;
  v1::DoctorCheck* k =
      Add(c, "job", "gpu_vendors", v1::SEVERITY_WARNING, "",
          "the job's GPUs are NVIDIA and AMD: NCCL and RCCL cannot form one communicator across "
          "them (ROCm/rccl#1220); only UCC over UCX spans both (openucx/ucc#1039)");
  for (const auto& [vendor, gpus] : by) {
    k->add_evidence(absl::StrCat(vendor, ": ", absl::StrJoin(gpus, ", ")));
  }
  k->set_fix(
      "run the collectives through UCC (UCC_CL_BASIC_TLS=ucp, UCX_NET_DEVICES per rank: "
      "`fabric-env exec` renders both), or split the job by GPU vendor");
}

}  // namespace

void JudgeVendors(Ctx& c) {
  JudgeNicProfile(c);
  JudgeGpuVendors(c);
}

}  // namespace fabric::doctor::judge_internal
