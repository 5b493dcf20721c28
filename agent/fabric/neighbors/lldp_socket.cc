#include "agent/fabric/neighbors/lldp_socket.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/fabric/neighbors/lldp.h"

namespace fabric::neighbors {
namespace {

// Bounds what a flood can queue in the kernel (the default is ~200 KiB per socket); LLDP sends
// one small frame per neighbour every few seconds.
constexpr int kReceiveBuffer = 64 * 1024;

// Accept only ethertype 0x88cc to 01:80:c2:00:00:0e that this host did not send; everything else
// is dropped in the kernel and never wakes the agent. Offsets are of the frame as the socket sees
// it: the kernel has taken any VLAN tag off (into metadata) before a filter runs.
constexpr sock_filter kFilter[] = {
    // A = packet type; drop our own transmissions
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(SKF_AD_OFF + SKF_AD_PKTTYPE)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, 6, 0),
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),  // ethertype
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_LLDP, 0, 4),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),  // destination bytes 0..3
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0180c200, 0, 2),
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 4),  // destination bytes 4..5
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x000e, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, 0),        // drop
    BPF_STMT(BPF_RET | BPF_K, 0x40000),  // the whole frame
};

absl::Status SocketError(const std::string& what, int err) {
  const std::string msg = absl::StrCat("LLDP socket: ", what, ": ", ErrnoText(err));
  if (err == ENODEV || err == ENXIO) return absl::NotFoundError(msg);
  if (err == EPERM || err == EACCES) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LldpSocketImpl>> LldpSocketImpl::Open(const std::string& ifname) {
  const unsigned index = if_nametoindex(ifname.c_str());
  if (index == 0) {
    const int err = errno;
    if (err == ENODEV || err == ENXIO) {
      return absl::NotFoundError(absl::StrCat("LLDP socket: no netdev ", ifname));
    }
    return SocketError(absl::StrCat("looking up ", ifname), err);
  }
  return Open(static_cast<int>(index));
}

absl::StatusOr<std::unique_ptr<LldpSocketImpl>> LldpSocketImpl::Open(int ifindex) {
  const std::string where = absl::StrCat("ifindex ", ifindex);
  // Protocol 0 until bind: nothing is queued before the filter is in place.
  UniqueFd fd(socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SocketError("socket(AF_PACKET)", errno);
  sock_fprog prog{static_cast<unsigned short>(sizeof(kFilter) / sizeof(kFilter[0])),
                  const_cast<sock_filter*>(kFilter)};
  if (setsockopt(fd.get(), SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) != 0) {
    return SocketError("SO_ATTACH_FILTER", errno);
  }
  int rcvbuf = kReceiveBuffer;
  if (setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) != 0) {
    return SocketError("SO_RCVBUF", errno);
  }
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_LLDP);
  sll.sll_ifindex = ifindex;
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&sll), sizeof(sll)) != 0) {
    return SocketError(absl::StrCat("bind to ", where), errno);
  }
  // NICs filter multicast in hardware: ask for the group (dropped again when the socket closes).
  packet_mreq mreq{};
  mreq.mr_ifindex = ifindex;
  mreq.mr_type = PACKET_MR_MULTICAST;
  mreq.mr_alen = ETH_ALEN;
  std::memcpy(mreq.mr_address, kLldpNearestBridge.data(), ETH_ALEN);
  if (setsockopt(fd.get(), SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq, sizeof(mreq)) != 0) {
    return SocketError(absl::StrCat("PACKET_ADD_MEMBERSHIP on ", where), errno);
  }
  return std::unique_ptr<LldpSocketImpl>(new LldpSocketImpl(std::move(fd), ifindex));
}

// ENETDOWN: the kernel reports both a netdev going down and one going away; which it is decides
// whether the socket is still worth keeping. The ioctl asks the socket's own namespace.
absl::Status LldpSocketImpl::Gone(int err) const {
  ifreq ifr{};
  ifr.ifr_ifindex = ifindex_;
  if (ioctl(fd_.get(), SIOCGIFNAME, &ifr) != 0 && (errno == ENODEV || errno == ENXIO)) {
    return absl::NotFoundError(
        absl::StrCat("LLDP socket: netdev ifindex ", ifindex_, " is gone (", ErrnoText(err), ")"));
  }
  return absl::UnavailableError(
      absl::StrCat("LLDP socket: netdev ifindex ", ifindex_, " went down (", ErrnoText(err), ")"));
}

absl::StatusOr<std::optional<LldpFrame>> LldpSocketImpl::Receive() {
  for (;;) {
    LldpFrame frame;
    frame.bytes.resize(kLldpMaxFrame);
    sockaddr_ll from{};
    socklen_t from_len = sizeof(from);
    // MSG_TRUNC: the length on the wire even when the buffer was shorter.
    const ssize_t n =
        recvfrom(fd_.get(), frame.bytes.data(), frame.bytes.size(), MSG_DONTWAIT | MSG_TRUNC,
                 reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return std::nullopt;
      if (err == EINTR) continue;
      if (err == ENETDOWN || err == ENODEV || err == ENXIO) return Gone(err);
      return SocketError(absl::StrCat("recvfrom on ifindex ", ifindex_), err);
    }
    if (from.sll_pkttype == PACKET_OUTGOING) continue;  // the filter drops these already
    frame.wire_length = static_cast<size_t>(n);
    frame.bytes.resize(std::min(frame.wire_length, kLldpMaxFrame));
    return frame;
  }
}

}  // namespace fabric::neighbors
