// The OS seam for LLDP reception: a packet socket per netdev that only LLDP frames to the
// nearest-bridge address wake (the kernel filters), read without blocking.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/common/fd.h"

namespace fabric::neighbors {

// The largest frame kept: a VLAN-tagged 1500-byte MTU frame without FCS is 1518; 1522 leaves room
// for a second tag. Longer frames (jumbo MTUs) are cut to this and marked truncated.
inline constexpr size_t kLldpMaxFrame = 1522;

struct LldpFrame {
  // At most kLldpMaxFrame. Never VLAN-tagged: the kernel clears a tag before protocol sockets see
  // a frame (one for a VLAN netdev of this host goes to that netdev instead).
  std::string bytes;
  size_t wire_length = 0;  // as received; more than bytes.size() when truncated
  bool truncated() const { return wire_length > bytes.size(); }
};

class LldpReceiver {
 public:
  virtual ~LldpReceiver() = default;
  // The next queued frame; nullopt when none is (never blocks). NotFound when the netdev is gone
  // (drop the receiver); Unavailable when it went down (keep it: delivery resumes when it is up).
  virtual absl::StatusOr<std::optional<LldpFrame>> Receive() = 0;
  // Readable (POLLIN) when a frame is queued, POLLERR when the netdev went down or away.
  virtual int fd() const = 0;
};

class LldpSocketImpl : public LldpReceiver {
 public:
  // AF_PACKET SOCK_RAW for ETH_P_LLDP bound to `ifindex` in the calling thread's network
  // namespace, with a classic BPF filter (ethertype 0x88cc to 01:80:c2:00:00:0e, nothing sent by
  // this host) and membership of that group address. NotFound when there is no such netdev;
  // PermissionDenied without CAP_NET_RAW.
  static absl::StatusOr<std::unique_ptr<LldpSocketImpl>> Open(int ifindex);
  static absl::StatusOr<std::unique_ptr<LldpSocketImpl>> Open(const std::string& ifname);

  absl::StatusOr<std::optional<LldpFrame>> Receive() override;
  int fd() const override { return fd_.get(); }
  int ifindex() const { return ifindex_; }

 private:
  LldpSocketImpl(UniqueFd fd, int ifindex) : fd_(std::move(fd)), ifindex_(ifindex) {}
  absl::Status Gone(int err) const;
  UniqueFd fd_;
  int ifindex_ = 0;
};

}  // namespace fabric::neighbors
