// The rdma_cm path (-R): rdma_cm resolves the peer and connects one id per QP, and the first id
// tells which device and port the test runs on. Its objects live in the test's VerbsObjects.
#pragma once

#include <netdb.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/fabric/probes/net.h"
#include "agent/fabric/probes/params.h"
#include "agent/fabric/probes/verbs_resources.h"

namespace fabric::probes {

// One rdma_cm event, acknowledged.
struct CmEvent {
  rdma_cm_event_type event;
  int status;
  rdma_cm_id* id;
};
// An event channel whose fd does not block (so that waits can be bounded), owned by `errors`'s
// owner.
absl::StatusOr<EventChannel> CreateCmChannel(ReleaseErrors& errors);
// A listener on bind:port (empty bind: every address; port 0: any) of `family` (AF_UNSPEC:
// either).
absl::StatusOr<CmId> ListenCm(rdma_event_channel* channel, const std::string& bind, uint16_t port,
                              int family, int backlog, ReleaseErrors& errors);
// The next event on `channel`, within `deadline` or until `cancel`.
absl::StatusOr<CmEvent> WaitCmEvent(rdma_event_channel* channel, Deadline deadline,
                                    const Canceller* cancel, std::string_view what);
// Makes an IPv4-mapped IPv6 text plain IPv4 (rdma_cm binds plain IPv4 addresses).
std::string PlainAddress(std::string a);
// The numeric address of `id`'s peer.
std::string CmPeerAddress(rdma_cm_id* id);

class RdmaCm {
 public:
  RdmaCm(VerbsResources& verbs, const Endpoint& local, const Canceller* cancel)
      : verbs_(verbs), local_(local), cancel_(cancel) {}

  // The event channel and, on the server, the listener bound to `bind` (port: port()). A device
  // named in `local` must exist, though rdma_cm picks the device from the address.
  // `port` 0: any.
  absl::Status Open(bool server, const std::string& bind, uint16_t port = 0);
  uint16_t port() const { return port_; }
  // The client: one connection per QP to the server's listener at peer:port. Until
  // `retry_until`, a QP the server rejects (it is not listening yet) is tried again every 100 ms.
  absl::Status Connect(const std::string& peer, uint16_t port,
                       Deadline retry_until = Deadline::At(0));
  // The server: one accepted connection per QP; with `only_from`, a request from another
  // address is rejected and the wait goes on.
  absl::Status Accept(const std::string& only_from = "");

 private:
  absl::Status Listen(const std::string& bind, uint16_t port);
  // One QP's connection attempt; `rejected` tells a server that is not listening.
  absl::Status ConnectQp(const addrinfo* to, const std::string& addr, bool* rejected);
  absl::Status Expect(rdma_cm_event_type want, std::string_view what, rdma_cm_id** id = nullptr);
  // Owns a new id of `slot`'s QP.
  void OwnId(QpObjects& slot, rdma_cm_id* id);
  absl::Status CreateQp(QpObjects& slot, rdma_cm_id* id, std::string_view peer);
  rdma_conn_param ConnParam() const;
  rdma_event_channel* channel() { return verbs_.objects().channel.get(); }

  VerbsResources& verbs_;
  Endpoint local_;
  const Canceller* cancel_;
  uint16_t port_ = 0;
};

}  // namespace fabric::probes
