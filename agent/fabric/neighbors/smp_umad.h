// SmpTransport over libibumad (rdma-core): the kernel's QP0 agent for the SMI of one port.
// Untested on hardware: these machines have no InfiniBand port, and Soft-RoCE (rxe) has no
// subnet management interface (no /dev/infiniband/umad* for it), so only the error paths run here.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/fabric/neighbors/smp.h"

namespace fabric::neighbors {

class UmadSmpTransportImpl : public SmpTransport {
 public:
  // umad_init, umad_open_port(ca_name, port) and an agent for class 0x81 version 1. NotFound when
  // there is no such device or port (or no umad device for it: RoCE, iWARP); PermissionDenied
  // when /dev/infiniband/umad* may not be opened.
  static absl::StatusOr<std::unique_ptr<UmadSmpTransportImpl>> Open(const std::string& ca_name,
                                                                    int port);
  ~UmadSmpTransportImpl() override;  // the agent, then the port
  UmadSmpTransportImpl(const UmadSmpTransportImpl&) = delete;
  UmadSmpTransportImpl& operator=(const UmadSmpTransportImpl&) = delete;

  // One request; the kernel matches the response by transaction ID. DeadlineExceeded when none
  // came within `timeout`.
  absl::StatusOr<std::string> Exchange(const std::string& mad, absl::Duration timeout) override;

 private:
  UmadSmpTransportImpl() = default;
  std::string name_;  // "ca:port", for messages
  int port_id_ = -1;
  int agent_id_ = -1;
};

}  // namespace fabric::neighbors
