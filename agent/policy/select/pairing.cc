#include "agent/policy/select/pairing.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"
#include "agent/policy/select/candidates.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: enum values of the model
using select_internal::Candidate;
using select_internal::Candidates;
using select_internal::Criterion;
using select_internal::Scored;

namespace {

std::string Ordinal(size_t i) {  // 0-based
  static constexpr const char* kWords[] = {"first", "second", "third",    "fourth",
                                           "fifth", "sixth",  "seventh",  "eighth",
                                           "ninth", "tenth",  "eleventh", "twelfth"};
  if (i < std::size(kWords)) return kWords[i];
  return absl::StrCat("number ", i + 1);
}

std::string Count(size_t n, std::string_view noun) {
  static constexpr const char* kWords[] = {"no",   "one", "two",   "three", "four",
                                           "five", "six", "seven", "eight"};
  std::string number = n < std::size(kWords) ? kWords[n] : absl::StrCat(n);
  return absl::StrCat(number, " ", Av(noun), n == 1 ? "" : "s");
}

// The PCI path of a function down to itself.
std::vector<std::string> FullPath(const PciFunction& pci) {
  std::vector<std::string> p(pci.path().begin(), pci.path().end());
  p.push_back(pci.address());
  return p;
}

// Where a group of GPUs and ports meet: the deepest PCI element above all of them ("switch",
// "root port", "host bridge"), else their common NUMA node, else the host. PCIe paths read as
// topology.h reads them: root complex, root port, then switch upstream/downstream port pairs.
std::string MeetingPoint(const std::vector<const PciFunction*>& members) {
  std::vector<std::string> common;
  bool first = true, same_numa = true;
  std::optional<int> numa;
  for (const PciFunction* f : members) {
    std::vector<std::string> p = FullPath(*f);
    if (first) {
      common = p;
      numa = f->has_numa_node() ? std::optional<int>(f->numa_node()) : std::nullopt;
    } else {
      size_t n = 0;
      while (n < common.size() && n < p.size() && common[n] == p[n]) n++;
      common.resize(n);
      if (!f->has_numa_node() || numa != f->numa_node()) same_numa = false;
    }
    first = false;
  }
  // The members themselves are never their own meeting point.
  if (!common.empty() && members.size() > 1) {
    for (const PciFunction* f : members) {
      if (common.back() == f->address()) common.pop_back();
      if (common.empty()) break;
    }
  }
  if (common.size() >= 3) {
    // Index 2, 4, ... are switch upstream ports; a downstream port belongs to the switch above.
    size_t up = (common.size() - 1) % 2 == 0 ? common.size() - 1 : common.size() - 2;
    return absl::StrCat("under switch ", common[up]);
  }
  if (common.size() == 2) return absl::StrCat("under root port ", common[1]);
  if (common.size() == 1) return absl::StrCat("under host bridge ", common[0]);
  if (same_numa && numa) return absl::StrCat("on NUMA node ", *numa);
  return "on this host";
}

std::string PortLabel(const Candidate& c) {
  return c.dev->ports_size() > 1 ? c.name : c.dev->name();
}

// PCI order of ports: the device's PCI address, then port number; software devices last.
bool PciLess(const Candidate* a, const Candidate* b) {
  const std::string& pa = a->dev->has_pci() ? a->dev->pci().address() : "";
  const std::string& pb = b->dev->has_pci() ? b->dev->pci().address() : "";
  if (pa.empty() != pb.empty()) return !pa.empty();
  if (pa != pb) return pa < pb;
  if (a->dev->name() != b->dev->name()) return NaturalLess(a->dev->name(), b->dev->name());
  return a->port->number() < b->port->number();
}

struct Gpu {
  const Accelerator* acc;
  std::string canonical;
};

}  // namespace

GpuPairing PairGpus(const Host& host, const SelectionPolicy& policy) {
  absl::StatusOr<Candidates> cands = select_internal::BuildCandidates(host, policy);
  if (!cands.ok()) return GpuPairing();
  return select_internal::PairGpusOver(host, *cands, policy);
}

