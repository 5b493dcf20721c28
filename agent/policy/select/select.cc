#include "agent/policy/select/select.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/common/cidr.h"
#include "agent/common/excerpt.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/topology/topology.h"
#include "agent/policy/select/candidates.h"
#include "agent/policy/select/env.h"
#include "agent/policy/select/gpu_names.h"
#include "agent/policy/select/pairing.h"
#include "agent/policy/select/port_facts.h"
#include "agent/policy/select/selection_section.h"
#include "agent/rdma/gid_choice.h"

namespace fabric {

using namespace ::fabric::v1;               // NOLINT: enum values of the model
using namespace ::fabric::select_internal;  // NOLINT: the ranking, shared with pairing.cc

namespace {

std::string RateText(std::optional<double> gbps) {
  return gbps ? absl::StrFormat("%g Gb/s", *gbps) : std::string("rate unknown");
}

std::string Plural(int n, std::string_view word) {
  return absl::StrCat(n, " ", Av(word), n == 1 ? "" : "s");
}

std::string NumaText(std::optional<int> nic, std::optional<int> gpu) {
  if (!nic) return "NUMA unknown";
  if (!gpu) return absl::StrFormat("NUMA %d, GPU NUMA unknown", *nic);
  if (*nic == *gpu) return absl::StrFormat("NUMA %d same as GPU", *nic);
  return absl::StrFormat("NUMA %d, GPU on NUMA %d", *nic, *gpu);
}

std::string FunctionText(const Candidate& c) {
  if (!c.is_vf) return "PF";
  const std::string& pf = c.dev->pci().sriov().pf_pci_address();
  return pf.empty() ? "VF" : absl::StrCat("VF of ", pf);
}

// The value of `s` on criterion `k`, as an operator reads it.
std::string ValueText(const Scored& s, Criterion k, std::optional<int> gpu_numa) {
  switch (k) {
    case Criterion::kGid:
      return s.c->no_gid() ? s.c->NoGidText() : s.c->GidText();
    case Criterion::kFunction:
      return s.c->is_vf ? "VF" : "PF";
    case Criterion::kDistance:
      return DistanceName(s.distance);
    case Criterion::kNuma:
      return NumaText(s.c->numa, gpu_numa);
    case Criterion::kRate:
      return RateText(s.c->rate);
    case Criterion::kSpread:
      return absl::StrCat("serves ", Plural(s.load, "GPU"), " of this request");
    case Criterion::kPaired:
      return s.paired ? "the GPU's host-wide pair" : "paired with other GPUs";
    case Criterion::kName:
    case Criterion::kPort:
    case Criterion::kTie:
      return s.c->name;
  }
  return "";
}

std::string FunctionPreference(bool prefer_vfs) {
  return prefer_vfs ? "VFs preferred by policy, ahead of distance"
                    : "PFs preferred, ahead of distance";
}

// Second reason line: the criterion that beat the runner-up.
std::string BeatText(const Scored& w, const Scored& r, Criterion k, std::optional<int> gpu_numa,
                     bool prefer_vfs, const GpuPair* pair) {
  const std::string& rn = r.c->name;
  switch (k) {
    case Criterion::kPaired:
      return absl::StrCat(pair != nullptr ? pair->reason() : "paired", " (beat ", rn,
                          " on host-wide pairing; otherwise equal)");
    case Criterion::kGid:
      return absl::StrCat("beat ", rn, " on GID: ", rn, " has ", r.c->NoGidText(),
                          " (a RoCE port without one ranks below every port with one)");
    case Criterion::kFunction:
      return absl::StrCat("beat ", rn, " on function type: ", ValueText(w, k, gpu_numa), " vs ",
                          ValueText(r, k, gpu_numa), " (", FunctionPreference(prefer_vfs), "; ", rn,
                          " is ", DistanceName(r.distance), ")");
    case Criterion::kName:
    case Criterion::kPort:
      return absl::StrCat("beat ", rn, k == Criterion::kName ? " on name order" : " on port order",
                          " (otherwise equal)");
    case Criterion::kTie:
      return absl::StrCat("tied with ", rn, " on every criterion; the host lists it first");
    default:
      return absl::StrCat("beat ", rn, " on ",
                          k == Criterion::kDistance ? "distance"
                          : k == Criterion::kNuma   ? "NUMA"
                          : k == Criterion::kRate   ? "rate"
                                                    : "spreading",
                          ": ", ValueText(w, k, gpu_numa), " vs ", ValueText(r, k, gpu_numa));
  }
}

// Why loser `l` lost to winner `w`.
std::string LostText(const Scored& l, const Scored& w, Criterion k, std::optional<int> gpu_numa,
                     bool prefer_vfs) {
  const std::string& wn = w.c->name;
  switch (k) {
    case Criterion::kGid:
      return absl::StrCat(l.c->NoGidText(), " (lost on GID: ", wn, " has ", w.c->GidText(), ")");
    case Criterion::kFunction:
      return absl::StrCat(l.c->is_vf ? "VF (" : "PF (", FunctionPreference(prefer_vfs), "; ", wn,
                          " is ", w.c->is_vf ? "a VF" : "a PF", ")");
    case Criterion::kDistance:
      return absl::StrCat(DistanceName(l.distance), " (lost on distance: ", wn, " is ",
                          DistanceName(w.distance), ")");
    case Criterion::kNuma:
      return absl::StrCat(ValueText(l, k, gpu_numa), " (lost on NUMA: ", wn, " is ",
                          ValueText(w, k, gpu_numa), ")");
    case Criterion::kRate:
      return absl::StrCat(RateText(l.c->rate), " (lost on rate: ", wn, " is ", RateText(w.c->rate),
                          ")");
    case Criterion::kPaired:
      return absl::StrCat("lost on host-wide pairing (otherwise equal; this GPU is paired with ",
                          wn, ")");
    case Criterion::kSpread:
      return absl::StrCat("already serves ", Plural(l.load, "GPU"),
                          " of this request (lost on spreading: ", wn, " serves ", w.load, ")");
    case Criterion::kName:
      return absl::StrCat("lost on name order (", wn, " sorts first; otherwise equal)");
    case Criterion::kPort:
      return absl::StrCat("lost on port order (", wn, " sorts first; otherwise equal)");
    case Criterion::kTie:
      return absl::StrCat("tied with ", wn, " on every criterion; the host lists ", wn, " first");
  }
  return "";
}

std::string Summary(const Scored& s, const std::string& gpu, std::optional<int> gpu_numa) {
  const Candidate& c = *s.c;
  std::string out = absl::StrCat(c.name, " ", DistanceName(s.distance), " to ", gpu);
  if (!s.distance_reason.empty()) absl::StrAppend(&out, " (", s.distance_reason, ")");
  absl::StrAppend(&out, ", ", NumaText(c.numa, gpu_numa), ", ", RateText(c.rate), ", ",
                  c.GidText());
  if (c.is_vf) absl::StrAppend(&out, ", ", FunctionText(c));
  if (!c.front_end.empty()) {
    absl::StrAppend(&out, ", ", c.front_end, " (used because no other port is active)");
  }
  return out;
}

}  // namespace

namespace {

struct Request {
  std::string given;      // As the caller wrote it.
  std::string canonical;  // "0000:17:00.0".
  const Accelerator* acc = nullptr;
};

absl::StatusOr<std::vector<Request>> ResolveGpus(const Host& host,
                                                 const std::vector<std::string>& gpus,
                                                 const MigResolver* mig) {
  if (gpus.empty()) return absl::InvalidArgumentError("no GPU given");
  if (gpus.size() > kMaxGpusPerRequest) {
    return absl::ResourceExhaustedError(absl::StrCat("gpus: ", gpus.size(), " given; at most ",
                                                     kMaxGpusPerRequest, " per request"));
  }
  std::vector<Request> out;
  for (const std::string& g : gpus) {
    // Every name form (gpu_names.h); MIG devices through `mig` (NVML, in the agent and fabricctl).
    absl::StatusOr<ResolvedGpu> gpu = ResolveGpu(host, g, mig);
    if (!gpu.ok()) return gpu.status();
    const std::string* canonical = &gpu->pci_address;
    for (const Request& r : out) {
      if (r.canonical == *canonical) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "GPU %s given twice (as %s and %s)", *canonical, Excerpt(r.given), Excerpt(g)));
      }
    }
    const Accelerator* found = gpu->accelerator;
    out.push_back(Request{g, *canonical, found});
  }
  return out;
}

}  // namespace

