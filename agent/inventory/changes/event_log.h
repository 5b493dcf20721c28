// What happened to the host while the agent ran, folded from the changes between snapshots:
// link flaps and GID table changes per port, and RDMA devices that disappeared (driver reload,
// PCI reset, hot unplug) and have not come back. A value type: the agent keeps one, updates it
// on its loop and copies it into every snapshot, so readers never share it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"

namespace fabric {

class EventLog {
 public:
  struct Port {
    uint64_t link_flaps = 0;
    uint64_t gid_changes = 0;
    absl::Time last_flap = absl::InfinitePast();
    absl::Time last_gid_change = absl::InfinitePast();
  };
  struct Absent {
    std::string pci_address;
    absl::Time since;
    std::vector<uint32_t> ports;
  };

  // Folds `changes` (DiffHosts(before, ...)) seen at `now`. A port leaving ACTIVE is a flap; a
  // removed device becomes absent (with its ports and PCI address from `before`) and stops being
  // absent when it is added again.
  void Record(const v1::Host& before, const std::vector<v1::InventoryChange>& changes,
              absl::Time now);
  // Forgets devices absent for longer than `window` (they are not coming back).
  void Expire(absl::Time now, absl::Duration window);

  const std::map<std::string, Port>& ports() const { return ports_; }  // By "mlx5_1:1".
  const std::map<std::string, Absent>& absent() const { return absent_; }
  bool empty() const { return ports_.empty() && absent_.empty(); }

  // Facts only: health judges flaps and vanished devices with memory (the health monitor:
  // port_state.flap, device_missing.gone).
  // The API's view (Inventory.absent_devices, port_events), absent devices past `window` left
  // out.
  void Fill(absl::Time now, absl::Duration window, v1::Inventory* out) const;
  // InventoryChange.count for a change of a port that this log counts.
  void SetCount(v1::InventoryChange* change) const;

 private:
  std::map<std::string, Port> ports_;
  std::map<std::string, Absent> absent_;
};

}  // namespace fabric
