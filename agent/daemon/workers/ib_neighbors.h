// InfiniBand neighbours for the agent: the node at the other end of each active InfiniBand port's
// cable, asked with directed-route SMPs (NodeInfo, NodeDescription: neighbors::QueryIbNeighbor)
// on a worker thread, so that a port whose SMI does not answer never holds the loop. Laid on the
// port's netdev (IPoIB) as the LLDP neighbours are on Ethernet netdevs, so NFD's leaf labels,
// rails, health and `fabricctl neighbors` read both alike. The loop thread calls every method.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/common/fd.h"
#include "agent/daemon/cycle/publisher.h"
#include "agent/fabric/neighbors/smp.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"

namespace fabric {

// A neighbour source of the inventory cycle.
class IbNeighbors final : public NeighborSource {
 public:
  // Asks the node behind port `port` of RDMA device `ca`. The default opens the port's umad
  // device (UmadSmpTransportImpl) and runs QueryIbNeighbor with a 500 ms bound per SMP.
  using Query =
      std::function<absl::StatusOr<neighbors::IbNeighbor>(const std::string& ca, int port)>;
  // Cabling rarely changes while a link stays up: each port is asked again this often, and at
  // once when it comes back ACTIVE.
  static constexpr absl::Duration kRequery = absl::Minutes(5);

  explicit IbNeighbors(Query query = nullptr, absl::Duration requery = kRequery);
  ~IbNeighbors() override;  // Stops the worker (after the query in flight).
  IbNeighbors(const IbNeighbors&) = delete;
  IbNeighbors& operator=(const IbNeighbors&) = delete;

  // The ACTIVE InfiniBand ports of `host`: new ones and those due are queued for the worker;
  // ports gone or no longer ACTIVE lose their neighbour. Whether a neighbour was dropped.
  bool Sync(const v1::Host& host, absl::Time now);
  // Readable when the worker has answers (an eventfd).
  int fd() const { return wake_.get(); }
  // Takes the worker's answers. Whether what the inventory shows changed.
  bool Collect();
  // When Sync should run again for ports that are due (InfiniteFuture when none are known).
  absl::Time NextQuery() const;

  // Sets, changes or clears the IB_SMP neighbour of every netdev of an InfiniBand port of
  // `host`, through MutableNetdev; other netdevs are left alone.
  void Lay(v1::Host* host) const override;
  bool Shows(const v1::Host& host) const override;
  // Sync: ports gone or down in a host about to be published lose their neighbour now.
  void Follow(const v1::Host& host, absl::Time now) override { (void)Sync(host, now); }
  void Findings(absl::Time, std::vector<v1::Finding>* out) const override;

  // The last error per port ("mlx5_0:1"), for health; a port without a umad device is not one.
  const std::map<std::string, absl::Status>& errors() const { return errors_; }
  uint64_t queries() const { return queries_; }

 private:
  struct Job {
    std::string key;  // "mlx5_0:1"
    std::string ca;
    int port = 0;
  };
  struct Answer {
    std::string key;
    absl::StatusOr<neighbors::IbNeighbor> neighbor;
    absl::Time at;
  };
  struct PortState {
    absl::Time due = absl::InfinitePast();  // When to ask again.
    bool queued = false;
    bool heard = false;
    v1::Neighbor neighbor;
  };
  void Work();
  std::optional<v1::Neighbor> Want(const v1::Netdev& nd) const;

  Query query_;
  absl::Duration requery_;
  std::map<std::string, PortState> ports_;  // The ACTIVE InfiniBand ports, by key.
  std::map<std::string, absl::Status> errors_;
  uint64_t queries_ = 0;
  UniqueFd wake_;

  std::mutex mu_;  // Guards the queues and stop_, shared with the worker.
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::vector<Answer> answers_;
  bool stop_ = false;
  std::thread worker_;
};

// The model's form of an SMP answer: source IB_SMP, the node GUID as the chassis ID, the node
// description as the system name, the remote port number as the port ID, and the switch label:
// the description when it is a valid label value, else "n-" and the node GUID's 16 hex digits.
v1::Neighbor IbNeighborProto(const neighbors::IbNeighbor& n, absl::Time first_seen);

// Ports whose neighbour could not be asked: WARNING naming the port and why, except where the
// umad devices may not be opened (systemd's unit and the DaemonSet do not grant them: root-only
// MADs are not least privilege), which is one note.
void IbNeighborFindings(const IbNeighbors& ib, std::vector<v1::Finding>* out);

}  // namespace fabric
