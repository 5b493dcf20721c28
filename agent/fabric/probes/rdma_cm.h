// The rdma_cm path (-R): rdma_cm resolves the peer and connects one id per QP, and the first id
// tells which device and port the test runs on. Its objects live in the test's VerbsObjects.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/fabric/probes/net.h"
#include "agent/fabric/probes/params.h"
#include "agent/fabric/probes/verbs_resources.h"

namespace fabric::probes {

class RdmaCm {
 public:
  RdmaCm(VerbsResources& verbs, const Endpoint& local, const Canceller* cancel)
      : verbs_(verbs), local_(local), cancel_(cancel) {}

  // The event channel and, on the server, the listener bound to `bind` (port: port()). A device
  // named in `local` must exist, though rdma_cm picks the device from the address.
  absl::Status Open(bool server, const std::string& bind);
  uint16_t port() const { return port_; }
  // The client: one connection per QP to the server's listener at peer:port.
  absl::Status Connect(const std::string& peer, uint16_t port);
  // The server: one accepted connection per QP.
  absl::Status Accept();

 private:
  struct Event {
    rdma_cm_event_type event;
    int status;
    rdma_cm_id* id;
  };
  absl::Status Listen(const std::string& bind);
  absl::StatusOr<Event> Wait(std::string_view what);
  absl::Status Expect(rdma_cm_event_type want, std::string_view what, rdma_cm_id** id = nullptr);
  // Owns a new id of `slot`'s QP.
  void OwnId(QpObjects& slot, rdma_cm_id* id);
  absl::Status CreateQp(QpObjects& slot, rdma_cm_id* id, std::string_view peer);
  absl::Status Established(QpObjects& slot, rdma_cm_id* id);
  rdma_conn_param ConnParam() const;
  rdma_event_channel* channel() { return verbs_.objects().channel.get(); }

  VerbsResources& verbs_;
  Endpoint local_;
  const Canceller* cancel_;
  uint16_t port_ = 0;
};

}  // namespace fabric::probes
