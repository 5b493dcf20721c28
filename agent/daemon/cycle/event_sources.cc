#include "agent/daemon/cycle/event_sources.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/fd.h"
#include "agent/daemon/cycle/route_scope.h"
#include "agent/daemon/cycle/uevent.h"

namespace fabric {
namespace {

// At most this many reads per Drain: under a storm the loop still gets to rescan and ping the
// watchdog; the rest is read on the next turn.
constexpr int kMaxReads = 4096;

class RouteEvents final : public EventSource {
 public:
  ~RouteEvents() override {
    if (sk_ != nullptr) nl_socket_free(sk_);  // Closes the fd too.
  }

  static absl::StatusOr<std::unique_ptr<EventSource>> Open(int rcvbuf) {
    auto self = std::unique_ptr<RouteEvents>(new RouteEvents());
    self->sk_ = nl_socket_alloc();
    if (self->sk_ == nullptr) return absl::ResourceExhaustedError("nl_socket_alloc failed");
    nl_socket_disable_seq_check(self->sk_);
    // Names ifindexes with one ioctl each (if_indextoname opens and closes a socket per call).
    self->names_.reset(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    nl_socket_modify_cb(self->sk_, NL_CB_VALID, NL_CB_CUSTOM, &RouteEvents::OnMessage, self.get());
    if (int err = nl_connect(self->sk_, NETLINK_ROUTE); err < 0) {
      return absl::UnavailableError(absl::StrCat("route netlink socket: ", nl_geterror(err)));
    }
    if (int err = nl_socket_add_memberships(self->sk_, RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR,
                                            RTNLGRP_IPV6_IFADDR, RTNLGRP_IPV4_ROUTE,
                                            RTNLGRP_IPV6_ROUTE, 0);
        err < 0) {
      return absl::UnavailableError(
          absl::StrCat("route netlink multicast groups: ", nl_geterror(err)));
    }
    if (rcvbuf > 0) (void)nl_socket_set_buffer_size(self->sk_, rcvbuf, 0);
    if (int err = nl_socket_set_nonblocking(self->sk_); err < 0) {
      return absl::InternalError(absl::StrCat("route netlink non-blocking: ", nl_geterror(err)));
    }
    return std::unique_ptr<EventSource>(std::move(self));
  }

  const char* name() const override { return "route netlink"; }
  int fd() const override { return nl_socket_get_fd(sk_); }

  absl::StatusOr<Drained> Drain() override {
    drained_ = Drained{};
    for (int i = 0; i < kMaxReads; ++i) {
      int r = nl_recvmsgs_default(sk_);
      if (r == -NLE_AGAIN) break;
      // libnl maps ENOBUFS to NLE_NOMEM: the socket overran and events were lost.
      if (r == -NLE_NOMEM) {
        drained_.overflow = true;
        drained_.scope.Full("route netlink overflowed (ENOBUFS)");
        continue;
      }
      if (r < 0) return absl::InternalError(absl::StrCat("route netlink: ", nl_geterror(r)));
      if (r == 0) break;  // Nothing read (level-triggered poll brings us back).
    }
    return drained_;
  }

 private:
  RouteEvents() = default;

  static int OnMessage(nl_msg* msg, void* arg) {
    auto* self = static_cast<RouteEvents*>(arg);
    const nlmsghdr* h = nlmsg_hdr(msg);
    const auto m = ScopeOfRouteMessage(
        std::string_view(reinterpret_cast<const char*>(h), h->nlmsg_len),
        [self](int ifindex) { return self->NameOf(ifindex); }, &self->drained_.scope);
    if (!m) return NL_SKIP;
    ++self->drained_.relevant;
    self->drained_.last =
        m->ifindex > 0 ? absl::StrCat(m->what, " (ifindex ", m->ifindex, ")") : m->what;
    return NL_OK;
  }

  // The netdev's name now, "" when it is gone (or the index is not one).
  std::string NameOf(int ifindex) const {
    if (ifindex <= 0) return "";
    if (!names_.valid()) {
      char name[IF_NAMESIZE] = {};
      return if_indextoname(static_cast<unsigned>(ifindex), name) != nullptr ? name : "";
    }
    ifreq req{};
    req.ifr_ifindex = ifindex;
    if (ioctl(names_.get(), SIOCGIFNAME, &req) != 0) return "";
    return std::string(req.ifr_name, strnlen(req.ifr_name, sizeof(req.ifr_name)));
  }

  nl_sock* sk_ = nullptr;
  UniqueFd names_;
  Drained drained_;
};

class Uevents final : public EventSource {
 public:
  explicit Uevents(UniqueFd fd) : fd_(std::move(fd)) {}

