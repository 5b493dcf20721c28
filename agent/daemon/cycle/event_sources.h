// What tells the agent that the host changed, without polling: route netlink (links, addresses,
// routes) through libnl, and kernel uevents (RDMA devices, netdevs, PCI functions). Each source
// is a non-blocking fd for the agent's poll loop.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/inventory/discovery/refresh.h"

namespace fabric {

struct Drained {
  int relevant = 0;       // Messages that can change the inventory.
  bool overflow = false;  // ENOBUFS: the kernel dropped messages, so only a full resync is safe.
  std::string last;       // A short description of the last relevant message, for logs.
  ChangeScope scope;      // What the messages named (full on overflow).
};

class EventSource {
 public:
  virtual ~EventSource() = default;
  virtual const char* name() const = 0;
  virtual int fd() const = 0;
  // Reads everything pending without blocking (bounded, so a storm cannot starve the loop).
  virtual absl::StatusOr<Drained> Drain() = 0;
};

// RTNLGRP_LINK, IPV4/IPV6_IFADDR and IPV4/IPV6_ROUTE of the caller's network namespace.
// `rcvbuf` is the socket's receive buffer in bytes (0: the kernel's default).
absl::StatusOr<std::unique_ptr<EventSource>> OpenRouteEvents(int rcvbuf);

// The kernel's uevent multicast group; relevant are events AffectsInventory() accepts.
absl::StatusOr<std::unique_ptr<EventSource>> OpenUevents(int rcvbuf);

// Changes to the file `path`, seen through inotify on its directory: written in place, replaced
// by rename (editors, config management) or, for a Kubernetes ConfigMap volume, its "..data"
// link swapped. Relevant are events that name the file or "..data".
absl::StatusOr<std::unique_ptr<EventSource>> OpenFileWatch(const std::string& path);

}  // namespace fabric
