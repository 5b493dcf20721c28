#include "agent/fabric/probes/rdma_cm.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"

namespace fabric::probes {
std::string PlainAddress(std::string a) {
  if (a.rfind("::ffff:", 0) == 0 && a.find('.') != std::string::npos) return a.substr(7);
  return a;
}

std::string CmPeerAddress(rdma_cm_id* id) {
  const sockaddr* sa = rdma_get_peer_addr(id);
  char host[NI_MAXHOST] = "";
  if (sa == nullptr ||
      getnameinfo(sa, sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in), host,
                  sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) {
    return "";
  }
  return PlainAddress(host);
}

absl::StatusOr<EventChannel> CreateCmChannel(ReleaseErrors& errors) {
  rdma_event_channel* ec = rdma_create_event_channel();
  if (ec == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("rdma_create_event_channel: ", ErrnoText(errno), " (is rdma_ucm loaded?)"));
  }
  EventChannel owned(ec, "rdma_destroy_event_channel", errors);
  const int flags = fcntl(ec->fd, F_GETFL);
  if (flags < 0 || fcntl(ec->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::InternalError(absl::StrCat("fcntl on the rdma_cm channel: ", ErrnoText(errno)));
  }
  return owned;
}

absl::StatusOr<CmId> ListenCm(rdma_event_channel* channel, const std::string& bind, uint16_t port,
                              int family, int backlog, ReleaseErrors& errors) {
  rdma_cm_id* listen_id = nullptr;
  if (rdma_create_id(channel, &listen_id, nullptr, RDMA_PS_TCP) != 0) {
    return absl::InternalError(absl::StrCat("rdma_create_id: ", ErrnoText(errno)));
  }
  CmId owned_id(listen_id, "rdma_destroy_id (listener)", errors);
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  hints.ai_family = family;
  addrinfo* res = nullptr;
  const std::string addr = PlainAddress(bind);
  if (int rc = getaddrinfo(addr.empty() ? nullptr : addr.c_str(), std::to_string(port).c_str(),
                           &hints, &res);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rdma_cm bind address ", addr, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, freeaddrinfo);
  if (rdma_bind_addr(listen_id, res->ai_addr) != 0) {
    return absl::UnavailableError(absl::StrCat("rdma_bind_addr ", addr.empty() ? "*" : addr, ":",
                                               port, ": ", ErrnoText(errno),
                                               " (no RDMA device on that address?)"));
  }
  if (rdma_listen(listen_id, backlog) != 0) {
    return absl::InternalError(absl::StrCat("rdma_listen: ", ErrnoText(errno)));
  }
  return owned_id;
}

absl::StatusOr<CmEvent> WaitCmEvent(rdma_event_channel* channel, Deadline deadline,
                                    const Canceller* cancel, std::string_view what) {
  for (;;) {
    FABRIC_RETURN_IF_ERROR(
        WaitFd(channel->fd, POLLIN, deadline, cancel, absl::StrCat("waiting for ", Av(what))));
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel, &ev) != 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("rdma_get_cm_event: ", ErrnoText(errno)));
    }
    CmEvent e{ev->event, ev->status, ev->id};
    if (int rc = rdma_ack_cm_event(ev); rc != 0) {
      return absl::InternalError(absl::StrCat("rdma_ack_cm_event: ", ErrnoText(errno)));
    }
    return e;
  }
}

absl::Status RdmaCm::Open(bool server, const std::string& bind, uint16_t port) {
  // rdma_cm picks the device from the address; a named one must at least exist.
  if (!local_.device.empty()) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    bool found = false;
    for (int i = 0; list != nullptr && i < n; ++i) {
      if (local_.device == ibv_get_device_name(list[i])) found = true;
    }
    if (list != nullptr) ibv_free_device_list(list);
    if (!found) return absl::NotFoundError(absl::StrCat("no RDMA device '", local_.device, "'"));
  }
  absl::StatusOr<EventChannel> ec = CreateCmChannel(verbs_.errors());
  if (!ec.ok()) return ec.status();
  verbs_.objects().channel = *std::move(ec);
  if (server) return Listen(bind, port);
  return absl::OkStatus();
}

absl::Status RdmaCm::Listen(const std::string& bind, uint16_t port) {
  absl::StatusOr<CmId> listener = ListenCm(
      channel(), bind, port, AF_UNSPEC, static_cast<int>(verbs_.params().num_qps), verbs_.errors());
  if (!listener.ok()) return listener.status();
  verbs_.objects().listener = *std::move(listener);
  port_ = ntohs(rdma_get_src_port(verbs_.objects().listener.get()));
  return absl::OkStatus();
}

