#include "agent/daemon/workers/announcer.h"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/common/errno.h"
#include "agent/common/excerpt.h"
#include "agent/common/fd.h"
#include "agent/common/log.h"
#include "agent/common/socket_file.h"
#include "agent/common/status.h"
#include "agent/fabric/announce/handoff.h"
#include "agent/fabric/announce/link.h"
#include "agent/fabric/announce/to_proto.h"
#include "agent/fabric/announce/validate.h"
#include "agent/fabric/probes/net.h"

namespace fabric {
namespace {

using announce::Handoff;
using announce::Job;
using announce::Link;

// One Link shared by the successive Jobs of a held interface (first schedule, re-announces).
class SharedLink final : public Link {
 public:
  explicit SharedLink(std::shared_ptr<Link> inner) : inner_(std::move(inner)) {}
  absl::Status Send(const std::vector<uint8_t>& frame) override { return inner_->Send(frame); }
  absl::StatusOr<std::vector<uint8_t>> TryReceive() override { return inner_->TryReceive(); }
  int poll_fd() const override { return inner_->poll_fd(); }
  absl::StatusOr<bool> Tentative(const in6_addr& addr) override { return inner_->Tentative(addr); }

 private:
  std::shared_ptr<Link> inner_;
};

struct Entry {
  std::string container_id;
  std::string netns;
  announce::Target target;
  announce::Plan plan;
  std::shared_ptr<Link> link;  // Null once released.
  std::unique_ptr<Job> job;
  int packet_fd = -1;  // link's socket, for the "interface gone" check.
  absl::Time next = absl::InfiniteFuture();
  absl::Time done_at = absl::InfiniteFuture();
  absl::Time started;  // wall clock, for the API
  v1::Announcement::State state = v1::Announcement::RUNNING;
  std::optional<announce::Report> final_report;  // Kept when the job is dropped (released).
  bool first_round = false;                      // The current job's first Step ran.
  std::string note;                              // Why it was released, or the link's condition.
};

struct Connection {
  UniqueFd fd;
  absl::Time deadline;
  absl::Status refused;  // The peer may not hand off: read its message, then say so.
};

}  // namespace

struct Announcer::Impl {
  AnnouncerOptions opt;
  UniqueFd listen_fd;
  BoundSocketFile socket_file;  // What listen_fd is bound to, for teardown.
  probes::Acceptor acceptor;
  // Out of descriptors with nothing to shed: the listener is not polled until then (monotonic).
  absl::Time accept_paused_until = absl::InfinitePast();
  absl::Time last_shed_log = absl::InfinitePast();
  UniqueFd wake_fd;
  std::thread thread;

  mutable std::mutex mu;
  std::condition_variable cv;  // first rounds done
  bool stop = false;
  std::vector<std::unique_ptr<Entry>> held;     // guarded by mu
  std::deque<std::unique_ptr<Entry>> finished;  // guarded by mu
  AnnouncerStats retired;  // guarded by mu: reports of jobs no longer held or listed
  std::atomic<uint64_t> handoffs{0};
  std::atomic<uint64_t> handoffs_refused{0};
  std::vector<Connection> conns;  // thread only

  void Wake() {
    uint64_t one = 1;
    if (write(wake_fd.get(), &one, sizeof(one)) < 0 && errno != EAGAIN) {
      Log(LogLevel::kWarning, "announcer: wake: ", ErrnoText(errno));
    }
  }

