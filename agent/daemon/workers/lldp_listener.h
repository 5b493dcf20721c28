// LLDP for the agent: a packet socket on each physical netdev the inventory lists, the neighbour
// table they feed, and the neighbours laid onto every host the agent publishes. Loop thread only.
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/daemon/cycle/publisher.h"
#include "agent/fabric/neighbors/lldp_socket.h"
#include "agent/fabric/neighbors/neighbor_table.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"

namespace fabric {

// A neighbour source of the inventory cycle, and a publisher: new physical netdevs in a published
// host get a socket, gone ones lose theirs.
class LldpListener final : public NeighborSource, public Publisher {
 public:
  using Opener = std::function<absl::StatusOr<std::unique_ptr<neighbors::LldpReceiver>>(
      const std::string& netdev)>;
  struct Counters {
    uint64_t frames = 0;     // Taken from the sockets.
    uint64_t malformed = 0;  // Not an LLDPDU this agent can read (ParseLldpFrame's errors).
    uint64_t truncated = 0;  // Longer than kLldpMaxFrame.
    uint64_t open_failures = 0;
  };
  // `open` opens a receiver on a netdev (LldpSocketImpl by default).
  explicit LldpListener(Opener open = nullptr);

  // Listens on the physical netdevs of `host` (PhysicalNetdevs): opens a socket for each new one,
  // closes those gone (their neighbours with them). Whether the table lost a neighbour.
  bool Sync(const v1::Host& host, absl::Time now);
  // One pollfd per socket, appended.
  void AppendFds(std::vector<pollfd>* fds) const;
  // Reads what is queued on every socket (at most a few frames each per call, so that a flood
  // cannot hold the loop). Whether what the inventory shows changed.
  bool Drain(absl::Time now);
  // Neighbours whose TTL ran out. Whether any did.
  bool Expire(absl::Time now);
  absl::Time NextExpiry() const { return table_.NextExpiry(); }

  // How long a netdev listened on may stay silent before it is reported: three of the usual
  // 30 s transmit intervals.
  static constexpr absl::Duration kSilence = absl::Seconds(90);
  // Netdevs listened on for kSilence or longer that never heard a neighbour (or lost it).
  std::vector<std::string> Silent(absl::Time now) const;
  // When the next netdev becomes Silent (InfiniteFuture when none will).
  absl::Time NextSilence(absl::Time now) const;

  // The neighbour of each netdev of `host` as the table holds it: set, changed or cleared through
  // MutableNetdev (a host that Refresh, ShareHost or ScannedHost returned).
  void Lay(v1::Host* host) const override;
  // Whether `host` shows what the table holds.
  bool Shows(const v1::Host& host) const override;
  // Sockets follow the published hosts (Publish), not the hosts being built.
  void Follow(const v1::Host&, absl::Time) override {}
  void Findings(absl::Time now, std::vector<v1::Finding>* out) const override;
  // Sync when a device or netdev came or went.
  void Publish(const Publication& p) override;

  const neighbors::NeighborTable& table() const { return table_; }
  const Counters& counters() const { return counters_; }
  // Why a netdev has no socket (open failed, other than for a netdev missing in this network
  // namespace), by netdev.
  const std::map<std::string, std::string>& open_errors() const { return open_errors_; }
  size_t listening() const { return receivers_.size(); }

 private:
  // The neighbour `netdev` should show; nullopt when none.
  std::optional<v1::Neighbor> Want(const std::string& netdev) const;

  Opener open_;
  struct Receiver {
    std::unique_ptr<neighbors::LldpReceiver> socket;
    absl::Time since;  // Listening since.
  };
  std::map<std::string, Receiver> receivers_;
  std::map<std::string, std::string> open_errors_;
  std::set<std::string> missing_;  // Not in this network namespace: not opened again.
  neighbors::NeighborTable table_;
  Counters counters_;
};

// What health says of LLDP: netdevs it cannot listen on (WARNING), netdevs that heard nothing for
// kSilence (a note, with the usual reasons), neighbours that moved while heard (WARNING).
void LldpFindings(const LldpListener& l, absl::Time now, std::vector<v1::Finding>* out);

// The model's form of what a switch said.
v1::Neighbor NeighborProto(const neighbors::NeighborTable::Entry& e);

}  // namespace fabric
