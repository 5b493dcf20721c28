// The ranking behind SelectNics and the host-wide pairing: every (device, port) as a candidate,
// scored against one GPU, and the comparison that orders them. Internal to agent/policy/select:
// both users rank with these, so a rule changes in one place.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric::select_internal {

// A (device, port) pair with everything the ranking needs.
struct Candidate {
  const v1::RdmaDevice* dev = nullptr;
  const v1::Port* port = nullptr;
  std::string name;  // "mlx5_1:1".
  bool roce = false;
  // The port's usable GID on its own netdev (agent/rdma/gid_choice.h): the lowest RoCE v2
  // IPv4-mapped one, else the lowest RoCE v2 global IPv6 one.
  const v1::Gid* gid = nullptr;
  bool gid_ipv6 = false;  // gid holds a global IPv6 address (IPv6-only RoCE), not an IPv4 one.
  std::string subnet;     // Connected subnet of the port's netdev holding gid->ipv4().
  bool is_vf = false;
  std::optional<int> numa;
  std::optional<double> rate;
  std::string front_end;  // Why this is a front-end (or denied) port; empty when not.
  std::string excluded;   // Why it cannot be chosen at all; empty when eligible.

  bool no_gid() const { return roce && gid == nullptr; }
  std::string NoGidText() const;
  std::string GidText() const;
};

// Every (device, port) of the host in natural name order, with front-end ports excluded when a
// back-end port is active (else used, with a note). FailedPrecondition when the host has no RDMA
// device or no active port.
struct Candidates {
  std::vector<Candidate> all;
  std::vector<std::string> notes;  // For Selection.notes: fallbacks taken, ports without a GID.
};
absl::StatusOr<Candidates> BuildCandidates(const v1::Host& host, const v1::SelectionPolicy& policy);

// The candidates of the ports `only` accepts (all when null), in the host's order, as each port
// alone makes them: before BuildCandidates' host-wide rules (front-end ports excluded when a
// back-end one is active) and notes.
using PortFilter = std::function<bool(const v1::RdmaDevice&, const v1::Port&)>;
std::vector<Candidate> PortCandidates(const v1::Host& host, const v1::SelectionPolicy& policy,
                                      const PortFilter& only);

// What the ranking compares, in order of precedence.
enum class Criterion {
  kGid,
  kFunction,
  kDistance,
  kNuma,
  kRate,
  kPaired,  // The host-wide pairing (pairing.h) among ports equal on everything above.
  kSpread,
  kName,
  kPort,
  kTie
};

// One candidate as seen from one GPU.
struct Scored {
  const Candidate* c = nullptr;
  int fn_tier = 0;  // 0: preferred function type (PF by default).
  v1::DistanceClass distance = v1::DISTANCE_CLASS_SYS;
  std::string distance_reason;
  bool same_numa = false;
  bool paired = false;  // The GPU's host-wide pair.
  int load = 0;         // GPUs of this request already assigned to the port.
};

// The topology pairs of a host by "<canonical gpu>|<device>", built once per request.
using PairIndex = absl::flat_hash_map<std::string, const v1::TopologyPair*>;
PairIndex IndexTopology(const v1::Host& host);

// The eligible candidates scored for the GPU at `gpu` (canonical PCI address), in `all`'s order,
// with `paired` and `load` unset.
std::vector<Scored> ScoreFor(const Candidates& cands, const PairIndex& pairs,
                             const std::string& gpu, std::optional<int> gpu_numa,
                             const v1::SelectionPolicy& policy);

// Which criterion first tells `a` and `b` apart, and whether `a` wins on it.
std::pair<Criterion, bool> Compare(const Scored& a, const Scored& b);

// Sorts best first (stable: candidates equal on every criterion keep their order).
void Rank(std::vector<Scored>* scored);

// PairGpus (pairing.h) over candidates already built for the same host and policy: SelectNics
// on a host without a snapshot's pairing builds them once for both.
v1::GpuPairing PairGpusOver(const v1::Host& host, const Candidates& candidates,
                            const v1::SelectionPolicy& policy);

// The port's part of an assignment: device, port, netdev, GID and its address, link layer.
void FillPort(const Candidate& c, v1::GpuAssignment* a);

// A GPU's NUMA node, when known.
std::optional<int> GpuNuma(const v1::Accelerator& acc);

// "0000:17:00.0" for any PCI address form; the text itself when it does not parse.
std::string CanonicalPci(std::string_view addr);

}  // namespace fabric::select_internal