absl::Status RdmaCm::Expect(rdma_cm_event_type want, std::string_view what, rdma_cm_id** id) {
  absl::StatusOr<CmEvent> e = WaitCmEvent(channel(), Deadline::In(local_.timeout), cancel_, what);
  if (!e.ok()) return e.status();
  if (e->event != want) {
    // A connect request we did not expect still hands us an id to destroy.
    if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) (void)rdma_reject(e->id, nullptr, 0);
    return absl::UnavailableError(absl::StrCat("rdma_cm: ", rdma_event_str(e->event), " (status ",
                                               e->status, ") while waiting for ", Av(what)));
  }
  if (id != nullptr) *id = e->id;
  return absl::OkStatus();
}

rdma_conn_param RdmaCm::ConnParam() const {
  const ibv_device_attr& dev_attr = verbs_.device_attr();
  rdma_conn_param cp{};
  cp.responder_resources = static_cast<uint8_t>(std::clamp(dev_attr.max_qp_rd_atom, 1, 16));
  cp.initiator_depth = static_cast<uint8_t>(std::clamp(dev_attr.max_qp_init_rd_atom, 1, 16));
  cp.retry_count = kRetryCount;
  cp.rnr_retry_count = RnrRetryFor(verbs_.params().test);
  return cp;
}

absl::Status RdmaCm::Connect(const std::string& peer, uint16_t port, Deadline retry_until) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string addr = PlainAddress(peer);
  if (int rc = getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", addr, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, freeaddrinfo);
  for (uint32_t q = 0; q < verbs_.params().num_qps; ++q) {
    for (;;) {
      bool rejected = false;
      absl::Status s = ConnectQp(res, addr, &rejected);
      if (s.ok()) break;
      // Only a QP on a device already set up can be dropped and tried again.
      if (!rejected || !verbs_.has_device() || retry_until.Passed()) return s;
      FABRIC_RETURN_IF_ERROR(verbs_.DropLastQp());
      absl::SleepFor(absl::Milliseconds(100));
      if (cancel_ != nullptr && cancel_->cancelled()) return absl::CancelledError("cancelled");
    }
  }
  return absl::OkStatus();
}

absl::Status RdmaCm::ConnectQp(const addrinfo* to, const std::string& addr, bool* rejected) {
  const int timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(local_.timeout));
  QpObjects& slot = verbs_.objects().qps.emplace_back();
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel(), &id, nullptr, RDMA_PS_TCP) != 0) {
    return absl::InternalError(absl::StrCat("rdma_create_id: ", ErrnoText(errno)));
  }
  OwnId(slot, id);
  if (rdma_resolve_addr(id, nullptr, to->ai_addr, timeout_ms) != 0) {
    return absl::UnavailableError(absl::StrCat("rdma_resolve_addr ", addr, ": ", ErrnoText(errno)));
  }
  FABRIC_RETURN_IF_ERROR(Expect(RDMA_CM_EVENT_ADDR_RESOLVED, "rdma_cm address resolution"));
  // Before the route: the path record (and so the QP's traffic class) is resolved with it.
  if (const int tos = verbs_.params().tos; tos >= 0) {
    uint8_t value = static_cast<uint8_t>(tos);
    if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &value, sizeof(value)) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rdma_set_option type of service ", tos, ": ", ErrnoText(errno)));
    }
  }
  if (rdma_resolve_route(id, timeout_ms) != 0) {
    return absl::UnavailableError(absl::StrCat("rdma_resolve_route: ", ErrnoText(errno)));
  }
  FABRIC_RETURN_IF_ERROR(Expect(RDMA_CM_EVENT_ROUTE_RESOLVED, "rdma_cm route resolution"));
  FABRIC_RETURN_IF_ERROR(CreateQp(slot, id, addr));
  rdma_conn_param cp = ConnParam();
  if (rdma_connect(id, &cp) != 0) {
    return absl::UnavailableError(absl::StrCat("rdma_connect: ", ErrnoText(errno)));
  }
  absl::StatusOr<CmEvent> e =
      WaitCmEvent(channel(), Deadline::In(local_.timeout), cancel_, "the rdma_cm connection");
  if (!e.ok()) return e.status();
  if (e->event != RDMA_CM_EVENT_ESTABLISHED) {
    *rejected = e->event == RDMA_CM_EVENT_REJECTED || e->event == RDMA_CM_EVENT_UNREACHABLE;
    return absl::UnavailableError(absl::StrCat("rdma_cm: ", rdma_event_str(e->event), " (status ",
                                               e->status, ") connecting to ", addr));
  }
  slot.connection = CmConnection(id, "rdma_disconnect", verbs_.errors());
  return absl::OkStatus();
}

