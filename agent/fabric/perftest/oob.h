// perftest's out-of-band channel, over which both ends swap versions, keys, sync points and
// reports: a TCP connection (the default), or with -R an rdma_cm connection of its own whose every
// message is one SEND (perftest's rdma_write_data/rdma_read_data). Either way the exchanges are
// symmetric (ctx_xchg_data): the client writes its message whole and then reads the peer's; the
// server reads first.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/common/status.h"
#include "agent/fabric/probes/access.h"
#include "agent/fabric/probes/net.h"

namespace fabric::probes {

class PerftestOob {
 public:
  PerftestOob(bool client, absl::Duration timeout, const Canceller* cancel)
      : client_(client), timeout_(timeout), cancel_(cancel) {}
  virtual ~PerftestOob() = default;
  PerftestOob(const PerftestOob&) = delete;
  PerftestOob& operator=(const PerftestOob&) = delete;

  bool client() const { return client_; }
  // The address of the peer (numeric).
  virtual std::string peer() const = 0;
  // rdma_cm: the device and port the connection runs on (the data QPs must use them too).
  virtual ibv_context* cm_context() const { return nullptr; }
  virtual uint8_t cm_port() const { return 0; }

  // One message, whole.
  virtual absl::Status Write(std::span<const uint8_t> mine, std::string_view what) = 0;
  // One message of exactly theirs.size() bytes within `bound`.
  virtual absl::Status Read(std::span<uint8_t> theirs, std::string_view what,
                            absl::Duration bound) = 0;
  // 6.28's negotiation message, whose size depends on the peer's build (312, or 320 with mlx5dv)
  // and is not announced.
  virtual absl::StatusOr<std::vector<uint8_t>> ReadNegotiation(std::string_view what) = 0;
  // After the last exchange: ends the connection without resetting a peer still writing.
  virtual void Close() = 0;

  absl::Status Read(std::span<uint8_t> theirs, std::string_view what) {
    return Read(theirs, what, timeout_);
  }
  absl::Status Exchange(std::span<const uint8_t> mine, std::span<uint8_t> theirs,
                        std::string_view what, absl::Duration read_bound) {
    if (client_) FABRIC_RETURN_IF_ERROR(Write(mine, what));
    FABRIC_RETURN_IF_ERROR(Read(theirs, what, read_bound));
    return client_ ? absl::OkStatus() : Write(mine, what);
  }
  absl::Status Exchange(std::span<const uint8_t> mine, std::span<uint8_t> theirs,
                        std::string_view what) {
    return Exchange(mine, theirs, what, timeout_);
  }

 protected:
  absl::Duration timeout() const { return timeout_; }
  const Canceller* cancel() const { return cancel_; }

 private:
  bool client_;
  absl::Duration timeout_;
  const Canceller* cancel_;
};

// Over an accepted or connected TCP socket.
std::unique_ptr<PerftestOob> TcpOob(Fd fd, bool client, absl::Duration timeout,
                                    const Canceller* cancel);

// -R, the server: listens on bind:port (empty bind: every address) for one rdma_cm connection,
// bounded by `cancel` only (as perftest's server waits); a peer outside `allow` is rejected
// before anything is set up for it, and the wait goes on. The listener is gone when this returns,
// which frees the port for the data connections.
// `listening`, when set, is called once the listener is up.
absl::StatusOr<std::unique_ptr<PerftestOob>> AcceptCmOob(
    const std::string& bind, uint16_t port, const AllowList& allow, absl::Duration timeout,
    const Canceller* cancel, const std::function<void()>& listening = nullptr);
// -R, the client: resolves host and connects to its port; a server not listening yet is tried
// again every 100 ms until `retry_until`.
absl::StatusOr<std::unique_ptr<PerftestOob>> ConnectCmOob(const std::string& host, uint16_t port,
                                                          absl::Duration timeout,
                                                          Deadline retry_until,
                                                          const Canceller* cancel);

}  // namespace fabric::probes
