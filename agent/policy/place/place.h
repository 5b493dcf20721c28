// Which GPUs of a host a job of N GPUs should get: the sets closest to their RDMA NICs.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

class MigResolver;  // agent/policy/select/gpu_names.h

// Sets of up to this many combinations are enumerated exhaustively; larger ones are searched.
inline constexpr uint64_t kPlaceExhaustiveLimit = 20000;
// PlaceRequest.max_results when the request leaves it 0, and the most it may ask for.
inline constexpr uint32_t kPlaceDefaultResults = 5;
inline constexpr uint32_t kPlaceMaxResults = 100;

// The best GPU sets of req.gpu_count() GPUs on `host`, ranked by topology, each with its NIC
// assignment (SelectNics under `policy`, env filled).
//
// Candidates are the compute accelerators (never a management display), narrowed by req.vendor
// ("nvidia", "amd", "intel", "habana" in any case, or a PCI vendor ID "0x10de" / "10de") and by
// req.candidates (GPU names in any form SelectNics takes, as ResolveGpu reads them: PCI
// addresses, indices, GPU-/MIG- UUIDs; duplicates count once; at most kMaxGpusPerRequest). Notes
// say which accelerators the vendor filter left out.
//
// A set's score, lower is better, compared in this order:
//   1. worst_distance: the farthest GPU-to-chosen-port distance class (PIX=1 .. SYS=5);
//   2. distance_sum: the sum of those ranks;
//   3. numa_nodes: distinct NUMA nodes of the GPUs (all GPUs of unknown NUMA count as one node);
//   4. shared_ports: GPUs whose port is also an earlier GPU's (SelectNics spreads GPUs over
//      equally good ports, so this counts what spreading could not avoid);
//   5. the GPUs' addresses in PCI order, so that the result is deterministic.
// req.same_numa_node drops sets with numa_nodes > 1 (unknown NUMA is a node of its own, so a set
// mixing known and unknown is dropped); req.one_nic_per_gpu drops sets with shared_ports > 0.
//
// How: SelectNics runs once on all candidates. A GPU's chosen distance class does not depend on
// the other GPUs of a request (only the spreading step does), so that call gives each GPU's
// distance rank and its "tier": the ports that tie with its winner on every criterion before
// spreading (its rejections say so), in SelectNics's name order. A set's score then costs O(k) to
// compute, spreading simulated exactly over the tiers. The sets are ranked on those scores;
// SelectNics then runs on the best sets only, in rank order, and the placements carry its real
// selection (and shared_ports recounted from it) and are sorted once more on the real scores.
//
// Enumeration: every combination when C(n, k) <= kPlaceExhaustiveLimit (n candidates, k =
// gpu_count), O(C(n, k) * k). Beyond that (e.g. 32 of 64 GPUs) a deterministic beam search: it
// is seeded with every GPU alone, grows every kept set by each other GPU, keeps the best W sets
// of each size (W = max(n, 4 * max_results), at most 256; constraints prune as it goes), so
// O(k * W * n * k); the best sets found are not guaranteed to be the best that exist, and a note
// says so. Either way there are 1 + max_results SelectNics calls (up to 64 more only when a
// real selection breaks a constraint the model did not predict), and they dominate the time: on
// the 8-GPU example host roce-9port a call takes about 0.3-0.9 ms for any gpu_count (optimized
// build); 32 of 64 GPUs take about 70 ms, mostly the search.
//
// Errors: InvalidArgument for gpu_count 0, max_results above kPlaceMaxResults, an unknown vendor,
// a malformed candidate address or one that is a management display, or a bad policy; NotFound
// for a candidate the host does not have; ResourceExhausted for more than kMaxGpusPerRequest
// candidates; SelectNics's FailedPrecondition when the host has no
// RDMA device or no active port. gpu_count above the number of candidates is not an error: the
// response has no placements and a note with the count (a scheduler asking "can this host fit
// N"), as it does when the constraints leave no set.
// Candidates named MIG-... resolve through `mig`, as SelectNics's GPUs do.
absl::StatusOr<v1::PlaceResponse> Place(const v1::Host& host, const v1::PlaceRequest& req,
                                        const v1::SelectionPolicy& policy,
                                        const MigResolver* mig = nullptr);

}  // namespace fabric
