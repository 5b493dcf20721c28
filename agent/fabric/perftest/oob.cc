#include "agent/fabric/perftest/oob.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"
#include "agent/common/strings.h"
#include "agent/fabric/perftest/wire.h"
#include "agent/fabric/probes/rdma_cm.h"
#include "agent/fabric/probes/verbs_handles.h"

namespace fabric::probes {
namespace {

namespace pt = ::fabric::perftest;

class TcpOobImpl final : public PerftestOob {
 public:
  TcpOobImpl(Fd fd, bool client, absl::Duration timeout, const Canceller* cancel)
      : PerftestOob(client, timeout, cancel), fd_(std::move(fd)), peer_(PeerAddress(fd_.get())) {}

  // Asked once the peer may have closed (the test's log line): kept from the connection.
  std::string peer() const override { return peer_; }
  absl::Status Write(std::span<const uint8_t> mine, std::string_view what) override {
    return WriteAll(fd_.get(), mine.data(), mine.size(), Deadline::In(timeout()), cancel(), what);
  }
  absl::Status Read(std::span<uint8_t> theirs, std::string_view what,
                    absl::Duration bound) override {
    return ReadAll(fd_.get(), theirs.data(), theirs.size(), Deadline::In(bound), cancel(), what);
  }
  // A stream says nothing of message sizes: the smaller, then whatever else arrives in 200 ms.
  absl::StatusOr<std::vector<uint8_t>> ReadNegotiation(std::string_view what) override {
    std::vector<uint8_t> remote(pt::kNegotiateSize);
    FABRIC_RETURN_IF_ERROR(PerftestOob::Read(remote, what));
    if (WaitFd(fd_.get(), POLLIN, Deadline::In(absl::Milliseconds(200)), cancel(), what).ok()) {
      remote.resize(pt::kNegotiateSizeMlx5dv);
      FABRIC_RETURN_IF_ERROR(
          PerftestOob::Read(std::span<uint8_t>(remote).subspan(pt::kNegotiateSize), what));
    }
    return remote;
  }
  // perftest before 6.17 writes "done" after its last exchange and nobody reads it: half-close
  // and drain, so that our close never resets a peer still writing.
  void Close() override {
    shutdown(fd_.get(), SHUT_WR);
    const Deadline until = Deadline::In(absl::Seconds(2));
    char buf[64];
    while (WaitFd(fd_.get(), POLLIN, until, cancel(), "close").ok()) {
      const ssize_t n = read(fd_.get(), buf, sizeof buf);
      if (n <= 0 && !(n < 0 && errno == EINTR)) break;
    }
  }

 private:
  Fd fd_;
  std::string peer_;
};

// perftest's messages are at most its negotiation struct; a receive this large takes any of them
// (a peer's larger message would fail its SEND, not overrun us).
constexpr size_t kCmMessageMax = 512;
constexpr uint64_t kSyncWrId = 5;  // perftest's SYNC_SPEC_ID

// -R: one RC QP on its own rdma_cm connection; the objects in creation order, released in reverse.
class CmOobImpl final : public PerftestOob {
 public:
  CmOobImpl(bool client, absl::Duration timeout, const Canceller* cancel)
      : PerftestOob(client, timeout, cancel) {}

  std::string peer() const override { return peer_; }
  ibv_context* cm_context() const override { return id_->verbs; }
  uint8_t cm_port() const override { return id_->port_num; }

  absl::Status Accept(const std::string& bind, uint16_t port, const AllowList& allow,
                      const std::function<void()>& listening);
  absl::Status Connect(const std::string& host, uint16_t port, Deadline retry_until);

  absl::Status Write(std::span<const uint8_t> mine, std::string_view what) override {
    if (mine.size() > kCmMessageMax) return absl::InternalError("message too large");
    std::memcpy(buf_.get(), mine.data(), mine.size());
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.get()), static_cast<uint32_t>(mine.size()),
                mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kSyncWrId;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(id_->qp, &wr, &bad); rc != 0) {
      return absl::UnavailableError(
          absl::StrCat("ibv_post_send (", Av(what), "): ", ErrnoText(rc)));
    }
    ibv_wc wc;
    return Poll(send_cq_.get(), Deadline::In(timeout()), what, &wc);
  }