namespace select_internal {

GpuPairing PairGpusOver(const Host& host, const Candidates& candidates,
                        const SelectionPolicy& policy) {
  GpuPairing out;
  const select_internal::PairIndex pairs = select_internal::IndexTopology(host);

  // GPUs grouped by the set of ports tied best for them, in PCI order.
  std::vector<Gpu> gpus;
  for (const Accelerator& a : host.accelerators()) {
    if (!a.management_display())
      gpus.push_back({&a, select_internal::CanonicalPci(a.pci_address())});
  }
  std::stable_sort(gpus.begin(), gpus.end(),
                   [](const Gpu& a, const Gpu& b) { return a.canonical < b.canonical; });
  std::map<std::vector<const Candidate*>, std::vector<const Gpu*>> groups;
  for (const Gpu& g : gpus) {
    std::vector<Scored> scored = select_internal::ScoreFor(
        candidates, pairs, g.canonical, select_internal::GpuNuma(*g.acc), policy);
    if (scored.empty()) continue;
    select_internal::Rank(&scored);
    std::vector<const Candidate*> tied;
    for (const Scored& s : scored) {
      if (select_internal::Compare(scored.front(), s).first < Criterion::kPaired) break;
      tied.push_back(s.c);
    }
    std::sort(tied.begin(), tied.end(), PciLess);
    groups[tied].push_back(&g);
  }

  // Tightest ties first (a GPU with one best port claims it), then the broader ones: there a
  // GPU takes the equal port fewest GPUs are paired with so far, in PCI order, so that a GPU
  // whose own switch-mate is down does not share a NIC another GPU already has.
  std::vector<std::pair<const std::vector<const Candidate*>*, const std::vector<const Gpu*>*>>
      order;
  for (const auto& [ports, members] : groups) order.emplace_back(&ports, &members);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.first->size() != b.first->size()) return a.first->size() < b.first->size();
    return a.second->front()->canonical < b.second->front()->canonical;
  });
  std::map<const Candidate*, int> load;
  std::map<const Gpu*, GpuPair> by_gpu;
  for (const auto& [ports_ptr, members_ptr] : order) {
    const std::vector<const Candidate*>& ports = *ports_ptr;
    const std::vector<const Gpu*>& members = *members_ptr;
    std::vector<const PciFunction*> functions;
    for (const Gpu* g : members) {
      if (g->acc->has_pci()) functions.push_back(&g->acc->pci());
    }
    for (const Candidate* c : ports) {
      if (c->dev->has_pci()) functions.push_back(&c->dev->pci());
    }
    const std::string where = MeetingPoint(functions);
    bool claimed = false;  // Some of these ports were paired with GPUs of other groups.
    for (const Candidate* c : ports) claimed |= load[c] > 0;
    for (size_t i = 0; i < members.size(); i++) {
      const Candidate* c = ports.front();
      for (const Candidate* q : ports) {
        if (load[q] < load[c]) c = q;
      }
      load[c]++;
      GpuPair p;
      p.set_gpu(members[i]->canonical);
      p.set_rdma_device(c->dev->name());
      p.set_port(c->port->number());
      if (ports.size() == 1) {
        p.set_reason(absl::StrCat("paired with ", PortLabel(*c), ": the only best port for ",
                                  members.size() == 1 ? "the GPU" : Count(members.size(), "GPU"),
                                  " ", where));
      } else {
        std::string reason = absl::StrCat("paired with ", PortLabel(*c), ": ", Ordinal(i), " of ",
                                          Count(members.size(), "GPU"), " ", where);
        if (members.size() == 1) {
          reason = absl::StrCat("paired with ", PortLabel(*c), ": the only GPU ", where);
        }
        absl::StrAppend(&reason, ", which has ", Count(ports.size(), "equal port"), " (PCI order",
                        claimed ? ", ports other GPUs are paired with last" : "",
                        members.size() > ports.size() ? ", wrapping as NCCL does)" : ")");
        p.set_reason(std::move(reason));
      }
      by_gpu[members[i]] = std::move(p);
    }
  }
  for (const Gpu& g : gpus) {
    auto it = by_gpu.find(&g);
    if (it != by_gpu.end()) *out.add_pairs() = std::move(it->second);
  }
  return out;
}

}  // namespace select_internal

GpuPairing PairingOf(const Host& host, const SelectionPolicy& policy) {
  return host.has_pairing() ? host.pairing() : PairGpus(host, policy);
}

namespace {

void AppendCandidate(const select_internal::Candidate& c, std::string* out) {
  absl::StrAppend(out, c.name, c.roce ? " roce" : " ib", " gid=");
  if (c.gid != nullptr) {
    absl::StrAppend(out, c.gid->index(), "/", c.gid->gid(), "/", c.gid->ipv4(), "/", c.gid->ipv6(),
                    c.gid_ipv6 ? "/v6" : "");
  }
  absl::StrAppend(out, " subnet=", c.subnet, c.is_vf ? " vf" : "",
                  " numa=", c.numa ? absl::StrCat(*c.numa) : "?",
                  " rate=", c.rate ? absl::StrCat(*c.rate) : "?", " front=", c.front_end,
                  " excluded=", c.excluded, "\n");
}

}  // namespace

std::string RankingInputs(const Host& host, const SelectionPolicy& policy) {
  absl::StatusOr<Candidates> cands = select_internal::BuildCandidates(host, policy);
  if (!cands.ok()) return absl::StrCat("error: ", cands.status().ToString(), "\n");
  std::string out;
  for (const select_internal::Candidate& c : cands->all) AppendCandidate(c, &out);
  for (const std::string& n : cands->notes) absl::StrAppend(&out, "note ", n, "\n");
  return out;
}

std::string RankingInputs(const Host& host, const SelectionPolicy& policy,
                          const std::set<std::string>& subjects) {
  std::string out;
  for (const select_internal::Candidate& c :
       select_internal::PortCandidates(host, policy, [&](const RdmaDevice&d, const Port&p) {
         return subjects.count(absl::StrCat(d.name(), ":", p.number())) > 0 ||
                subjects.count(p.netdev()) > 0 || subjects.count(d.parent_netdev()) > 0;
       })) {
    AppendCandidate(c, &out);
  }
  return out;
}

}  // namespace fabric
