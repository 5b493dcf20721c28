// GPUDirect RDMA and the job as a whole: whether NCCL's NET/IB reads GPU memory directly
// (NET/IB/GDRDMA), and whether the job's variables are the agent's answer and the same on every
// rank (NCCL hangs when ranks see different HCA sets, NVIDIA/nccl#2428).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/excerpt.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/doctor/judge_internal.h"
#include "agent/policy/select/port_facts.h"

namespace fabric::doctor::judge_internal {
namespace {

// NCCL_NET_GDR_LEVEL (default PXB: GPUDirect only through PCIe switches), read as NCCL reads it
// (consumer_vars.h). NCCL's PHB covers our NODE (both cross the CPU without the inter-socket
// link); its NVLink and C2C levels allow no PCIe path, its PXN and P2C no more than PXB's.
// `shown` gets the level's name as NCCL says it.
v1::DistanceClass GdrLevel(const Ctx& c, std::string* shown, std::vector<std::string>* problems) {
  *shown = "PXB";
  const std::string* v = c.Var("NCCL_NET_GDR_LEVEL");
  if (v == nullptr) return v1::DISTANCE_CLASS_PXB;
  NcclLevel level = ReadNcclLevel("NCCL_NET_GDR_LEVEL", *v);
  if (!level.problem.empty()) problems->push_back(std::move(level.problem));
  if (!level.name.empty()) *shown = level.name;
  static const std::pair<const char*, v1::DistanceClass> kClasses[] = {
      {"LOC", v1::DISTANCE_CLASS_UNSPECIFIED}, {"NVL", v1::DISTANCE_CLASS_UNSPECIFIED},
      {"NVB", v1::DISTANCE_CLASS_UNSPECIFIED}, {"C2C", v1::DISTANCE_CLASS_UNSPECIFIED},
      {"PIX", v1::DISTANCE_CLASS_PIX},         {"PXB", v1::DISTANCE_CLASS_PXB},
      {"P2C", v1::DISTANCE_CLASS_PXB},         {"PXN", v1::DISTANCE_CLASS_PXB},
      {"PHB", v1::DISTANCE_CLASS_NODE},        {"SYS", v1::DISTANCE_CLASS_SYS}};
  for (const auto& [name, cls] : kClasses) {
    if (level.name == name) return cls;
  }
  return v1::DISTANCE_CLASS_PXB;
}

bool HasGpus(const v1::Host& host) {
  for (const v1::Accelerator& a : host.accelerators()) {
    if (!a.management_display()) return true;
  }
  return false;
}

// Variables that decide which NICs, GIDs and interfaces the consumers use, and how (the NIC
// vendor's recipe, GPUDirect, UCC's transports).
bool Decides(const std::string& key) {
  for (const char* p : {"NCCL_", "RCCL_", "UCX_", "UCC_", "FI_EFA_", "NVSHMEM_", "MC_", "UCCL_",
                        "VLLM_", "SGLANG_"}) {
    if (absl::StartsWith(key, p)) return true;
  }
  return false;
}

}  // namespace

void JudgeGpuDirect(Ctx& c) {
  if (c.r->transport() != v1::NCCL_TRANSPORT_NET_IB || !c.f.host) return;
  const v1::Host& host = *c.f.host;
  // The job's GPUs come with the agent's answer; without it the host's GPUs are not the job's
  // (sysfs shows a container all of them): the path is judged, the distance is not.
  const std::vector<std::string>& gpus = c.f.gpus;
  if (!HasGpus(host)) return;
  const v1::GpuDirect& gd = host.gpudirect();
  std::vector<std::string> mechanisms;
  for (const v1::GpuDirectPath& p : gd.paths()) mechanisms.push_back(p.detail());
  bool direct = gd.available();
  // A path of the host serves only its GPU vendor (peer memory NVIDIA's, dma-buf its exporter's).
  std::vector<const v1::Accelerator*> job_gpus;
  bool served = false;
  for (const std::string& g : gpus) {
    for (const v1::Accelerator& a : host.accelerators()) {
      if (a.pci_address() != g) continue;
      job_gpus.push_back(&a);
      served |= DecideGpuDirect(host, a, v1::DISTANCE_CLASS_PIX).way != "none";
    }
  }
  v1::DoctorCheck* path = nullptr;
  if (!direct) {
    path = Add(c, "gpudirect", "gpudirect_path", v1::SEVERITY_WARNING, "",
               absl::StrCat("no GPUDirect RDMA path: NCCL stages every transfer through host "
                            "memory",
                            gd.reason().empty() ? "" : absl::StrCat(" (", gd.reason(), ")")));
    path->set_fix(
        "load nvidia_peermem, or use the open kernel modules (515+) on a 5.12+ "
        "kernel for dma-buf");
  } else if (!job_gpus.empty() && !served) {
    direct = false;
    path = Add(c, "gpudirect", "gpudirect_path", v1::SEVERITY_WARNING, "",
               absl::StrCat("no GPUDirect RDMA path serves the job's GPUs (the host has ",
                            absl::StrJoin(mechanisms, ", "),
                            "): NCCL stages every transfer through host memory"));
    path->set_fix(
        "load the GPU driver that exports dma-buf for these GPUs (amdgpu, NVIDIA's open "
        "kernel modules 515+) on a 5.12+ kernel");
  } else {
    path = Add(c, "gpudirect", "gpudirect_path", v1::SEVERITY_OK, "",
               absl::StrCat("GPUDirect RDMA through ", absl::StrJoin(mechanisms, ", ")));
  }
  // Distance: NCCL reads GPU memory over the NIC only up to NCCL_NET_GDR_LEVEL.
  std::vector<std::string> problems;
  std::string level_name;
  const v1::DistanceClass level = GdrLevel(c, &level_name, &problems);
  std::set<std::string> used;
  for (const DevicePort& p : c.nccl_ports) used.insert(p.device);
  std::vector<std::string> far, near;
  for (const std::string& g : gpus) {
    const v1::TopologyPair* best = nullptr;
    for (const v1::TopologyPair& t : host.topology()) {
      if (t.accelerator() != g || !used.count(t.rdma_device())) continue;
      if (best == nullptr || t.distance() < best->distance()) best = &t;
    }
    for (const v1::Accelerator* a : job_gpus) {
      if (a->pci_address() != g) continue;
      const GpuDirectWay way = DecideGpuDirect(
          host, *a, best == nullptr ? v1::DISTANCE_CLASS_UNSPECIFIED : best->distance());
      path->add_evidence(absl::StrCat(g, ": ", way.way, " (", way.reason, ")"));
    }
    if (best == nullptr) continue;
    const std::string line =
        absl::StrCat(g, ": nearest NIC ", best->rdma_device(), " is ",
                     DistanceName(best->distance()), " (", best->reason(), ")");
    (best->distance() <= level ? near : far).push_back(line);
  }
  if (gpus.empty()) {
    c.r->mutable_checks()->rbegin()->add_evidence(
        "the job's GPUs are not known here (no answer from the agent): their distance to the "
        "NICs is not judged");
  }
  if (!far.empty()) {
    v1::DoctorCheck* k =
        Add(c, "gpudirect", "gdr_distance", v1::SEVERITY_WARNING, "NCCL_NET_GDR_LEVEL",
            absl::StrCat(far.size(), " GPU", far.size() == 1 ? " is" : "s are",
                         " farther from its NIC than NCCL_NET_GDR_LEVEL (", level_name,
                         ") allows: no GPUDirect for ", far.size() == 1 ? "it" : "them"));
    for (const std::string& s : far) k->add_evidence(s);
    for (const std::string& s : problems) k->add_evidence(s);
    k->set_fix("give each GPU the NIC under its own PCIe switch (`fabricctl env --gpus=job`)");
  } else if (!problems.empty()) {
    v1::DoctorCheck* k =
        Add(c, "gpudirect", "gdr_distance", v1::SEVERITY_WARNING, "NCCL_NET_GDR_LEVEL",
            absl::StrCat("NCCL_NET_GDR_LEVEL does not read as it looks: NCCL allows GPUDirect up "
                         "to ",
                         level_name));
    for (const std::string& s : problems) k->add_evidence(s);
    k->set_fix("unset it, or write one of NCCL's level names in capitals (PIX, PXB, PHB, SYS)");
  }
  if (direct && near.empty() && !far.empty()) direct = false;
  if (c.f.iommu == "DMA" || c.f.iommu == "DMA-FQ") {
    Add(c, "gpudirect", "iommu", v1::SEVERITY_WARNING, "",
        absl::StrCat("the IOMMU translates DMA (", c.f.iommu,
                     "): peer-to-peer between NIC and GPU goes through the root complex or fails"))
        ->set_fix("boot with iommu=pt (passthrough), or enable ATS on NIC and GPU");
  }
  std::vector<std::string> redirect, unread;
  for (const AcsBridge& b : c.f.acs) {
    if (b.control && AcsRedirects(*b.control)) {
      redirect.push_back(b.bridge);
    } else if (!b.error.empty()) {
      unread.push_back(b.bridge);
    }
  }
  if (!redirect.empty()) {
    v1::DoctorCheck* k =
        Add(c, "gpudirect", "acs", v1::SEVERITY_WARNING, "",
            "ACS redirects peer-to-peer requests to the root complex on bridges between GPUs and "
            "NICs: GPUDirect is slow or hangs (NCCL's own hint)");
    for (const std::string& b : redirect)
      k->add_evidence(absl::StrCat("ReqRedir/CmpltRedir on ", b));
    k->set_fix("disable ACS redirect on those bridges (setpci ... ECAP_ACS+6.w=0), or in the BIOS");
  } else if (!unread.empty()) {
    c.r->mutable_checks()->rbegin()->add_evidence(
        absl::StrCat("ACS not read on ", unread.size(), " bridge", unread.size() == 1 ? "" : "s",
                     ": only root reads PCIe extended config space"));
  }
  if (direct) c.r->set_transport(v1::NCCL_TRANSPORT_NET_IB_GDRDMA);
}

void JudgeJob(Ctx& c) {
  const DoctorFacts& f = c.f;
  if (f.agent_env) {
    std::vector<std::string> differ;
    for (const auto& [key, want] : *f.agent_env) {
      if (!Decides(key)) continue;
      auto it = f.env.find(key);
      if (it == f.env.end()) {
        differ.push_back(absl::StrCat(key, " is not set (the agent gives ", want, ")"));
      } else if (it->second != want) {
        differ.push_back(absl::StrCat(key, "=", Excerpt(it->second), ", the agent gives ", want));
      }
    }
    if (differ.empty()) {
      Add(c, "job", "agent_answer", v1::SEVERITY_OK, "",
          "the job's fabric variables are the agent's answer for it");
    } else {
      v1::DoctorCheck* k =
          Add(c, "job", "agent_answer", v1::SEVERITY_WARNING, "",
              absl::StrCat(differ.size(), " fabric variable", differ.size() == 1 ? "" : "s",
                           " differ from what the agent gives this job"));
      for (const std::string& d : differ) k->add_evidence(d);
      k->set_fix(
          "start the job through `fabric-env exec` (or `fabricctl exec`) so that it "
          "gets the agent's answer");
    }
  } else if (!f.agent_error.empty()) {
    Add(c, "job", "agent_answer", v1::SEVERITY_OK, "",
        absl::StrCat("not compared with the agent's answer: ", f.agent_error));
  }
  // NCCL's lines must be the same on every rank of a node (one NCCL_IB_HCA per job).
  if (f.rank_envs.size() > 1) {
    std::set<std::string> keys;
    for (const auto& [gpu, env] : f.rank_envs) {
      for (const auto& [k, v] : env) {
        if (absl::StartsWith(k, "NCCL_")) keys.insert(k);
      }
    }
    std::vector<std::string> differ;
    const auto& first = *f.rank_envs.begin();
    for (const std::string& key : keys) {
      auto value = [&](const std::map<std::string, std::string>& env) {
        auto it = env.find(key);
        return it == env.end() ? std::string("(unset)") : it->second;
      };
      for (const auto& [gpu, env] : f.rank_envs) {
        if (value(env) != value(first.second)) {
          differ.push_back(absl::StrCat(key, ": ", value(first.second), " for GPU ", first.first,
                                        ", ", value(env), " for GPU ", gpu));
          break;
        }
      }
    }
    if (differ.empty()) {
      Add(c, "job", "ranks_agree", v1::SEVERITY_OK, "",
          absl::StrCat("NCCL's variables are the same for the job's ", f.rank_envs.size(),
                       " GPUs"));
    } else {
      v1::DoctorCheck* k = Add(c, "job", "ranks_agree", v1::SEVERITY_CRITICAL, "",
                               "the job's ranks get different NCCL variables: NCCL hangs or "
                               "fails when ranks see different HCA sets");
      for (const std::string& d : differ) k->add_evidence(d);
      k->set_fix(
          "give every rank the job's one NCCL answer (`fabric-env exec`); per-GPU pins "
          "go to UCX/NVSHMEM variables only");
    }
  }
}

}  // namespace fabric::doctor::judge_internal