  absl::Status Read(std::span<uint8_t> theirs, std::string_view what,
                    absl::Duration bound) override {
    absl::StatusOr<size_t> n = Receive(Deadline::In(bound), what);
    if (!n.ok()) return n.status();
    if (*n != theirs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the perftest peer sent ", *n, " bytes where ",
                                                     theirs.size(), " were due (", Av(what), ")"));
    }
    std::memcpy(theirs.data(), buf_.get() + kCmMessageMax, *n);
    return absl::OkStatus();
  }

  // One SEND says its own size.
  absl::StatusOr<std::vector<uint8_t>> ReadNegotiation(std::string_view what) override {
    absl::StatusOr<size_t> n = Receive(Deadline::In(timeout()), what);
    if (!n.ok()) return n.status();
    if (*n != pt::kNegotiateSize && *n != pt::kNegotiateSizeMlx5dv) {
      return absl::InvalidArgumentError(absl::StrCat("the perftest peer's negotiation is ", *n,
                                                     " bytes, not ", pt::kNegotiateSize, " or ",
                                                     pt::kNegotiateSizeMlx5dv));
    }
    const uint8_t* in = buf_.get() + kCmMessageMax;
    return std::vector<uint8_t>(in, in + *n);
  }

  void Close() override {}  // the disconnect is the connection's release

 private:
  absl::Status Resources();
  absl::Status PostRecv();
  // The receive's size once it completes; the next receive is posted.
  absl::StatusOr<size_t> Receive(Deadline deadline, std::string_view what);
  absl::Status Poll(ibv_cq* cq, Deadline deadline, std::string_view what, ibv_wc* wc);
  absl::StatusOr<CmEvent> Event(Deadline deadline, std::string_view what) {
    return WaitCmEvent(channel_.get(), deadline, cancel(), what);
  }

  std::string peer_;
  ReleaseErrors errors_;  // first: the handles below report to it
  EventChannel channel_;
  CmId listener_;
  CmId id_;
  Pd pd_;
  Buffer buf_;  // the send area, then the receive area
  Mr mr_;
  Cq send_cq_;
  Cq recv_cq_;
  CmQp qp_;
  CmConnection connection_;
};

absl::Status CmOobImpl::Resources() {
  ibv_pd* pd = ibv_alloc_pd(id_->verbs);
  if (pd == nullptr) return absl::InternalError(absl::StrCat("ibv_alloc_pd: ", ErrnoText(errno)));
  pd_ = Pd(pd, "ibv_dealloc_pd", errors_);
  void* mem = nullptr;
  if (posix_memalign(&mem, 4096, 2 * kCmMessageMax) != 0) {
    return absl::ResourceExhaustedError("no memory for the rdma_cm exchange");
  }
  std::memset(mem, 0, 2 * kCmMessageMax);
  buf_ = Buffer(static_cast<uint8_t*>(mem), "free buffer", errors_);
  // An int, not the enum: verbs.h's ibv_reg_mr macro ors it with another enum type (clang's
  // -Wdeprecated-enum-enum-conversion in C++20).
  constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE;
  ibv_mr* mr = ibv_reg_mr(pd, mem, 2 * kCmMessageMax, kAccess);
  if (mr == nullptr) return absl::InternalError(absl::StrCat("ibv_reg_mr: ", ErrnoText(errno)));
  mr_ = Mr(mr, "ibv_dereg_mr", errors_);
  for (Cq* slot : {&send_cq_, &recv_cq_}) {
    ibv_cq* cq = ibv_create_cq(id_->verbs, 2, nullptr, nullptr, 0);
    if (cq == nullptr) {
      return absl::InternalError(absl::StrCat("ibv_create_cq: ", ErrnoText(errno)));
    }
    *slot = Cq(cq, "ibv_destroy_cq", errors_);
  }
  ibv_qp_init_attr a{};
  a.send_cq = send_cq_.get();
  a.recv_cq = recv_cq_.get();
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 1;
  a.cap.max_recv_wr = 1;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  if (rdma_create_qp(id_.get(), pd, &a) != 0) {
    return absl::InternalError(absl::StrCat("rdma_create_qp: ", ErrnoText(errno)));
  }
  qp_ = CmQp(id_.get(), "rdma_destroy_qp", errors_);
  return PostRecv();
}