  void Run();
  void Accept();
  void Serve(Connection& c);
  absl::Status Handle(const Handoff& h, std::vector<UniqueFd>& fds);
  void StepEntries(absl::Time now, const std::vector<pollfd>& pfds, size_t first_entry_pfd);
  void Release(std::unique_ptr<Entry> e, v1::Announcement::State state, const std::string& why);
  // Adds a report to `stats` (the totals of jobs that are gone go to `retired`).
  static void Count(const announce::Report& r, AnnouncerStats* stats);
  v1::Announcement ToProto(const Entry& e) const;
};

namespace {

void SetNext(Entry& e, absl::Time now) {
  e.next = e.job->Step(now);
  e.first_round = true;
  if (e.job->done()) {
    e.state = v1::Announcement::DONE;
    e.next = absl::InfiniteFuture();
    e.done_at = now;
    // Frames that arrive while idle are of no use; the smallest buffer keeps idle sockets cheap.
    int zero = 0;
    (void)setsockopt(e.packet_fd, SOL_SOCKET, SO_RCVBUF, &zero, sizeof(zero));
  }
}

// Drops queued frames (answers to an earlier round) before a re-announce.
void Drain(Link& link) {
  for (int i = 0; i < 4096; ++i) {
    if (!link.TryReceive().ok()) return;
  }
}

// Whether the socket's interface was unregistered (the kernel resets the bound ifindex to -1).
bool InterfaceGone(int packet_fd) {
  sockaddr_ll sll{};
  socklen_t len = sizeof(sll);
  if (getsockname(packet_fd, reinterpret_cast<sockaddr*>(&sll), &len) != 0) return true;
  return sll.sll_ifindex <= 0;
}

}  // namespace

void Announcer::Impl::Release(std::unique_ptr<Entry> e, v1::Announcement::State state,
                              const std::string& why) {
  if (e->job != nullptr) {
    if (!e->job->done()) e->job->Cancel();
    e->final_report = e->job->report();
  }
  e->state = state;
  e->note = why;
  e->next = absl::InfiniteFuture();
  e->job.reset();  // Jobs own SharedLinks: drop them before the link.
  e->link.reset();
  e->packet_fd = -1;
  Log(LogLevel::kInfo, "announce: released ", e->container_id.empty() ? "host" : e->container_id,
      " ", e->target.ifname, ": ", why);
  finished.push_back(std::move(e));
  while (finished.size() > opt.max_finished) {
    if (finished.front()->final_report) Count(*finished.front()->final_report, &retired);
    finished.pop_front();
  }
}

void Announcer::Impl::Count(const announce::Report& r, AnnouncerStats* stats) {
  stats->arp_sent += static_cast<uint64_t>(r.arp_sent);
  stats->na_sent += static_cast<uint64_t>(r.na_sent);
  stats->send_errors += static_cast<uint64_t>(r.send_errors);
  stats->conflicts += r.conflicts.size();
  for (const auto& g : r.gateways)
    ++(g.reachable ? stats->gateways_reachable : stats->gateways_unreachable);
}

v1::Announcement Announcer::Impl::ToProto(const Entry& e) const {
  const announce::Report* report = e.job != nullptr ? &e.job->report()
                                   : e.final_report ? &*e.final_report
                                                    : nullptr;
  v1::Announcement a = announce::ToAnnouncement(e.target, report);
  a.set_container_id(e.container_id);
  a.set_netns(e.netns);
  a.set_state(e.state);
  a.mutable_started()->set_seconds(absl::ToUnixSeconds(e.started));
  if (a.last_error().empty()) a.set_last_error(e.note);
  return a;
}

absl::Status Announcer::Impl::Handle(const Handoff& h, std::vector<UniqueFd>& fds) {
  std::lock_guard<std::mutex> lock(mu);
  if (h.kind == Handoff::Kind::kCancel) {
    int n = 0;
    for (auto it = held.begin(); it != held.end();) {
      if ((*it)->container_id == h.container_id &&
          (h.target.ifname.empty() || (*it)->target.ifname == h.target.ifname)) {
        Release(std::move(*it), v1::Announcement::CANCELLED, "cancelled (CNI DEL)");
        it = held.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    Log(LogLevel::kDebug, "announce: cancel ", h.container_id, ": ", n, " interface(s)");
    return absl::OkStatus();
  }
  if (fds.empty()) return absl::InvalidArgumentError("announce hand-off without a packet socket");
  if (held.size() >= opt.max_held) {
    return absl::ResourceExhaustedError(absl::StrCat("agent holds ", held.size(), " interfaces"));
  }
  // A repeated ADD for the same interface replaces the older hand-off.
  for (auto it = held.begin(); it != held.end(); ++it) {
    if ((*it)->container_id == h.container_id && (*it)->target.ifname == h.target.ifname) {
      Release(std::move(*it), v1::Announcement::CANCELLED, "replaced by a newer hand-off");
      held.erase(it);
      break;
    }
  }
  // Adopt owns them now, on error too.
  int packet_fd = fds[0].release();
  int netlink_fd = fds.size() > 1 ? fds[1].release() : -1;
  auto link = announce::PacketLink::Adopt(packet_fd, netlink_fd, h.target.ifname);
  if (!link.ok()) return link.status();

  auto e = std::make_unique<Entry>();
  e->container_id = h.container_id;
  e->netns = h.netns;
  e->target = h.target;
  e->plan = h.plan;
  e->packet_fd = packet_fd;
  e->link = std::shared_ptr<Link>(std::move(*link));
  e->started = absl::Now();
  e->job = std::make_unique<Job>(h.target, h.plan, std::make_unique<SharedLink>(e->link), h.start,
                                 h.first_done);
  e->next = absl::InfinitePast();  // Step at once: gateway priming and anything already due.
  ++handoffs;
  Log(LogLevel::kInfo, "announce: holding ", h.container_id, " ", h.target.ifname, " (",
      h.target.addresses.size(), " address(es))");
  held.push_back(std::move(e));
  return absl::OkStatus();
}

void Announcer::Impl::Accept() {
  for (;;) {
    int fd = -1;
    const probes::Acceptor::Result r = acceptor.Accept(listen_fd.get(), &fd);
    if (r == probes::Acceptor::Result::kNone) return;
    if (r != probes::Acceptor::Result::kAccepted) {
      // The plugin sees the connection closed and reports the hand-off as failed.
      const absl::Time now = absl::Now();
      if (now - last_shed_log >= absl::Seconds(10)) {
        Log(LogLevel::kWarning,
            "announce: out of file descriptors; refusing hand-offs until "
            "some are free");
        last_shed_log = now;
      }
      if (r == probes::Acceptor::Result::kExhausted) {
        accept_paused_until = announce::MonotonicNow() + absl::Milliseconds(100);
        return;
      }
      continue;
    }
    Connection c{UniqueFd(fd), absl::Now() + opt.connection_timeout, absl::OkStatus()};
    // Only root (the CNI plugin) or the agent's own user may hand sockets over.
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != 0 && cred.uid != geteuid())) {
      c.refused = absl::PermissionDeniedError(absl::StrCat("uid ", cred.uid, " may not hand off"));
    }
    conns.push_back(std::move(c));
  }
}

void Announcer::Impl::Serve(Connection& c) {
  char buf[16 * 1024];
  iovec iov{buf, sizeof(buf)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control;
  mh.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(c.fd.get(), &mh, MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  std::vector<UniqueFd> fds;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        fds.emplace_back(fd);
      }
    }
  }
  absl::Status result;
  if (!c.refused.ok()) {
    result = c.refused;  // Its fds close with `fds`.
  } else if (n <= 0) {
    result = absl::InvalidArgumentError("empty hand-off");
  } else if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    result = absl::InvalidArgumentError("hand-off too large");
  } else {
    auto h = announce::DecodeHandoff(std::string_view(buf, static_cast<size_t>(n)));
    result = h.ok() ? Handle(*h, fds) : h.status();
  }
  if (!result.ok()) {
    ++handoffs_refused;
    Log(LogLevel::kWarning, "announce: hand-off refused: ", result.message());
  }
  std::string ans = announce::EncodeHandoffAnswer(result);
  (void)send(c.fd.get(), ans.data(), ans.size(), MSG_NOSIGNAL);
  c.fd.reset();  // Done; fds not adopted close with `fds`.
  Wake();        // A new entry wants its first step.
}

