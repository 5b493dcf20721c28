#include "agent/daemon/transport/listener.h"

#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/errno.h"
#include "agent/common/ip.h"
#include "agent/common/log.h"
#include "agent/common/strings.h"

namespace fabric {
namespace {

// The groups a Unix peer had when it connected: primary and supplementary (SO_PEERGROUPS,
// Linux 4.13+; on older kernels only the primary group counts).
std::vector<gid_t> PeerGroups(int fd, gid_t primary) {
  std::vector<gid_t> groups{primary};
  std::vector<gid_t> buf(64);
  for (int attempt = 0; attempt < 2; ++attempt) {
    socklen_t len = static_cast<socklen_t>(buf.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, buf.data(), &len) == 0) {
      buf.resize(len / sizeof(gid_t));
      groups.insert(groups.end(), buf.begin(), buf.end());
      return groups;
    }
    if (errno != ERANGE) return groups;
    buf.resize(len / sizeof(gid_t) + 1);  // The kernel said how many it has.
  }
  return groups;
}

}  // namespace

std::string Caller::Name() const {
  if (channel == Channel::kTcp) {
    return certificate.empty() ? absl::StrCat("tcp ", address)
                               : absl::StrCat("tcp ", address, " (", certificate, ")");
  }
  return absl::StrCat("uid ", uid, " (pid ", pid, ")");
}

std::string Caller::Key() const {
  if (!certificate.empty()) return absl::StrCat("cert:", certificate);
  if (channel == Channel::kTcp) return absl::StrCat("ip:", address);
  return absl::StrCat("uid:", uid);
}

absl::StatusOr<gid_t> ResolveGroup(const std::string& flag, const std::string& name) {
  gid_t gid;
  if (absl::SimpleAtoi(name, &gid)) return gid;
  std::vector<char> buf(16384);
  group gr;
  group* found = nullptr;
  const int err = getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found);
  if (found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", name, ": no such group",
                     err != 0 ? absl::StrCat(" (", ErrnoText(err), ")") : ""));
  }
  return gr.gr_gid;
}

Caller IdentifyUnixPeer(int fd, const ControlPolicy& policy) {
  Caller c;
  c.channel = Caller::Channel::kUnix;
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    c.denied = absl::StrCat("the peer's credentials are unreadable (", ErrnoText(errno), ")");
    return c;
  }
  c.uid = cred.uid;
  c.gid = cred.gid;
  c.pid = cred.pid;
  if (cred.uid == 0 || cred.uid == policy.agent_uid) {
    c.control = true;
    return c;
  }
  if (policy.control_gid) {
    for (gid_t g : PeerGroups(fd, cred.gid)) {
      if (g == *policy.control_gid) {
        c.control = true;
        return c;
      }
    }
  }
  c.denied = absl::StrCat(
      "uid ", cred.uid, " is not root, the agent's user (uid ", policy.agent_uid, ")",
      policy.control_gid ? absl::StrCat(" or a member of --control-group=", policy.control_group)
                         : std::string(" and no --control-group is set"));
  return c;
}

Caller IdentifyTcpPeer(int fd) {
  Caller c;
  c.channel = Caller::Channel::kTcp;
  c.address = probes::PeerAddress(fd);
  c.anonymous = true;
  c.denied =
      "this plaintext TCP connection (--listen) presented no identity and serves reads only; make "
      "control calls over the Unix socket as an allowed user";
  return c;
}

void CallerTable::Set(int fd, Caller caller) {
  std::lock_guard<std::mutex> lock(mu_);
  by_fd_[fd] = std::move(caller);
}

std::optional<Caller> CallerTable::Find(std::string_view peer) const {
  if (peer.substr(0, 3) != "fd:") return std::nullopt;
  int fd = -1;
  if (!absl::SimpleAtoi(Av(peer.substr(3)), &fd)) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<probes::Fd> ListenUnix(const std::string& path, BoundSocketFile* bound) {
  sockaddr_un sa{};
  if (path.empty() || path.size() >= sizeof(sa.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path of ", path.size(),
                                                   " bytes: must be 1..", sizeof(sa.sun_path) - 1));
  }
  probes::Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return absl::UnavailableError(absl::StrCat("socket: ", ErrnoText(errno)));
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return absl::UnavailableError(absl::StrCat("bind ", path, ": ", ErrnoText(errno)));
  }
  auto file = RecordBoundSocket(path);
  if (!file.ok()) return file.status();
  *bound = *std::move(file);
  if (listen(fd.get(), SOMAXCONN) != 0) {
    return absl::UnavailableError(absl::StrCat("listen ", path, ": ", ErrnoText(errno)));
  }
  return fd;
}