absl::Status CmOobImpl::PostRecv() {
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.get() + kCmMessageMax), kCmMessageMax, mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = kSyncWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(id_->qp, &wr, &bad); rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_post_recv: ", ErrnoText(rc)));
  }
  return absl::OkStatus();
}

absl::Status CmOobImpl::Poll(ibv_cq* cq, Deadline deadline, std::string_view what, ibv_wc* wc) {
  for (uint32_t i = 0;; ++i) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n > 0) {
      if (wc->status != IBV_WC_SUCCESS) {
        return absl::UnavailableError(absl::StrCat("the rdma_cm exchange (", Av(what), "): '",
                                                   ibv_wc_status_str(wc->status), "'"));
      }
      return absl::OkStatus();
    }
    if (n < 0) return absl::UnavailableError("ibv_poll_cq failed (device removed?)");
    // Spin for the reply of a quick exchange, then poll every 200 us: the wait for a peer's run
    // (minutes) must not take a core from it (a software RoCE's packets are this CPU's work).
    if (i >= 1024) {
      if (cancel() != nullptr && cancel()->cancelled()) return absl::CancelledError("cancelled");
      if (deadline.Passed()) {
        return absl::DeadlineExceededError(absl::StrCat("timed out ", Av(what)));
      }
      // A peer that went away says so on the channel.
      absl::StatusOr<CmEvent> e = Event(Deadline::At(0), what);
      if (e.ok() && e->event == RDMA_CM_EVENT_DISCONNECTED) {
        return absl::UnavailableError(
            absl::StrCat("the perftest peer disconnected (", Av(what), ")"));
      }
      usleep(200);
    }
  }
}

absl::StatusOr<size_t> CmOobImpl::Receive(Deadline deadline, std::string_view what) {
  ibv_wc wc;
  FABRIC_RETURN_IF_ERROR(Poll(recv_cq_.get(), deadline, what, &wc));
  FABRIC_RETURN_IF_ERROR(PostRecv());
  return static_cast<size_t>(wc.byte_len);
}

rdma_conn_param OobConnParam() {
  rdma_conn_param cp{};
  cp.retry_count = 7;
  cp.rnr_retry_count = 7;
  return cp;
}

absl::Status CmOobImpl::Accept(const std::string& bind, uint16_t port, const AllowList& allow,
                               const std::function<void()>& listening) {
  absl::StatusOr<EventChannel> ec = CreateCmChannel(errors_);
  if (!ec.ok()) return ec.status();
  channel_ = *std::move(ec);
  // IPv4, as perftest's rdma_server_connect.
  absl::StatusOr<CmId> listener = ListenCm(channel_.get(), bind, port, AF_INET, 1, errors_);
  if (!listener.ok()) return listener.status();
  listener_ = *std::move(listener);
  if (listening) listening();
  const Deadline forever = Deadline::At(std::numeric_limits<int64_t>::max());
  for (;;) {
    absl::StatusOr<CmEvent> e = Event(forever, "a perftest client");
    if (!e.ok()) return e.status();
    if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) continue;
    const std::string from = CmPeerAddress(e->id);
    if (!allow.Allows(from)) {
      (void)rdma_reject(e->id, nullptr, 0);
      (void)rdma_destroy_id(e->id);
      return absl::PermissionDeniedError(absl::StrCat(
          "perftest client ", from, " is not in the allow-list (", allow.ToString(), ")"));
    }
    peer_ = from;
    id_ = CmId(e->id, "rdma_destroy_id", errors_);
    break;
  }
  FABRIC_RETURN_IF_ERROR(Resources());
  rdma_conn_param cp = OobConnParam();
  if (rdma_accept(id_.get(), &cp) != 0) {
    return absl::UnavailableError(absl::StrCat("rdma_accept: ", ErrnoText(errno)));
  }
  absl::StatusOr<CmEvent> e = Event(Deadline::In(timeout()), "the perftest client's connection");
  if (!e.ok()) return e.status();
  if (e->event != RDMA_CM_EVENT_ESTABLISHED) {
    return absl::UnavailableError(
        absl::StrCat("rdma_cm: ", rdma_event_str(e->event), " accepting ", peer_));
  }
  connection_ = CmConnection(id_.get(), "rdma_disconnect", errors_);
  listener_.reset();  // the data connections listen on the same port
  return errors_.Take();
}

