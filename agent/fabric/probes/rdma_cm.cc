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
namespace {

// Makes an IPv4-mapped IPv6 text plain IPv4 (rdma_cm binds plain IPv4 addresses).
std::string PlainAddress(std::string a) {
  if (a.rfind("::ffff:", 0) == 0 && a.find('.') != std::string::npos) return a.substr(7);
  return a;
}

}  // namespace

absl::Status RdmaCm::Open(bool server, const std::string& bind) {
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
  rdma_event_channel* ec = rdma_create_event_channel();
  if (ec == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("rdma_create_event_channel: ", ErrnoText(errno), " (is rdma_ucm loaded?)"));
  }
  verbs_.objects().channel = EventChannel(ec, "rdma_destroy_event_channel", verbs_.errors());
  const int flags = fcntl(ec->fd, F_GETFL);
  if (flags < 0 || fcntl(ec->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::InternalError(absl::StrCat("fcntl on the rdma_cm channel: ", ErrnoText(errno)));
  }
  if (server) return Listen(bind);
  return absl::OkStatus();
}

absl::Status RdmaCm::Listen(const std::string& bind) {
  rdma_cm_id* listen_id = nullptr;
  if (rdma_create_id(channel(), &listen_id, nullptr, RDMA_PS_TCP) != 0) {
    return absl::InternalError(absl::StrCat("rdma_create_id: ", ErrnoText(errno)));
  }
  verbs_.objects().listener = CmId(listen_id, "rdma_destroy_id (listener)", verbs_.errors());
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string addr = PlainAddress(bind);
  if (int rc = getaddrinfo(addr.empty() ? nullptr : addr.c_str(), "0", &hints, &res); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rdma_cm bind address ", addr, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, freeaddrinfo);
  if (rdma_bind_addr(listen_id, res->ai_addr) != 0) {
    return absl::UnavailableError(absl::StrCat("rdma_bind_addr ", addr, ": ", ErrnoText(errno),
                                               " (no RDMA device on that address?)"));
  }
  if (rdma_listen(listen_id, static_cast<int>(verbs_.params().num_qps)) != 0) {
    return absl::InternalError(absl::StrCat("rdma_listen: ", ErrnoText(errno)));
  }
  port_ = ntohs(rdma_get_src_port(listen_id));
  return absl::OkStatus();
}

absl::StatusOr<RdmaCm::Event> RdmaCm::Wait(std::string_view what) {
  const Deadline deadline = Deadline::In(local_.timeout);
  for (;;) {
    FABRIC_RETURN_IF_ERROR(
        WaitFd(channel()->fd, POLLIN, deadline, cancel_, absl::StrCat("waiting for ", Av(what))));
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel(), &ev) != 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("rdma_get_cm_event: ", ErrnoText(errno)));
    }
    Event e{ev->event, ev->status, ev->id};
    if (int rc = rdma_ack_cm_event(ev); rc != 0) {
      return absl::InternalError(absl::StrCat("rdma_ack_cm_event: ", ErrnoText(errno)));
    }
    return e;
  }
}

absl::Status RdmaCm::Expect(rdma_cm_event_type want, std::string_view what, rdma_cm_id** id) {
  absl::StatusOr<Event> e = Wait(what);
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

absl::Status RdmaCm::Connect(const std::string& peer, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string addr = PlainAddress(peer);
  if (int rc = getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", addr, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, freeaddrinfo);
  const int timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(local_.timeout));
  for (uint32_t q = 0; q < verbs_.params().num_qps; ++q) {
    QpObjects& slot = verbs_.objects().qps.emplace_back();
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(channel(), &id, nullptr, RDMA_PS_TCP) != 0) {
      return absl::InternalError(absl::StrCat("rdma_create_id: ", ErrnoText(errno)));
    }
    OwnId(slot, id);
    if (rdma_resolve_addr(id, nullptr, res->ai_addr, timeout_ms) != 0) {
      return absl::UnavailableError(
          absl::StrCat("rdma_resolve_addr ", addr, ": ", ErrnoText(errno)));
    }
    FABRIC_RETURN_IF_ERROR(Expect(RDMA_CM_EVENT_ADDR_RESOLVED, "rdma_cm address resolution"));
    if (rdma_resolve_route(id, timeout_ms) != 0) {
      return absl::UnavailableError(absl::StrCat("rdma_resolve_route: ", ErrnoText(errno)));
    }
    FABRIC_RETURN_IF_ERROR(Expect(RDMA_CM_EVENT_ROUTE_RESOLVED, "rdma_cm route resolution"));
    FABRIC_RETURN_IF_ERROR(CreateQp(slot, id, addr));
    rdma_conn_param cp = ConnParam();
    if (rdma_connect(id, &cp) != 0) {
      return absl::UnavailableError(absl::StrCat("rdma_connect: ", ErrnoText(errno)));
    }
    FABRIC_RETURN_IF_ERROR(Established(slot, id));
  }
  return absl::OkStatus();
}

absl::Status RdmaCm::Accept() {
  for (uint32_t q = 0; q < verbs_.params().num_qps; ++q) {
    QpObjects& slot = verbs_.objects().qps.emplace_back();
    rdma_cm_id* id = nullptr;
    FABRIC_RETURN_IF_ERROR(
        Expect(RDMA_CM_EVENT_CONNECT_REQUEST, "an rdma_cm connect request", &id));
    OwnId(slot, id);
    FABRIC_RETURN_IF_ERROR(CreateQp(slot, id, /*peer=*/""));
    rdma_conn_param cp = ConnParam();
    if (rdma_accept(id, &cp) != 0) {
      return absl::UnavailableError(absl::StrCat("rdma_accept: ", ErrnoText(errno)));
    }
    FABRIC_RETURN_IF_ERROR(Established(slot, id));
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
  if (!verbs_.has_device()) {
    verbs_.UseDevice(id->verbs, id->port_num);
    if (verbs_.client() && !local_.device.empty() && local_.device != verbs_.device()) {
      return absl::FailedPreconditionError(absl::StrCat("rdma_cm routes ", Av(peer), " through ",
                                                        verbs_.device(), ", not ", local_.device));
    }
    FABRIC_RETURN_IF_ERROR(verbs_.QueryDevice());
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

// Waits for the connection rdma_connect or rdma_accept asked for; it is disconnected on release.
absl::Status RdmaCm::Established(QpObjects& slot, rdma_cm_id* id) {
  FABRIC_RETURN_IF_ERROR(Expect(RDMA_CM_EVENT_ESTABLISHED, "the rdma_cm connection"));
  slot.connection = CmConnection(id, "rdma_disconnect", verbs_.errors());
  return absl::OkStatus();
}

}  // namespace fabric::probes
