#include "agent/fabric/announce/link.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_addr.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/socket.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/fd.h"
#include "agent/common/log.h"

namespace fabric::announce {
namespace {

void CloseLogged(UniqueFd& fd, const char* what) {
  if (const int err = fd.Close(); err != 0) {
    Log(LogLevel::kWarning, "announce: closing ", what, " socket: ", ErrnoText(err));
  }
}

// ARP, or IPv6 + ICMPv6 (no extension headers) of type 135/136; everything else is dropped in
// the kernel before it is queued.
constexpr sock_filter kNdArpFilter[] = {
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),                 // 0: ethertype
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_ARP, 6, 0),   // 1: ARP -> accept
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IPV6, 0, 6),  // 2: not IPv6 -> drop
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 20),                 // 3: next header
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 58, 0, 4),          // 4: not ICMPv6 -> drop
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 54),                 // 5: ICMPv6 type
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 135, 1, 0),         // 6: NS -> accept
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 136, 0, 1),         // 7: not NA -> drop
    BPF_STMT(BPF_RET | BPF_K, 0x40000),                     // 8: accept (whole frame)
    BPF_STMT(BPF_RET | BPF_K, 0),                           // 9: drop
};

// Sets O_NONBLOCK and FD_CLOEXEC on a (possibly inherited) fd.
absl::Status MakeNonBlockingCloexec(int fd, bool nonblocking) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0) return absl::InvalidArgumentError(absl::StrCat("fd ", fd, ": ", ErrnoText(errno)));
  if (nonblocking && fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("fd ", fd, " O_NONBLOCK: ", ErrnoText(errno)));
  }
  int fdf = fcntl(fd, F_GETFD);
  if (fdf < 0 || fcntl(fd, F_SETFD, fdf | FD_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("fd ", fd, " FD_CLOEXEC: ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

// A netlink dump must not hang the caller; the kernel answers at once, so 1 s is generous.
void BoundReceive(int fd) {
  timeval tv{1, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

absl::StatusOr<NlCachePtr> DumpAddresses(nl_sock* sk) {
  nl_cache* cache = nullptr;
  if (int err = rtnl_addr_alloc_cache(sk, &cache); err < 0) {
    return absl::UnavailableError(absl::StrCat("address dump: ", nl_geterror(err)));
  }
  return NlCachePtr(cache);
}

}  // namespace

void NlSockDeleter::operator()(nl_sock* s) const {
  if (s != nullptr) nl_socket_free(s);
}

void NlCacheDeleter::operator()(nl_cache* c) const {
  if (c != nullptr) nl_cache_free(c);
}

absl::StatusOr<NlSockPtr> ConnectRoute() {
  NlSockPtr sk(nl_socket_alloc());
  if (!sk) return absl::ResourceExhaustedError("nl_socket_alloc failed");
  if (int err = nl_connect(sk.get(), NETLINK_ROUTE); err < 0) {
    return absl::UnavailableError(absl::StrCat("route netlink socket: ", nl_geterror(err)));
  }
  int fd = nl_socket_get_fd(sk.get());
  if (auto s = MakeNonBlockingCloexec(fd, false); !s.ok()) return s;
  BoundReceive(fd);
  return sk;
}

absl::StatusOr<std::unique_ptr<PacketLink>> PacketLink::Open(int ifindex, bool dad_state) {
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(static_cast<unsigned>(ifindex), name) == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no interface with ifindex ", ifindex, ": ", ErrnoText(errno)));
  }
  std::unique_ptr<PacketLink> link(new PacketLink());
  link->ifindex_ = ifindex;
  link->ifname_ = name;
  // Protocol 0: nothing is queued until bind(), after the filter is in place.
  link->packet_fd_.reset(socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!link->packet_fd_.valid()) {
    return absl::PermissionDeniedError(
        absl::StrCat("packet socket for ", link->Describe(), ": ", ErrnoText(errno)));
  }
  sock_fprog prog{static_cast<unsigned short>(std::size(kNdArpFilter)),
                  const_cast<sock_filter*>(kNdArpFilter)};
  if (setsockopt(link->packet_fd_.get(), SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) != 0) {
    return absl::InternalError(
        absl::StrCat("packet filter on ", link->Describe(), ": ", ErrnoText(errno)));
  }
#ifdef PACKET_IGNORE_OUTGOING
  // Linux 4.20+; without it TryReceive skips PACKET_OUTGOING itself.
  int one = 1;
  (void)setsockopt(link->packet_fd_.get(), SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
#endif
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = ifindex;
  if (bind(link->packet_fd_.get(), reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0) {
    const int err = errno;
    std::string msg =
        absl::StrCat("bind packet socket to ", link->Describe(), ": ", ErrnoText(err));
    if (err == ENODEV || err == ENXIO) return absl::NotFoundError(msg);
    return absl::InternalError(msg);
  }
  if (!dad_state) return link;
  auto sk = ConnectRoute();
  if (!sk.ok()) return sk.status();
  link->nl_ = sk->release();
  return link;
}

absl::StatusOr<std::unique_ptr<PacketLink>> PacketLink::Adopt(int packet_fd, int netlink_fd,
                                                              std::string ifname) {
  std::unique_ptr<PacketLink> link(new PacketLink());
  link->packet_fd_.reset(packet_fd);  // owned from here: closed by the destructor on every path
  link->ifname_ = std::move(ifname);
  UniqueFd netlink(netlink_fd);  // owned here until libnl's socket takes it
  NlSockPtr sk;
  if (netlink.valid()) {
    sk.reset(nl_socket_alloc());
    if (!sk) {
      CloseLogged(netlink, "netlink");
      return absl::ResourceExhaustedError("nl_socket_alloc failed");
    }
    if (int err = nl_socket_set_fd(sk.get(), NETLINK_ROUTE, netlink.get()); err < 0) {
      CloseLogged(netlink, "netlink");
      return absl::InvalidArgumentError(
          absl::StrCat("fd ", netlink_fd, " is not a route netlink socket: ", nl_geterror(err)));
    }
    link->nl_ = sk.release();
    netlink.release();  // nl_socket_free closes it now
    if (auto s = MakeNonBlockingCloexec(netlink_fd, false); !s.ok()) return s;
    // Blocking with a bound: the sender may have left O_NONBLOCK on the shared file.
    int fl = fcntl(netlink_fd, F_GETFL);
    if (fl >= 0) (void)fcntl(netlink_fd, F_SETFL, fl & ~O_NONBLOCK);
    BoundReceive(netlink_fd);
  }
  sockaddr_ll sll{};
  socklen_t len = sizeof(sll);
  if (packet_fd < 0 || getsockname(packet_fd, reinterpret_cast<sockaddr*>(&sll), &len) != 0 ||
      sll.sll_family != AF_PACKET) {
    return absl::InvalidArgumentError(absl::StrCat("fd ", packet_fd, " is not a packet socket"));
  }
  if (sll.sll_ifindex <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("packet socket fd ", packet_fd, " is not bound to an interface"));
  }
  link->ifindex_ = sll.sll_ifindex;
  if (auto s = MakeNonBlockingCloexec(packet_fd, true); !s.ok()) return s;
  return link;
}

PacketLink::~PacketLink() {
  CloseLogged(packet_fd_, "packet");
  // libnl closes the netlink fd itself and has no way to detach it; a socket's close cannot
  // fail in a way that matters here.
  if (nl_ != nullptr) nl_socket_free(nl_);
}

int PacketLink::netlink_fd() const { return nl_ == nullptr ? -1 : nl_socket_get_fd(nl_); }

std::string PacketLink::Describe() const {
  if (ifname_.empty()) return absl::StrCat("ifindex ", ifindex_);
  return absl::StrCat(ifname_, " (ifindex ", ifindex_, ")");
}

absl::Status PacketLink::Send(const std::vector<uint8_t>& frame) {
  if (frame.size() < 14) return absl::InvalidArgumentError("frame shorter than Ethernet header");
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_ifindex = ifindex_;
  to.sll_protocol = htons(static_cast<uint16_t>(frame[12] << 8 | frame[13]));
  to.sll_halen = 6;
  std::memcpy(to.sll_addr, frame.data(), 6);
  ssize_t n;
  do {
    n = sendto(packet_fd_.get(), frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&to),
               sizeof(to));
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    const int err = errno;
    std::string msg = absl::StrCat("send on ", Describe(), ": ", ErrnoText(err));
    switch (err) {
      case ENXIO:
      case ENODEV:
        return absl::NotFoundError(absl::StrCat(msg, " (interface gone)"));
      case ENETDOWN:
      case ENOBUFS:
      case EAGAIN:
        return absl::UnavailableError(msg);
      default:
        return absl::InternalError(msg);
    }
  }
  if (static_cast<size_t>(n) != frame.size()) {
    return absl::InternalError(
        absl::StrCat("short send on ", Describe(), ": ", n, " of ", frame.size(), " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> PacketLink::TryReceive() {
  std::vector<uint8_t> buf(2048);
  for (;;) {
    sockaddr_ll from{};
    socklen_t len = sizeof(from);
    ssize_t n = recvfrom(packet_fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT,
                         reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return absl::NotFoundError("nothing queued");
      return absl::UnavailableError(absl::StrCat("receive on ", Describe(), ": ", ErrnoText(err)));
    }
    if (from.sll_pkttype == PACKET_OUTGOING) continue;  // our own, where not already ignored
    buf.resize(static_cast<size_t>(n));
    return buf;
  }
}

absl::StatusOr<bool> PacketLink::Tentative(const in6_addr& addr) {
  if (nl_ == nullptr) return false;
  auto cache = DumpAddresses(nl_);
  if (!cache.ok()) {
    return absl::Status(cache.status().code(),
                        absl::StrCat(Describe(), ": ", cache.status().message()));
  }
  for (nl_object* o = nl_cache_get_first(cache->get()); o != nullptr; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    if (rtnl_addr_get_family(a) != AF_INET6 || rtnl_addr_get_ifindex(a) != ifindex_) continue;
    nl_addr* local = rtnl_addr_get_local(a);
    if (local == nullptr || nl_addr_get_len(local) != sizeof(addr) ||
        std::memcmp(nl_addr_get_binary_addr(local), &addr, sizeof(addr)) != 0) {
      continue;
    }
    const unsigned flags = rtnl_addr_get_flags(a);
    if (flags & IFA_F_DADFAILED) {
      return absl::FailedPreconditionError(
          absl::StrCat("duplicate address detection failed on ", Describe()));
    }
    return (flags & IFA_F_TENTATIVE) != 0 && (flags & IFA_F_OPTIMISTIC) == 0;
  }
  return absl::NotFoundError(absl::StrCat(Describe(), " does not hold the address"));
}

absl::StatusOr<Target> DescribeInterface(const std::string& ifname, bool with_addresses) {
  auto sk = ConnectRoute();
  if (!sk.ok()) return sk.status();
  rtnl_link* link = nullptr;
  if (int err = rtnl_link_get_kernel(sk->get(), 0, ifname.c_str(), &link); err < 0) {
    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) {
      return absl::NotFoundError(absl::StrCat("no interface ", ifname));
    }
    return absl::UnavailableError(absl::StrCat("interface ", ifname, ": ", nl_geterror(err)));
  }
  Target t;
  t.ifname = ifname;
  t.ifindex = rtnl_link_get_ifindex(link);
  // Only stacked kinds share their lower device's NIC; a veth's IFLA_LINK is its peer.
  const std::string_view kind = rtnl_link_get_type(link) ? rtnl_link_get_type(link) : "";
  const bool stacked = kind == "macvlan" || kind == "macvtap" || kind == "ipvlan" ||
                       kind == "ipvtap" || kind == "vlan";
  if (const int parent = rtnl_link_get_link(link); stacked && parent != t.ifindex) {
    t.parent_ifindex = parent;
  }
  const unsigned arptype = rtnl_link_get_arptype(link);
  nl_addr* hw = rtnl_link_get_addr(link);
  const bool ether = arptype == ARPHRD_ETHER && hw != nullptr && nl_addr_get_len(hw) == 6;
  if (ether) std::memcpy(t.mac.data(), nl_addr_get_binary_addr(hw), 6);
  rtnl_link_put(link);
  if (!ether) {
    return absl::FailedPreconditionError(absl::StrCat(
        "interface ", ifname, " is not Ethernet (ARPHRD ", arptype, "): nothing to announce"));
  }
  if (!with_addresses) return t;
  auto cache = DumpAddresses(sk->get());
  if (!cache.ok()) return cache.status();
  for (nl_object* o = nl_cache_get_first(cache->get()); o != nullptr; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    if (rtnl_addr_get_ifindex(a) != t.ifindex || rtnl_addr_get_scope(a) != RT_SCOPE_UNIVERSE) {
      continue;
    }
    const int family = rtnl_addr_get_family(a);
    nl_addr* local = rtnl_addr_get_local(a);
    if (local == nullptr) continue;
    const size_t want = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
    if (want == 0 || nl_addr_get_len(local) != want) continue;
    Address addr;
    addr.family = family;
    std::memcpy(&addr.addr, nl_addr_get_binary_addr(local), want);
    addr.prefix_len = rtnl_addr_get_prefixlen(a);
    t.addresses.push_back(addr);
  }
  return t;
}

absl::StatusOr<std::unique_ptr<ScopedNetns>> ScopedNetns::Enter(const std::string& netns_path) {
  UniqueFd target(open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!target.valid()) {
    const int err = errno;
    std::string msg = absl::StrCat("network namespace ", netns_path, ": ", ErrnoText(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    return absl::PermissionDeniedError(msg);
  }
  std::unique_ptr<ScopedNetns> ns(new ScopedNetns());
  ns->path_ = netns_path;
  ns->original_.reset(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!ns->original_.valid()) {
    const int err = errno;
    target.reset();
    return absl::InternalError(absl::StrCat("current network namespace: ", ErrnoText(err)));
  }
  if (setns(target.get(), CLONE_NEWNET) != 0) {
    const int err = errno;
    target.reset();
    std::string msg = absl::StrCat("entering network namespace ", netns_path, ": ", ErrnoText(err));
    ns->original_.reset();  // not entered: the destructor has nothing to undo
    if (err == EPERM) return absl::PermissionDeniedError(msg);
    return absl::InvalidArgumentError(msg);
  }
  target.reset();
  return ns;
}

ScopedNetns::~ScopedNetns() {
  if (!original_.valid()) return;
  if (setns(original_.get(), CLONE_NEWNET) != 0) {
    Log(LogLevel::kError, "announce: cannot leave network namespace ", path_, ": ",
        ErrnoText(errno));
  }
  CloseLogged(original_, "namespace");
}

}  // namespace fabric::announce