  const char* name() const override { return "uevent"; }
  int fd() const override { return fd_.get(); }

  absl::StatusOr<Drained> Drain() override {
    Drained d;
    char buf[8192];
    for (int i = 0; i < kMaxReads; ++i) {
      ssize_t n = recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        if (errno == ENOBUFS) {
          d.overflow = true;
          d.scope.Full("uevents overflowed (ENOBUFS)");
          continue;
        }
        return absl::InternalError(absl::StrCat("uevent recv: ", ErrnoText(errno)));
      }
      auto e = ParseUevent(std::string_view(buf, static_cast<size_t>(n)));
      if (!e.ok() || !AffectsInventory(*e)) continue;
      AddToScope(*e, &d.scope);
      ++d.relevant;
      d.last = absl::StrCat(e->subsystem, " ", e->action, " ", e->devpath);
    }
    return d;
  }

 private:
  UniqueFd fd_;
};

class FileWatch final : public EventSource {
 public:
  FileWatch(UniqueFd fd, std::string name) : fd_(std::move(fd)), name_(std::move(name)) {}

  const char* name() const override { return "config file"; }
  int fd() const override { return fd_.get(); }

  absl::StatusOr<Drained> Drain() override {
    Drained d;
    alignas(inotify_event) char buf[4096];
    for (int i = 0; i < kMaxReads; ++i) {
      ssize_t n = read(fd_.get(), buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        return absl::InternalError(absl::StrCat("inotify read: ", ErrnoText(errno)));
      }
      for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        if ((ev->mask & IN_Q_OVERFLOW) != 0) d.overflow = true;
        if (ev->len == 0) continue;
        const std::string file(ev->name);
        if (file == name_ || file == "..data") {
          ++d.relevant;
          d.last = absl::StrCat(file, " changed");
        }
      }
    }
    return d;
  }

 private:
  UniqueFd fd_;
  std::string name_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<EventSource>> OpenFileWatch(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  UniqueFd fd(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd.valid()) return absl::UnavailableError(absl::StrCat("inotify: ", ErrnoText(errno)));
  if (inotify_add_watch(fd.get(), dir.c_str(),
                        IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ONLYDIR) < 0) {
    return absl::UnavailableError(absl::StrCat("inotify on ", dir, ": ", ErrnoText(errno)));
  }
  return std::unique_ptr<EventSource>(new FileWatch(std::move(fd), name));
}

absl::StatusOr<std::unique_ptr<EventSource>> OpenRouteEvents(int rcvbuf) {
  return RouteEvents::Open(rcvbuf);
}

absl::StatusOr<std::unique_ptr<EventSource>> OpenUevents(int rcvbuf) {
  UniqueFd fd(
      socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT));
  if (!fd.valid()) {
    return absl::UnavailableError(absl::StrCat("uevent socket: ", ErrnoText(errno)));
  }
  if (rcvbuf > 0) (void)setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = 1;  // The kernel's group; udev re-broadcasts on group 2.
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
    return absl::UnavailableError(absl::StrCat("uevent bind: ", ErrnoText(errno)));
  }
  return std::unique_ptr<EventSource>(new Uevents(std::move(fd)));
}

}  // namespace fabric
