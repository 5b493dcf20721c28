// The OS seam of announcements: a packet socket bound to one interface (plus a route netlink
// socket for IPv6 DAD state), the facts of an interface, and entering a network namespace.
// Everything here acts on the network namespace current for the calling thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/common/fd.h"
#include "agent/fabric/announce/announce.h"

struct nl_sock;
struct nl_cache;

namespace fabric::announce {

struct NlSockDeleter {
  void operator()(nl_sock* s) const;
};
using NlSockPtr = std::unique_ptr<nl_sock, NlSockDeleter>;

// The owner of a libnl dump (rtnl_*_alloc_cache).
struct NlCacheDeleter {
  void operator()(nl_cache* c) const;
};
using NlCachePtr = std::unique_ptr<nl_cache, NlCacheDeleter>;

// A NETLINK_ROUTE socket in the current network namespace: close-on-exec, blocking, receives
// bounded to 1 s (a dump must not hang the caller). The one home of libnl socket set-up.
absl::StatusOr<NlSockPtr> ConnectRoute();

// Frames in and out of one interface.
//
// The packet socket is created with protocol 0 (it receives nothing), gets a classic BPF filter
// that keeps only ARP and ICMPv6 neighbour solicitations/advertisements, ignores its own
// outgoing frames, and only then is bound to ETH_P_ALL on the interface: no unfiltered frame is
// ever queued. Non-blocking and close-on-exec.
//
// Send errors name the interface. NotFound means the interface is gone (ENXIO/ENODEV): a Job
// ends on it. Unavailable covers the transient ones (ENETDOWN, ENOBUFS, EAGAIN).
class PacketLink : public Link {
 public:
  // Opens both sockets in the current network namespace.
  // `dad_state`: also open the netlink socket Tentative() needs; without it Tentative() reports
  // false (callers with no IPv6 address skip a socket and its set-up).
  static absl::StatusOr<std::unique_ptr<PacketLink>> Open(int ifindex, bool dad_state = true);
  // Takes ownership of sockets opened elsewhere (by Open in another process, then passed with
  // SCM_RIGHTS): they stay bound to the namespace they were created in, so the new owner needs
  // no setns. `netlink_fd` may be -1: Tentative() then reports false, i.e. the caller has
  // already waited for DAD (or does not care) and NAs go out at once. `ifname` is only used in
  // messages (the name cannot be looked up from another namespace). Both fds are closed on
  // error too.
  static absl::StatusOr<std::unique_ptr<PacketLink>> Adopt(int packet_fd, int netlink_fd,
                                                           std::string ifname = "");
  ~PacketLink() override;
  PacketLink(const PacketLink&) = delete;
  PacketLink& operator=(const PacketLink&) = delete;

  absl::Status Send(const std::vector<uint8_t>& frame) override;
  absl::StatusOr<std::vector<uint8_t>> TryReceive() override;
  int poll_fd() const override { return packet_fd_.get(); }
  // From the address's flags (an RTM_GETADDR dump on the netlink socket): tentative and not
  // optimistic. NotFound when the interface does not hold `addr`; FailedPrecondition when DAD
  // failed (IFA_F_DADFAILED): the address will never be usable.
  absl::StatusOr<bool> Tentative(const in6_addr& addr) override;

  // For the hand-off (SCM_RIGHTS); still owned by this object.
  int packet_fd() const { return packet_fd_.get(); }
  int netlink_fd() const;  // -1 when none
  int ifindex() const { return ifindex_; }
  const std::string& ifname() const { return ifname_; }

 private:
  PacketLink() = default;
  std::string Describe() const;  // "eth0 (ifindex 3)"

  UniqueFd packet_fd_;
  nl_sock* nl_ = nullptr;  // owns the netlink fd
  int ifindex_ = 0;
  std::string ifname_;
};

// The interface `ifname` in the current namespace: ifindex, MAC and its global (scope universe)
// IPv4 and IPv6 addresses with prefix lengths, in the kernel's order; no gateways. NotFound when
// there is no such interface; FailedPrecondition when it is not Ethernet (ARPHRD_ETHER).
// `with_addresses` false skips the address dump (callers that know the addresses, e.g. from a
// CNI prevResult).
absl::StatusOr<Target> DescribeInterface(const std::string& ifname, bool with_addresses = true);

// Moves the calling thread into another network namespace for the object's lifetime (other
// threads stay where they are). The destructor moves back and logs when it cannot.
class ScopedNetns {
 public:
  // `netns_path`: /var/run/netns/NAME, /proc/PID/ns/net, a CNI_NETNS path. NotFound naming it
  // when it does not exist.
  static absl::StatusOr<std::unique_ptr<ScopedNetns>> Enter(const std::string& netns_path);
  ~ScopedNetns();
  ScopedNetns(const ScopedNetns&) = delete;
  ScopedNetns& operator=(const ScopedNetns&) = delete;

 private:
  ScopedNetns() = default;
  UniqueFd original_;
  std::string path_;
};

}  // namespace fabric::announce
