#include "agent/policy/place/place.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/common/excerpt.h"
#include "agent/common/natural_order.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/policy/select/gpu_names.h"
#include "agent/policy/select/select.h"
#include "agent/policy/select/selection_section.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: enum values of the model

namespace {

// ---------------------------------------------------------------------------------------------
// Vendor filter.

struct KnownVendor {
  const char* name;  // Lower case, as a request writes it.
  AcceleratorVendor vendor;
  const char* pci_id;
};

constexpr KnownVendor kVendors[] = {
    {"nvidia", ACCELERATOR_VENDOR_NVIDIA, "10de"},
    {"amd", ACCELERATOR_VENDOR_AMD, "1002"},
    {"intel", ACCELERATOR_VENDOR_INTEL, "8086"},
    {"habana", ACCELERATOR_VENDOR_UNSPECIFIED, "1da3"},  // Habana Labs (Intel Gaudi).
};

struct VendorFilter {
  std::string text;  // As the request wrote it.
  std::string name;  // Lower case; empty when only the PCI ID is known.
  AcceleratorVendor vendor = ACCELERATOR_VENDOR_UNSPECIFIED;
  std::string pci_id;  // Four lower-case hex digits.

  bool Matches(const Accelerator& a) const {
    if (vendor != ACCELERATOR_VENDOR_UNSPECIFIED && a.vendor() == vendor) return true;
    const std::string vn = absl::AsciiStrToLower(a.vendor_name());
    if (!name.empty() && (vn == name || absl::StartsWith(vn, absl::StrCat(name, " ")))) {
      return true;
    }
    if (vn == absl::StrCat("0x", pci_id)) return true;  // Discovery's name for unknown vendors.
    return a.has_pci() && absl::AsciiStrToLower(a.pci().vendor_id()) == pci_id;
  }
};

bool IsHex4(const std::string& s) {
  return s.size() == 4 && std::all_of(s.begin(), s.end(), [](char c) {
           return absl::ascii_isxdigit(static_cast<unsigned char>(c));
         });
}

// nullopt: no filter.
absl::StatusOr<std::optional<VendorFilter>> ParseVendor(const std::string& text) {
  std::string s = absl::AsciiStrToLower(text);
  absl::StripAsciiWhitespace(&s);
  if (s.empty()) return std::nullopt;
  VendorFilter f;
  f.text = text;
  for (const KnownVendor& k : kVendors) {
    if (s == k.name) {
      f.name = k.name;
      f.vendor = k.vendor;
      f.pci_id = k.pci_id;
      return f;
    }
  }
  std::string id = absl::StartsWith(s, "0x") ? s.substr(2) : s;
  if (!IsHex4(id)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown vendor %s (want nvidia, amd, intel, habana or a PCI vendor ID such as "
        "0x10de)",
        Excerpt(text)));
  }
  f.pci_id = id;
  for (const KnownVendor& k : kVendors) {
    if (id == k.pci_id) {
      f.name = k.name;
      f.vendor = k.vendor;
    }
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// Addresses.

std::optional<std::string> Canonical(const std::string& addr) {
  absl::StatusOr<std::string> c = ParsePciAddress(addr);
  if (!c.ok()) return std::nullopt;
  return *c;
}

// PCI order of canonical addresses: the domain by value (a longer domain is a larger number),
// then the fixed-width rest, whose string order is numeric order.
bool PciLess(const std::string& a, const std::string& b) {
  const size_t da = a.find(':'), db = b.find(':');
  if (da != db) return da < db;
  return a < b;
}

// ---------------------------------------------------------------------------------------------
// Scoring.

int Rank(DistanceClass d) {
  // Unspecified counts as SYS: nothing shows it is closer.
  if (d < DISTANCE_CLASS_PIX || d > DISTANCE_CLASS_SYS) return DISTANCE_CLASS_SYS;
  return static_cast<int>(d);
}

// A candidate GPU as its single-GPU selection sees it.
struct Gpu {
  std::string addr;  // Canonical.
  std::optional<int> numa;
  int rank = DISTANCE_CLASS_SYS;  // Distance rank of its best port.
  // Ports (ids) that tie with the best on every criterion before spreading, in SelectNics's
  // name order; the best first.
  std::vector<int> tier;
};

struct Score {
  int worst = 0;
  int sum = 0;
  int numa = 0;
  int shared = 0;
  std::vector<int> members;  // Indices into the candidates (PCI order), ascending.
};

bool Better(const Score& a, const Score& b) {
  if (a.worst != b.worst) return a.worst < b.worst;
  if (a.sum != b.sum) return a.sum < b.sum;
  if (a.numa != b.numa) return a.numa < b.numa;
  if (a.shared != b.shared) return a.shared < b.shared;
  return a.members < b.members;
}

// Distinct NUMA nodes; every unknown counts as the one node "unknown". Reorders `nodes`.
int CountNuma(std::vector<std::optional<int>>& nodes) {
  std::sort(nodes.begin(), nodes.end());
  return static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

// Scores sets from the per-GPU facts.
class Model {
 public:
  Model(const std::vector<Gpu>& gpus, int ports) : gpus_(gpus), load_(ports, 0) {}

  void Fill(Score* s) {
    s->worst = 0;
    s->sum = 0;
    s->shared = 0;
    numa_.clear();
    for (int i : s->members) {
      const Gpu& g = gpus_[i];
      s->worst = std::max(s->worst, g.rank);
      s->sum += g.rank;
      numa_.push_back(g.numa);
      // SelectNics's spreading: the tier port serving the fewest GPUs so far, name order first.
      int best = g.tier.front();
      for (int p : g.tier) {
        if (load_[p] < load_[best]) best = p;
      }
      if (load_[best] > 0) s->shared++;
      load_[best]++;
    }
    for (int i : s->members) {
      for (int p : gpus_[i].tier) load_[p] = 0;
    }
    s->numa = CountNuma(numa_);
  }

 private:
  const std::vector<Gpu>& gpus_;
  std::vector<int> load_;
  std::vector<std::optional<int>> numa_;
};

struct Constraints {
  bool same_numa = false;
  bool one_nic = false;
  // Why sets were left out; counted by the exhaustive search only.
  uint64_t dropped_numa = 0;
  uint64_t dropped_shared = 0;

  // Whether `s` passes; counts it when it does not.
  bool Admit(const Score& s) {
    if (same_numa && s.numa > 1) {
      dropped_numa++;
      return false;
    }
    if (one_nic && s.shared > 0) {
      dropped_shared++;
      return false;
    }
    return true;
  }
};

// C(n, k), or limit + 1 once it exceeds `limit`.
uint64_t Combinations(uint64_t n, uint64_t k, uint64_t limit) {
  if (k > n) return 0;
  k = std::min(k, n - k);
  uint64_t c = 1;
  for (uint64_t i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;  // Exact: a product of i consecutive numbers divides by i!.
    if (c > limit) return limit + 1;
  }
  return c;
}

std::string ApproxCombinations(int n, int k) {
  const double log10c =
      (std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0)) / std::log(10.0);
  if (log10c < 15) return absl::StrFormat("%.0f", std::round(std::pow(10.0, log10c)));
  return absl::StrFormat("about 1e%d", static_cast<int>(log10c));
}

std::vector<Score> Exhaustive(int n, int k, Model& model, Constraints& cons) {
  std::vector<Score> out;
  Score s;
  s.members.resize(k);
  for (int i = 0; i < k; ++i) s.members[i] = i;
  while (true) {
    model.Fill(&s);
    if (cons.Admit(s)) out.push_back(s);
    // Next combination in lexicographic order.
    int i = k - 1;
    while (i >= 0 && s.members[i] == n - k + i) --i;
    if (i < 0) break;
    s.members[i]++;
    for (int j = i + 1; j < k; ++j) s.members[j] = s.members[j - 1] + 1;
  }
  return out;
}

std::vector<Score> Beam(int n, int k, size_t width, Model& model, Constraints& cons) {
  std::vector<Score> beam;
  for (int i = 0; i < n; ++i) {
    Score s;
    s.members = {i};
    model.Fill(&s);
    if (cons.Admit(s)) beam.push_back(std::move(s));
  }
  for (int size = 2; size <= k && !beam.empty(); ++size) {
    std::vector<Score> next;
    for (const Score& b : beam) {
      for (int j = 0; j < n; ++j) {
        if (std::binary_search(b.members.begin(), b.members.end(), j)) continue;
        Score s;
        s.members = b.members;
        s.members.insert(std::upper_bound(s.members.begin(), s.members.end(), j), j);
        model.Fill(&s);
        if (cons.Admit(s)) next.push_back(std::move(s));
      }
    }
    // Better ends on the members, so copies of a set reached from two parents end up adjacent.
    std::sort(next.begin(), next.end(), Better);
    next.erase(std::unique(next.begin(), next.end(),
                           [](const Score& a, const Score& b) { return a.members == b.members; }),
               next.end());
    if (next.size() > width) next.resize(width);
    beam = std::move(next);
  }
  return beam;
}

// Whether SelectNics rejected a port that ties with the winner on every criterion before
// spreading: it lost on spreading (it already serves more GPUs of the request), on name or port
// order, or on nothing at all. A port that lost on GID, function type, distance, NUMA or rate
// is not in the tier. These are the reasons of agent/policy/select/select.cc (LostText for kSpread,
// kName, kPort and kTie); place_test checks the model built on them against SelectNics.
bool TiedBeforeSpreading(const std::string& reason) {
  return absl::StrContains(reason, "(lost on spreading:") ||
         absl::StartsWith(reason, "lost on name order") ||
         absl::StartsWith(reason, "lost on port order") || absl::StartsWith(reason, "tied with");
}

// SelectNics's tie order of "dev:port" names: device in natural order, then port number.
bool PortNameLess(const std::string& a, const std::string& b) {
  const size_t ca = a.rfind(':'), cb = b.rfind(':');
  const std::string da = a.substr(0, ca), db = b.substr(0, cb);
  if (da != db) return NaturalLess(da, db);
  uint32_t pa = 0, pb = 0;
  (void)absl::SimpleAtoi(a.substr(ca + 1), &pa);
  (void)absl::SimpleAtoi(b.substr(cb + 1), &pb);
  return pa < pb;
}

int PortId(std::map<std::string, int>& ids, const std::string& name) {
  auto [it, inserted] = ids.emplace(name, static_cast<int>(ids.size()));
  return it->second;
}

std::string Join(const std::vector<std::string>& v) { return absl::StrJoin(v, ", "); }

}  // namespace

absl::StatusOr<PlaceResponse> Place(const Host& host, const PlaceRequest& req,
                                    const SelectionPolicy& policy, const MigResolver* mig) {
  if (req.gpu_count() == 0) return absl::InvalidArgumentError("gpu_count must be at least 1");
  if (req.max_results() > kPlaceMaxResults) {
    return absl::InvalidArgumentError(absl::StrFormat("max_results %d exceeds the limit of %d",
                                                      req.max_results(), kPlaceMaxResults));
  }
  if (absl::Status s = ValidatePolicy(policy); !s.ok()) return s;
  const size_t max_results = req.max_results() == 0 ? kPlaceDefaultResults : req.max_results();
  absl::StatusOr<std::optional<VendorFilter>> vendor = ParseVendor(req.vendor());
  if (!vendor.ok()) return vendor.status();

  // Compute accelerators by canonical address.
  std::map<std::string, const Accelerator*> by_addr;
  std::vector<std::string> unparsable;
  for (const Accelerator& a : host.accelerators()) {
    std::optional<std::string> c = Canonical(a.pci_address());
    if (!c) {
      if (!a.management_display()) unparsable.push_back(a.pci_address());
      continue;
    }
    by_addr.emplace(*c, &a);
  }

  if (static_cast<size_t>(req.candidates_size()) > kMaxGpusPerRequest) {
    return absl::ResourceExhaustedError(absl::StrCat("candidates: ", req.candidates_size(),
                                                     " given; at most ", kMaxGpusPerRequest,
                                                     " per request"));
  }
  std::set<std::string> wanted;  // Canonical; empty: every compute accelerator.
  for (const std::string& given : req.candidates()) {
    // Every GPU name form SelectNics takes (gpu_names.h).
    absl::StatusOr<ResolvedGpu> gpu = ResolveGpu(host, given, mig, "candidate");
    if (!gpu.ok()) return gpu.status();
    const std::string* c = &gpu->pci_address;
    if (!by_addr.count(*c)) {
      return absl::NotFoundError(
          absl::StrFormat("candidate %s is not an accelerator of this host", *c));
    }
    wanted.insert(*c);
  }

  PlaceResponse resp;
  if (!unparsable.empty()) {
    resp.add_notes(
        absl::StrCat("left out accelerators without a valid PCI address: ", Join(unparsable)));
  }
  std::vector<std::string> addrs;
  std::vector<std::string> other_vendor;
  for (const auto& [addr, acc] : by_addr) {
    if (acc->management_display()) continue;
    if (!wanted.empty() && !wanted.count(addr)) continue;
    if (*vendor && !(*vendor)->Matches(*acc)) {
      other_vendor.push_back(absl::StrFormat(
          "%s (%s)", addr, acc->vendor_name().empty() ? "vendor unknown" : acc->vendor_name()));
      continue;
    }
    addrs.push_back(addr);
  }
  std::sort(addrs.begin(), addrs.end(), PciLess);
  if (!other_vendor.empty()) {
    resp.add_notes(
        absl::StrFormat("vendor %s leaves out %s", Excerpt((*vendor)->text), Join(other_vendor)));
  }

  const int n = static_cast<int>(addrs.size());
  if (req.gpu_count() > addrs.size()) {
    resp.add_notes(absl::StrFormat("gpu_count %d exceeds the %d candidate GPU%s%s", req.gpu_count(),
                                   n, n == 1 ? "" : "s",
                                   n == 0 ? "" : absl::StrCat(": ", Join(addrs))));
    return resp;
  }
  const int k = static_cast<int>(req.gpu_count());

  // One selection of every candidate: each GPU's distance rank and its tier of equally good
  // ports. Only the spreading step depends on the other GPUs of a request, and a tier-mate loses
  // to the winner on spreading or name order whatever the load, so the tiers are exact.
  absl::StatusOr<Selection> all = SelectNics(host, addrs, policy);
  if (!all.ok()) return all.status();
  std::vector<Gpu> gpus(n);
  std::map<std::string, int> port_ids;
  for (int i = 0; i < n; ++i) {
    const GpuAssignment& a = all->assignments(i);
    Gpu& g = gpus[i];
    g.addr = addrs[i];
    const Accelerator& acc = *by_addr.at(addrs[i]);
    if (acc.has_pci() && acc.pci().has_numa_node()) g.numa = acc.pci().numa_node();
    g.rank = Rank(a.distance());
    std::vector<std::string> tier = {absl::StrCat(a.rdma_device(), ":", a.port())};
    for (const Rejection& r : a.rejected()) {
      if (TiedBeforeSpreading(r.reason())) tier.push_back(r.port());
    }
    std::stable_sort(tier.begin(), tier.end(), PortNameLess);
    for (const std::string& p : tier) g.tier.push_back(PortId(port_ids, p));
  }

  Model model(gpus, static_cast<int>(port_ids.size()));
  Constraints cons;
  cons.same_numa = req.same_numa_node();
  cons.one_nic = req.one_nic_per_gpu();
  const uint64_t combos = Combinations(n, k, kPlaceExhaustiveLimit);
  const bool exhaustive = combos <= kPlaceExhaustiveLimit;
  std::vector<Score> ranked;
  if (exhaustive) {
    ranked = Exhaustive(n, k, model, cons);
  } else {
    const size_t width = std::min<size_t>(std::max<size_t>(n, 4 * max_results), 256);
    ranked = Beam(n, k, width, model, cons);
    resp.add_notes(absl::StrFormat(
        "%s sets of %d of %d GPUs are too many to try: beam search of width %d (the best sets "
        "found, not necessarily the best that exist)",
        ApproxCombinations(n, k), k, n, width));
  }
  std::sort(ranked.begin(), ranked.end(), Better);

  // The real selection of the best sets, in rank order, until max_results pass the constraints.
  struct Result {
    Score score;
    Selection selection;
  };
  std::vector<Result> results;
  Constraints real;
  real.same_numa = cons.same_numa;
  real.one_nic = cons.one_nic;
  // A constraint the real selection breaks means the model was off: try a few more, not all.
  const size_t max_tries = max_results + 64;
  size_t tries = 0;
  for (const Score& s : ranked) {
    if (results.size() >= max_results || tries++ >= max_tries) break;
    std::vector<std::string> set;
    for (int i : s.members) set.push_back(addrs[i]);
    absl::StatusOr<Selection> sel = SelectNics(host, set, policy);
    if (!sel.ok()) return sel.status();
    Score r;
    r.members = s.members;
    std::set<std::string> seen;
    std::vector<std::optional<int>> numa;
    for (int j = 0; j < sel->assignments_size(); ++j) {
      const GpuAssignment& a = sel->assignments(j);
      r.worst = std::max(r.worst, Rank(a.distance()));
      r.sum += Rank(a.distance());
      if (!seen.insert(absl::StrCat(a.rdma_device(), ":", a.port())).second) r.shared++;
      numa.push_back(gpus[s.members[j]].numa);
    }
    r.numa = CountNuma(numa);
    if (!real.Admit(r)) continue;
    results.push_back(Result{std::move(r), *std::move(sel)});
  }
  std::stable_sort(results.begin(), results.end(),
                   [](const Result& a, const Result& b) { return Better(a.score, b.score); });

  for (Result& r : results) {
    Placement* p = resp.add_placements();
    for (int i : r.score.members) p->add_gpus(addrs[i]);
    p->set_worst_distance(static_cast<DistanceClass>(r.score.worst));
    p->set_distance_sum(r.score.sum);
    p->set_numa_nodes(r.score.numa);
    p->set_shared_ports(r.score.shared);
    *p->mutable_selection() = std::move(r.selection);
  }

  if (exhaustive && (cons.dropped_numa > 0 || cons.dropped_shared > 0)) {
    std::vector<std::string> why;
    if (cons.dropped_numa > 0) {
      why.push_back(absl::StrFormat("%d span NUMA nodes (same_numa_node)", cons.dropped_numa));
    }
    if (cons.dropped_shared > 0) {
      why.push_back(
          absl::StrFormat("%d share an RDMA port (one_nic_per_gpu)", cons.dropped_shared));
    }
    resp.add_notes(absl::StrFormat("of %d sets of %d GPUs, %s", combos, k, Join(why)));
  }
  if (resp.placements().empty() && (cons.same_numa || cons.one_nic)) {
    std::vector<std::string> asked;
    if (cons.same_numa) asked.push_back("on one NUMA node (same_numa_node)");
    if (cons.one_nic) asked.push_back("with a port of its own per GPU (one_nic_per_gpu)");
    std::map<std::string, int> per_node;
    for (const Gpu& g : gpus) per_node[g.numa ? absl::StrCat(*g.numa) : "unknown"]++;
    std::vector<std::string> nodes;
    for (const auto& [node, count] : per_node) nodes.push_back(absl::StrCat(node, ": ", count));
    resp.add_notes(absl::StrFormat("no set of %d GPUs is %s (candidate GPUs per NUMA node: %s)", k,
                                   absl::StrJoin(asked, " and "), Join(nodes)));
  }
  return resp;
}

}  // namespace fabric