void Announcer::Impl::StepEntries(absl::Time now, const std::vector<pollfd>& pfds,
                                  size_t first_entry_pfd) {
  std::lock_guard<std::mutex> lock(mu);
  const absl::Time mono = announce::MonotonicNow();
  bool stepped = false;
  for (size_t i = 0; i < held.size();) {
    Entry& e = *held[i];
    short revents = 0;
    // The pollfd vector was built from `held` before unlocking; entries only leave it on this
    // thread (or are added by RPCs at the end), so indices below the built size still match.
    if (first_entry_pfd + i < pfds.size() && pfds[first_entry_pfd + i].fd == e.packet_fd) {
      revents = pfds[first_entry_pfd + i].revents;
    }
    if ((revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
      int err = 0;
      socklen_t len = sizeof(err);
      (void)getsockopt(e.packet_fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (InterfaceGone(e.packet_fd)) {
        Release(std::move(held[i]), v1::Announcement::GONE, "the interface disappeared");
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      e.note = absl::StrCat("link went down (", ErrnoText(err != 0 ? err : ENETDOWN), ")");
    }
    if (e.job != nullptr && !e.job->done() && (mono >= e.next || (revents & POLLIN) != 0)) {
      SetNext(e, mono);
      stepped = true;
      if (e.job->done() && !e.job->report().last_error.empty() && InterfaceGone(e.packet_fd)) {
        Release(std::move(held[i]), v1::Announcement::GONE, "the interface disappeared");
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
    }
    if (e.state == v1::Announcement::DONE && now - e.done_at >= opt.hold) {
      Release(std::move(held[i]), v1::Announcement::DONE, "hold time over");
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
  if (stepped) cv.notify_all();
}

void Announcer::Impl::Run() {
  std::vector<pollfd> pfds;
  for (;;) {
    size_t first_entry_pfd;
    absl::Time next = absl::InfiniteFuture();
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop) return;
      pfds.clear();
      pfds.push_back({wake_fd.get(), POLLIN, 0});
      if (listen_fd.get() >= 0) {
        const bool paused = announce::MonotonicNow() < accept_paused_until;
        pfds.push_back({listen_fd.get(), static_cast<short>(paused ? 0 : POLLIN), 0});
        if (paused) next = std::min(next, accept_paused_until);
      }
      for (const Connection& c : conns) {
        pfds.push_back({c.fd.get(), POLLIN, 0});
        next = std::min(next, c.deadline - absl::Now() + announce::MonotonicNow());
      }
      first_entry_pfd = pfds.size();
      const absl::Time mono = announce::MonotonicNow();
      for (const auto& e : held) {
        bool running = e->job != nullptr && !e->job->done();
        // Errors (the interface going away) are reported whatever `events` says.
        pfds.push_back({e->packet_fd, static_cast<short>(running ? POLLIN : 0), 0});
        if (running) next = std::min(next, e->next);
        if (e->state == v1::Announcement::DONE) {
          next = std::min(next, mono + (e->done_at + opt.hold - mono));
        }
      }
    }
    const absl::Time mono = announce::MonotonicNow();
    int timeout_ms = -1;
    if (next != absl::InfiniteFuture()) {
      absl::Duration left = next - mono;
      timeout_ms =
          left <= absl::ZeroDuration()
              ? 0
              : static_cast<int>(std::min<int64_t>(
                    absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 60'000));
    }
    int n = poll(pfds.data(), pfds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) {
      Log(LogLevel::kError, "announcer: poll: ", ErrnoText(errno));
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    if ((pfds[0].revents & POLLIN) != 0) {
      uint64_t v;
      (void)read(wake_fd.get(), &v, sizeof(v));
    }
    size_t idx = 1;
    if (listen_fd.get() >= 0) {
      if ((pfds[idx].revents & POLLIN) != 0) Accept();
      ++idx;
    }
    const absl::Time now = absl::Now();
    size_t conn_count = first_entry_pfd - idx;
    for (size_t i = 0; i < conn_count && i < conns.size(); ++i) {
      if (pfds[idx + i].revents != 0) Serve(conns[i]);
    }
    std::erase_if(conns, [&](const Connection& c) { return c.fd.get() < 0 || now >= c.deadline; });
    StepEntries(mono, pfds, first_entry_pfd);
  }
}

Announcer::Announcer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<Announcer>> Announcer::Start(const AnnouncerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  impl->wake_fd = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (impl->wake_fd.get() < 0)
    return absl::InternalError(absl::StrCat("eventfd: ", ErrnoText(errno)));
  if (!options.socket.empty()) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (options.socket.size() >= sizeof(addr.sun_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat("announce socket path too long: ", options.socket));
    }
    std::memcpy(addr.sun_path, options.socket.data(), options.socket.size());
    impl->listen_fd = UniqueFd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (impl->listen_fd.get() < 0)
      return absl::InternalError(absl::StrCat("socket: ", ErrnoText(errno)));
    // Agents whose sockets share a directory could share this path: replace only a stale one.
    FABRIC_RETURN_IF_ERROR(ClearStaleSocket(options.socket, "--announce-socket"));
    if (bind(impl->listen_fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return absl::UnavailableError(
          absl::StrCat("announce socket ", options.socket, ": bind: ", ErrnoText(errno)));
    }
    auto bound = RecordBoundSocket(options.socket);
    if (!bound.ok()) return bound.status();
    impl->socket_file = *std::move(bound);
    // Root connects whatever the mode; nobody else needs to.
    if (chmod(options.socket.c_str(), 0600) != 0 || listen(impl->listen_fd.get(), 128) != 0) {
      int err = errno;
      (void)RemoveBoundSocket(impl->socket_file);
      return absl::UnavailableError(
          absl::StrCat("announce socket ", options.socket, ": ", ErrnoText(err)));
    }
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<Announcer>(new Announcer(std::move(impl)));
}

Announcer::~Announcer() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->Wake();
  if (impl_->thread.joinable()) impl_->thread.join();
  (void)RemoveBoundSocket(impl_->socket_file);  // Only ours: another agent may have bound it since.
  for (auto& e : impl_->held) {
    if (e->job != nullptr) e->job->Cancel();
    e->job.reset();
  }
}

std::vector<v1::Announcement> Announcer::List(const std::string& container_id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<v1::Announcement> out;
  for (const auto& e : impl_->held) {
    if (container_id.empty() || e->container_id == container_id) out.push_back(impl_->ToProto(*e));
  }
  for (const auto& e : impl_->finished) {
    if (container_id.empty() || e->container_id == container_id) out.push_back(impl_->ToProto(*e));
  }
  return out;
}

AnnouncerStats Announcer::Stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  AnnouncerStats s = impl_->retired;
  s.handoffs = impl_->handoffs.load();
  s.handoffs_refused = impl_->handoffs_refused.load();
  for (const auto& e : impl_->held) {
    if (e->job != nullptr) {
      Impl::Count(e->job->report(), &s);
      if (!e->job->done()) ++s.running;
    }
    ++s.held;
  }
  for (const auto& e : impl_->finished) {
    if (e->final_report) Impl::Count(*e->final_report, &s);
  }
  return s;
}

absl::StatusOr<std::vector<v1::Announcement>> Announcer::Announce(const v1::AnnounceRequest& req) {
  std::vector<Entry*> started;
  std::unique_lock<std::mutex> lock(impl_->mu);
  const absl::Time mono = announce::MonotonicNow();
  if (!req.ifname().empty()) FABRIC_RETURN_IF_ERROR(announce::CheckIfname(req.ifname()));
  if (!req.container_id().empty()) {
    if (!req.ips().empty()) {
      // A pod announces exactly what fabric-cni handed over (the addresses CNI gave it).
      return absl::InvalidArgumentError("ips: only for interfaces of the agent's own netns");
    }
    for (auto& e : impl_->held) {
      if (e->container_id != req.container_id()) continue;
      if (!req.ifname().empty() && e->target.ifname != req.ifname()) continue;
      if (e->job != nullptr) {
        if (!e->job->done()) e->job->Cancel();
        Impl::Count(e->job->report(), &impl_->retired);  // Its frames stay counted.
      }
      Drain(*e->link);
      e->job = std::make_unique<Job>(e->target, e->plan, std::make_unique<SharedLink>(e->link),
                                     mono, false);
      e->state = v1::Announcement::RUNNING;
      e->first_round = false;
      e->next = absl::InfinitePast();
      e->done_at = absl::InfiniteFuture();
      started.push_back(e.get());
    }
    if (started.empty()) {
      bool released = false;
      for (const auto& e : impl_->finished) released |= e->container_id == req.container_id();
      if (released) {
        return absl::FailedPreconditionError(
            absl::StrCat("container ", Excerpt(req.container_id()),
                         ": its interfaces are no longer held (see ListAnnouncements)"));
      }
      return absl::NotFoundError(absl::StrCat("container ", Excerpt(req.container_id()),
                                              ": no announcements handed to this agent"));
    }
  } else {
    if (req.ifname().empty())
      return absl::InvalidArgumentError("container_id or ifname is required");
    if (req.ips_size() > static_cast<int>(announce::kMaxAnnounceAddresses)) {
      // Refused before any netlink query; ChooseOwnAddresses says the same.
      return announce::ChooseOwnAddresses(announce::Target{}, {req.ips().begin(), req.ips().end()})
          .status();
    }
    lock.unlock();  // Netlink queries without the lock.
    auto target = announce::DescribeInterface(req.ifname());
    if (!target.ok()) return target.status();
    // Only addresses configured on the interface now: announcing any other would poison the
    // segment's ARP/ND caches with this host's MAC. Nothing is sent unless all pass.
    auto chosen = announce::ChooseOwnAddresses(*target, {req.ips().begin(), req.ips().end()});
    if (!chosen.ok()) return chosen.status();
    target->addresses = *std::move(chosen);
    auto link = announce::PacketLink::Open(target->ifindex);
    if (!link.ok()) return link.status();
    FABRIC_RETURN_IF_ERROR(announce::CheckAnnounceable(**link, *target, impl_->opt.host_plan.ipv6,
                                                       !req.ips().empty()));
    auto e = std::make_unique<Entry>();
    e->netns = "host";
    e->target = *target;
    e->plan = impl_->opt.host_plan;
    e->packet_fd = (*link)->packet_fd();
    e->link = std::shared_ptr<Link>(std::move(*link));
    e->started = absl::Now();
    e->job = std::make_unique<Job>(e->target, e->plan, std::make_unique<SharedLink>(e->link),
                                   announce::MonotonicNow(), false);
    e->next = absl::InfinitePast();
    lock.lock();
    for (auto it = impl_->held.begin(); it != impl_->held.end(); ++it) {
      if ((*it)->container_id.empty() && (*it)->target.ifname == req.ifname()) {
        impl_->Release(std::move(*it), v1::Announcement::CANCELLED, "replaced by a newer request");
        impl_->held.erase(it);
        break;
      }
    }
    started.push_back(e.get());
    impl_->held.push_back(std::move(e));
  }
  impl_->Wake();
  // Entries stay in `held` while we wait: only this lock's holders remove them, and the thread
  // removes an entry only after its first step, which is what the wait is for.
  impl_->cv.wait_for(lock, std::chrono::seconds(2), [&] {
    for (Entry* e : started) {
      bool present = false;
      for (const auto& h : impl_->held) present |= h.get() == e;
      if (present && !e->first_round) return false;
    }
    return true;
  });
  std::vector<v1::Announcement> out;
  for (Entry* e : started) {
    for (const auto& h : impl_->held) {
      if (h.get() == e) out.push_back(impl_->ToProto(*e));
    }
  }
  return out;
}

}  // namespace fabric
