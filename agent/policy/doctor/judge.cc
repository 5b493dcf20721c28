#include "agent/policy/doctor/judge.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/policy/doctor/judge_internal.h"
#include "agent/policy/health/health.h"
#include "agent/rdma/gid.h"

namespace fabric::doctor {

namespace judge_internal {

v1::DoctorCheck* Add(Ctx& c, const char* area, const char* check, v1::Severity severity,
                     std::string subject, std::string verdict) {
  v1::DoctorCheck* k = c.r->add_checks();
  k->set_area(area);
  k->set_check(check);
  k->set_severity(severity);
  k->set_subject(std::move(subject));
  k->set_verdict(std::move(verdict));
  return k;
}

std::vector<rdma::GidSlot> SlotsOf(const v1::Port& port) {
  std::vector<rdma::GidSlot> out;
  for (const v1::Gid& g : port.gids()) {
    auto bytes = rdma::ParseGid(g.gid());
    if (!bytes.ok() || rdma::IsEmptyGidSlot(*bytes)) continue;
    rdma::GidSlot s;
    s.index = static_cast<int>(g.index());
    s.gid = *bytes;
    s.netdev = g.netdev();
    if (g.type() == v1::GID_TYPE_ROCE_V2) s.kind = rdma::GidKind::kRoceV2;
    if (g.type() == v1::GID_TYPE_ROCE_V1) s.kind = rdma::GidKind::kRoceV1;
    if (g.type() == v1::GID_TYPE_IB) s.kind = rdma::GidKind::kIb;
    out.push_back(std::move(s));
  }
  return out;
}

std::string Bytes(uint64_t n) {
  constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;
  if (n >= kGiB && n % kGiB == 0) return absl::StrCat(n / kGiB, " GiB");
  if (n >= kMiB) return absl::StrCat(n / kMiB, " MiB");
  if (n >= kKiB) return absl::StrCat(n / kKiB, " KiB");
  return absl::StrCat(n, " bytes");
}

}  // namespace judge_internal

namespace {

using judge_internal::Ctx;

// "mlx5_1:1..mlx5_8:1" for a run of ports, else the list.
std::string Ports(const std::vector<std::string>& ports) {
  if (ports.size() > 3) return absl::StrCat(ports.front(), "..", ports.back());
  return absl::StrJoin(ports, ", ");
}

// NET/IB, but a CRITICAL check that stops it short of working: the first one's verdict.
std::string But(const v1::DoctorReport& r) {
  for (const v1::DoctorCheck& k : r.checks()) {
    if (k.severity() == v1::SEVERITY_CRITICAL) return absl::StrCat(", but ", k.verdict());
  }
  return "";
}

std::string Summary(const v1::DoctorReport& r, const Ctx& c) {
  std::vector<std::string> ports(r.devices().begin(), r.devices().end());
  switch (r.transport()) {
    case v1::NCCL_TRANSPORT_NONE:
      return absl::StrCat("NCCL will fail to initialize: ", c.fails_why);
    case v1::NCCL_TRANSPORT_NET_SOCKET:
      return absl::StrCat("NCCL will fall back to sockets: ", c.socket_why);
    case v1::NCCL_TRANSPORT_NET_IB_GDRDMA:
      return absl::StrCat("NCCL will use NET/IB with GPUDirect over ", Ports(ports), But(r));
    case v1::NCCL_TRANSPORT_NET_IB:
      return absl::StrCat("NCCL will use NET/IB over ", Ports(ports), But(r));
    default:
      return absl::StrCat("NCCL's transport is not judged: ", c.unjudged_why);
  }
}

}  // namespace

std::vector<std::string> NamedDevices(const std::map<std::string, std::string>& env,
                                      const v1::Host& host) {
  std::vector<DeviceList> lists;
  auto var = [&](const char* name) -> const std::string* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : &it->second;
  };
  if (const std::string* v = var("NCCL_IB_HCA")) lists.push_back(ParseNcclList(*v));
  if (const std::string* v = var("NVSHMEM_HCA_LIST")) lists.push_back(ParseNcclList(*v));
  if (const std::string* v = var("UCX_NET_DEVICES")) lists.push_back(ParseUcxDevices(*v));
  std::vector<std::string> out;
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    bool named = lists.empty();
    for (const DeviceList& l : lists) {
      for (const v1::Port& p : d.ports())
        named |= Selects(l, d.name(), static_cast<int>(p.number()));
    }
    if (named) out.push_back(d.name());
  }
  return out;
}

v1::DoctorReport Judge(const DoctorFacts& facts) {
  v1::DoctorReport r;
  r.set_env_source(facts.env_source);
  r.set_context(facts.context);
  Ctx c{facts, &r, {}, false, {}, {}, {}, {}};
  judge_internal::JudgeFallbacks(c);
  judge_internal::JudgeDevices(c);
  judge_internal::JudgeGids(c);
  judge_internal::JudgeLimits(c);
  for (const DevicePort& p : c.nccl_ports) r.add_devices(absl::StrCat(p.device, ":", p.port));
  if (!c.fails_why.empty()) {
    r.set_transport(v1::NCCL_TRANSPORT_NONE);
  } else if (!c.unjudged_why.empty()) {
    r.set_transport(v1::NCCL_TRANSPORT_UNSPECIFIED);
  } else if (!c.socket_why.empty() || c.nccl_ports.empty()) {
    c.Socket("no usable RDMA port");
    r.set_transport(v1::NCCL_TRANSPORT_NET_SOCKET);
    r.clear_devices();
  } else {
    r.set_transport(v1::NCCL_TRANSPORT_NET_IB);
  }
  judge_internal::JudgeGpuDirect(c);
  judge_internal::JudgeJob(c);
  judge_internal::JudgeVendors(c);
  // Checks in area order, the order the areas ran in is not the reading order.
  static const char* const kAreas[] = {"devices",   "gids",      "limits",
                                       "fallbacks", "gpudirect", "job"};
  auto rank = [](const std::string& area) {
    return std::find_if(std::begin(kAreas), std::end(kAreas),
                        [&](const char* a) { return area == a; }) -
           std::begin(kAreas);
  };
  std::stable_sort(r.mutable_checks()->begin(), r.mutable_checks()->end(),
                   [&](const v1::DoctorCheck& a, const v1::DoctorCheck& b) {
                     return rank(a.area()) < rank(b.area());
                   });
  // CRITICAL outranks UNKNOWN, as in `health`: a check that could not look hides no failure.
  v1::Severity worst = v1::SEVERITY_OK;
  for (const v1::DoctorCheck& k : r.checks()) {
    if (SeverityRank(k.severity()) > SeverityRank(worst)) worst = k.severity();
  }
  r.set_verdict(worst);
  r.set_summary(Summary(r, c));
  return r;
}

int ExitCodeOf(const v1::DoctorReport& report) { return HealthExitCode(report.verdict()); }

}  // namespace fabric::doctor