// Requests and establishments may interleave (a client may ask for every QP at once): each
// request gets its QP and an accept; the connections count as they are established.
absl::Status RdmaCm::Accept(const std::string& only_from) {
  const uint32_t n = verbs_.params().num_qps;
  uint32_t accepted = 0, established = 0;
  while (established < n) {
    absl::StatusOr<CmEvent> e =
        WaitCmEvent(channel(), Deadline::In(local_.timeout), cancel_, "the rdma_cm connections");
    if (!e.ok()) return e.status();
    if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      const std::string from = CmPeerAddress(e->id);
      if (accepted == n || (!only_from.empty() && from != only_from)) {
        Log(LogLevel::kWarning, "rejected an rdma_cm connection from ", from,
            accepted == n ? " (every QP is connected)" : " (the test is with another peer)");
        (void)rdma_reject(e->id, nullptr, 0);
        (void)rdma_destroy_id(e->id);
        continue;
      }
      QpObjects& slot = verbs_.objects().qps.emplace_back();
      OwnId(slot, e->id);
      FABRIC_RETURN_IF_ERROR(CreateQp(slot, e->id, /*peer=*/""));
      rdma_conn_param cp = ConnParam();
      if (rdma_accept(e->id, &cp) != 0) {
        return absl::UnavailableError(absl::StrCat("rdma_accept: ", ErrnoText(errno)));
      }
      ++accepted;
      continue;
    }
    if (e->event == RDMA_CM_EVENT_ESTABLISHED) {
      for (QpObjects& slot : verbs_.objects().qps) {
        if (slot.cm_qp.get() == e->id && !slot.connection) {
          slot.connection = CmConnection(e->id, "rdma_disconnect", verbs_.errors());
          ++established;
        }
      }
      continue;
    }
    return absl::UnavailableError(absl::StrCat("rdma_cm: ", rdma_event_str(e->event), " (status ",
                                               e->status, ") while waiting for the connections"));
  }
  return absl::OkStatus();
}

// The first id (no device yet) is created before the memory set up on its device, so it is
// released after it; the others go with their QPs.
void RdmaCm::OwnId(QpObjects& slot, rdma_cm_id* id) {
  (verbs_.has_device() ? slot.id : verbs_.objects().first_id) =
      CmId(id, "rdma_destroy_id", verbs_.errors());
}

// The first id tells which device and port rdma_cm chose: the memory and CQs are set up for that
// device then. The client's named device (-d) must be the one rdma_cm routes `peer` through.
absl::Status RdmaCm::CreateQp(QpObjects& slot, rdma_cm_id* id, std::string_view peer) {
  if (verbs_.has_device() && id->verbs != verbs_.context()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rdma_cm connects ", Av(peer), " through ", ibv_get_device_name(id->verbs->device),
        ", not ", verbs_.device(), " where the test's memory is"));
  }
  if (!verbs_.has_device()) {
    verbs_.UseDevice(id->verbs, id->port_num);
    if (verbs_.client() && !local_.device.empty() && local_.device != verbs_.device()) {
      return absl::FailedPreconditionError(absl::StrCat("rdma_cm routes ", Av(peer), " through ",
                                                        verbs_.device(), ", not ", local_.device));
    }
    FABRIC_RETURN_IF_ERROR(verbs_.QueryDevice());
    FABRIC_RETURN_IF_ERROR(verbs_.Place());
    FABRIC_RETURN_IF_ERROR(verbs_.SetupMemory());
  }
  FABRIC_RETURN_IF_ERROR(verbs_.CreateQp(slot, id));
  uint8_t timeout = kAckTimeout;
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, 1) != 0) {
    Log(LogLevel::kWarning, "rdma_set_option ACK_TIMEOUT: ", ErrnoText(errno),
        " (keeping the CM's default)");
  }
  return absl::OkStatus();
}

}  // namespace fabric::probes