absl::Status CmOobImpl::Connect(const std::string& host, uint16_t port, Deadline retry_until) {
  absl::StatusOr<EventChannel> ec = CreateCmChannel(errors_);
  if (!ec.ok()) return ec.status();
  channel_ = *std::move(ec);
  addrinfo hints{};
  hints.ai_family = AF_INET;  // as perftest's rdma_client_connect
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string addr = PlainAddress(host);
  if (int rc = getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", addr, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, freeaddrinfo);
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout()));
  for (;;) {
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(channel_.get(), &id, nullptr, RDMA_PS_TCP) != 0) {
      return absl::InternalError(absl::StrCat("rdma_create_id: ", ErrnoText(errno)));
    }
    id_ = CmId(id, "rdma_destroy_id", errors_);
    auto step = [&](int rc, const char* call, rdma_cm_event_type want) -> absl::Status {
      if (rc != 0)
        return absl::UnavailableError(absl::StrCat(call, " ", addr, ": ", ErrnoText(errno)));
      absl::StatusOr<CmEvent> e = Event(Deadline::In(timeout()), call);
      if (!e.ok()) return e.status();
      if (e->event != want) {
        const bool refused =
            e->event == RDMA_CM_EVENT_REJECTED || e->event == RDMA_CM_EVENT_UNREACHABLE;
        return absl::UnavailableError(
            absl::StrCat("rdma_cm: ", rdma_event_str(e->event), " from ", addr, " port ", port,
                         refused ? " (no perftest server listening?)" : ""));
      }
      return absl::OkStatus();
    };
    FABRIC_RETURN_IF_ERROR(step(rdma_resolve_addr(id, nullptr, res->ai_addr, ms),
                                "rdma_resolve_addr", RDMA_CM_EVENT_ADDR_RESOLVED));
    FABRIC_RETURN_IF_ERROR(
        step(rdma_resolve_route(id, ms), "rdma_resolve_route", RDMA_CM_EVENT_ROUTE_RESOLVED));
    FABRIC_RETURN_IF_ERROR(Resources());
    rdma_conn_param cp = OobConnParam();
    absl::Status s = step(rdma_connect(id, &cp), "rdma_connect", RDMA_CM_EVENT_ESTABLISHED);
    if (s.ok()) break;
    if (retry_until.Passed()) return s;
    // Nothing listens yet: everything of this attempt goes, newest first.
    qp_.reset();
    recv_cq_.reset();
    send_cq_.reset();
    mr_.reset();
    buf_.reset();
    pd_.reset();
    id_.reset();
    FABRIC_RETURN_IF_ERROR(errors_.Take());
    absl::SleepFor(absl::Milliseconds(100));
    if (cancel() != nullptr && cancel()->cancelled()) return absl::CancelledError("cancelled");
  }
  peer_ = addr;
  connection_ = CmConnection(id_.get(), "rdma_disconnect", errors_);
  return errors_.Take();
}

}  // namespace

std::unique_ptr<PerftestOob> TcpOob(Fd fd, bool client, absl::Duration timeout,
                                    const Canceller* cancel) {
  return std::make_unique<TcpOobImpl>(std::move(fd), client, timeout, cancel);
}

absl::StatusOr<std::unique_ptr<PerftestOob>> AcceptCmOob(const std::string& bind, uint16_t port,
                                                         const AllowList& allow,
                                                         absl::Duration timeout,
                                                         const Canceller* cancel,
                                                         const std::function<void()>& listening) {
  auto oob = std::make_unique<CmOobImpl>(/*client=*/false, timeout, cancel);
  FABRIC_RETURN_IF_ERROR(oob->Accept(bind, port, allow, listening));
  return std::unique_ptr<PerftestOob>(std::move(oob));
}

absl::StatusOr<std::unique_ptr<PerftestOob>> ConnectCmOob(const std::string& host, uint16_t port,
                                                          absl::Duration timeout,
                                                          Deadline retry_until,
                                                          const Canceller* cancel) {
  auto oob = std::make_unique<CmOobImpl>(/*client=*/true, timeout, cancel);
  FABRIC_RETURN_IF_ERROR(oob->Connect(host, port, retry_until));
  return std::unique_ptr<PerftestOob>(std::move(oob));
}

}  // namespace fabric::probes