absl::StatusOr<probes::Fd> ListenTcpAddress(const std::string& flag, const std::string& address) {
  auto hp = ParseHostPort(address);
  if (!hp.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, "=", hp.status().message()));
  const std::string& host = hp->host;
  const uint16_t port = hp->port;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", address, ": cannot resolve the host: ", gai_strerror(rc)));
  }
  std::string last = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    probes::Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      last = ErrnoText(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd.get(), SOMAXCONN) != 0) {
      last = ErrnoText(errno);
      continue;
    }
    freeaddrinfo(res);
    return fd;
  }
  freeaddrinfo(res);
  return absl::UnavailableError(absl::StrCat("cannot listen on ", flag, "=", address, ": ", last));
}

uint16_t BoundPort(int fd) { return probes::LocalPort(fd); }

absl::StatusOr<std::unique_ptr<Listener>> Listener::Start(probes::Fd listen_fd,
                                                          ListenerOptions options) {
  probes::Fd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return absl::UnavailableError(absl::StrCat("eventfd: ", ErrnoText(errno)));
  return std::unique_ptr<Listener>(
      new Listener(std::move(listen_fd), std::move(wake), std::move(options)));
}

Listener::Listener(probes::Fd listen_fd, probes::Fd wake, ListenerOptions options)
    : listen_fd_(std::move(listen_fd)), wake_(std::move(wake)), options_(std::move(options)) {
  thread_ = std::thread([this] { Run(); });
}

Listener::~Listener() {
  stop_ = true;
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

void Listener::SweepLocked(std::vector<Open>* list) {
  std::erase_if(*list, [](const Open& o) {
    struct stat sb;
    return fstat(o.fd, &sb) != 0 || sb.st_dev != o.dev || sb.st_ino != o.ino;
  });
}

ListenerStats Listener::Stats() const {
  ListenerStats s;
  s.accepted = accepted_.load();
  s.refused = refused_.load();
  s.shed = shed_.load();
  std::lock_guard<std::mutex> lock(mu_);
  SweepLocked(&open_);
  s.open = open_.size();
  return s;
}

void Listener::Run() {
  absl::Time last_shed_log = absl::InfinitePast();
  uint64_t shed_since_log = 0;
  bool back_off = false;
  while (!stop_) {
    if (back_off) {
      // Out of descriptors with nothing left to shed with: wait (on the stop fd alone) before
      // the pending connection is tried again.
      pollfd w{wake_.get(), POLLIN, 0};
      (void)poll(&w, 1, 100);
      back_off = false;
      continue;
    }
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    const int n = poll(fds, 2, -1);
    if (stop_) break;
    if (n <= 0 || (fds[0].revents & POLLIN) == 0) continue;
    for (;;) {
      int fd = -1;
      const probes::Acceptor::Result r = acceptor_.Accept(listen_fd_.get(), &fd);
      if (r == probes::Acceptor::Result::kNone) break;
      if (r == probes::Acceptor::Result::kShed || r == probes::Acceptor::Result::kExhausted) {
        if (r == probes::Acceptor::Result::kShed) ++shed_, ++shed_since_log;
        const absl::Time now = absl::Now();
        if (now - last_shed_log >= absl::Seconds(10)) {
          Log(LogLevel::kWarning, options_.name, " listener: out of file descriptors; closed ",
              shed_since_log,
              " new connection(s) since the last report; accepting again once some are free");
          last_shed_log = now;
          shed_since_log = 0;
        }
        if (r == probes::Acceptor::Result::kExhausted) {
          back_off = true;
          break;
        }
        continue;
      }
      ++accepted_;
      const bool over = Count(&open_, options_.max_connections);
      if (over) {
        ++refused_;
        // A few refusals are answered (RESOURCE_EXHAUSTED naming the limit); beyond those the
        // connection is closed, so refusing costs a bounded number of descriptors too.
        if (Count(&refusing_, kMaxRefusing)) {
          UniqueFd(fd).reset();  // Closed at once: no answer.
        } else {
          Track(&refusing_, fd);
          options_.refuse(fd);
        }
        continue;
      }
      Track(&open_, fd);
      options_.serve(fd, options_.identify(fd));
    }
  }
}

bool Listener::Count(std::vector<Open>* list, size_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (list->size() < limit) return false;
  SweepLocked(list);
  return list->size() >= limit;
}

void Listener::Track(std::vector<Open>* list, int fd) {
  struct stat sb;
  if (fstat(fd, &sb) != 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  list->push_back({fd, sb.st_dev, sb.st_ino});
}

}  // namespace fabric