absl::StatusOr<Selection> SelectPorts(const Host& host, const std::vector<std::string>& gpus,
                                      const SelectionPolicy& policy, const MigResolver* mig) {
  if (absl::Status s = ValidatePolicy(policy); !s.ok()) return s;
  absl::StatusOr<std::vector<Request>> requests = ResolveGpus(host, gpus, mig);
  if (!requests.ok()) return requests.status();
  absl::StatusOr<Candidates> built = BuildCandidates(host, policy);
  if (!built.ok()) return built.status();
  const std::vector<Candidate>& cands = built->all;

  Selection sel;
  for (const std::string& n : built->notes) sel.add_notes(n);
  if (std::string flat = VirtualPciTree(host); !flat.empty()) {
    sel.add_notes(
        PairedByNcclTopology(host)
            ? absl::StrCat(flat, ": the NICs below are paired by the NCCL topology file ",
                           host.nccl_topology().path(), ", as NCCL reads it")
            : absl::StrCat(flat,
                           ": the NICs below are chosen by NUMA and order, not distance; "
                           "name the shape's NCCL topology file in selection.ncclTopoFile"));
  }
  if (std::string problem = NcclTopologyProblem(host); !problem.empty()) sel.add_notes(problem);
  const PairIndex pairs = IndexTopology(host);
  // The pairing of the snapshot (computed once per inventory), or of this host now.
  std::optional<GpuPairing> computed;
  const GpuPairing& pairing =
      host.has_pairing() ? host.pairing() : computed.emplace(PairGpusOver(host, *built, policy));
  std::map<std::string, const GpuPair*> paired;
  for (const GpuPair& p : pairing.pairs()) paired[p.gpu()] = &p;

  std::map<const Candidate*, int> load;
  for (const Request& req : *requests) {
    std::optional<int> gpu_numa = GpuNuma(*req.acc);
    const GpuPair* pair = nullptr;
    if (auto it = paired.find(req.canonical); it != paired.end()) pair = it->second;
    std::vector<Scored> eligible = ScoreFor(*built, pairs, req.canonical, gpu_numa, policy);
    for (Scored& s : eligible) {
      s.load = load[s.c];
      s.paired = pair != nullptr && pair->rdma_device() == s.c->dev->name() &&
                 pair->port() == s.c->port->number();
    }
    Rank(&eligible);
    const Scored& w = eligible.front();
    const Candidate& c = *w.c;
    load[&c]++;

    GpuAssignment* a = sel.add_assignments();
    a->set_gpu(req.canonical);
    a->set_given(req.given);
    FillPort(c, a);
    a->set_distance(w.distance);
    FillPortFacts(host, policy, req.acc, a);
    if (c.numa) a->set_numa_node(*c.numa);
    a->set_rate_gbps(c.rate.value_or(0));
    a->add_reasons(Summary(w, req.canonical, gpu_numa));
    if (eligible.size() > 1) {
      const Scored& r = eligible[1];
      a->add_reasons(BeatText(w, r, Compare(w, r).first, gpu_numa, policy.prefer_vfs(), pair));
    } else {
      a->add_reasons("only eligible port");
    }
    // The GID and function-type tiers outrank distance; say so wherever they overrode it.
    for (const Scored& l : eligible) {
      if (&l == &w || l.distance >= w.distance) continue;
      Criterion k = Compare(w, l).first;
      if (k == Criterion::kGid) {
        a->add_reasons(absl::StrCat("passed over closer ", l.c->name, " (",
                                    DistanceName(l.distance), "): it has ", l.c->NoGidText()));
      } else if (k == Criterion::kFunction) {
        a->add_reasons(absl::StrCat("passed over closer ", l.c->is_vf ? "VF " : "PF ", l.c->name,
                                    " (", DistanceName(l.distance),
                                    "): ", FunctionPreference(policy.prefer_vfs())));
      }
    }

    std::map<const Candidate*, const Scored*> scored;
    for (const Scored& s : eligible) scored[s.c] = &s;
    for (const Candidate& other : cands) {
      if (&other == &c) continue;
      Rejection* rej = a->add_rejected();
      rej->set_port(other.name);
      auto it = scored.find(&other);
      if (it == scored.end()) {
        rej->set_reason(other.excluded);
      } else {
        rej->set_reason(
            LostText(*it->second, w, Compare(w, *it->second).first, gpu_numa, policy.prefer_vfs()));
      }
    }
  }

  return sel;
}

absl::StatusOr<Selection> SelectNics(const Host& host, const std::vector<std::string>& gpus,
                                     const SelectionPolicy& policy, const MigResolver* mig) {
  absl::StatusOr<Selection> sel = SelectPorts(host, gpus, policy, mig);
  if (!sel.ok()) return sel;
  if (absl::Status s = FillEnv(host, policy, EnvOptions{}, &*sel); !s.ok()) return s;
  return sel;
}

}  // namespace fabric
