// The inventory cycle's two seams. Publishers act on each published snapshot (the NFD feature
// file, LLDP sockets for new netdevs; the watch hub wakes through the store instead). Neighbour
// sources lay what the agent hears onto each host before it is built (LLDP, InfiniBand SMPs).
// The cycle knows them only through these interfaces, so a new publisher is a class that
// subscribes, not a branch in the cycle.
#pragma once

#include <vector>

#include "absl/time/time.h"
#include "agent/daemon/cycle/build.h"
#include "agent/daemon/cycle/snapshot.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"

namespace fabric {

// What one publish brought.
struct Publication {
  const Snapshot& snapshot;  // Now current in the store.
  const Snapshot* previous;  // The one it replaced; null for the first.
  const Built& built;        // Its changes, whether the host changed, whether labels are the same.
  absl::Time now;
};

class Publisher {
 public:
  virtual ~Publisher() = default;
  // On the loop thread, after the store has the snapshot, in the order the publishers were
  // added. Errors are the publisher's to log and retry: one failing publisher stops no other.
  virtual void Publish(const Publication& p) = 0;
  // A rescan or event that changed nothing (no snapshot built): a publisher whose last action
  // failed tries again with the current snapshot, so a fault that was fixed clears without a
  // change of the inventory.
  virtual void Retry(const Snapshot& /*current*/, absl::Time /*now*/) {}
  // What health says of the publisher (a file it cannot write); the cycle publishes again when
  // this changes after Publish or Retry.
  virtual void Findings(absl::Time /*now*/, std::vector<v1::Finding>* /*out*/) const {}
};

class NeighborSource {
 public:
  virtual ~NeighborSource() = default;
  // A host about to be published: follow its ports (those gone or down lose their neighbour).
  virtual void Follow(const v1::Host& host, absl::Time now) = 0;
  // Whether `host` shows what the source holds; when the published one does not, the cycle
  // publishes a host sharing everything else with the neighbours laid.
  virtual bool Shows(const v1::Host& host) const = 0;
  // Sets, changes or clears this source's neighbours on `host` (a host that Refresh, ShareHost
  // or ScannedHost returned).
  virtual void Lay(v1::Host* host) const = 0;
  // What health says of the source.
  virtual void Findings(absl::Time now, std::vector<v1::Finding>* out) const = 0;
};

}  // namespace fabric
