// The agent's own accept loops for the API. gRPC 1.51's listener closes its socket for good on
// the first EMFILE and cannot tell a call who is on the other end of a Unix socket, so the agent
// accepts connections itself: it reads the peer's credentials (SO_PEERCRED, SO_PEERGROUPS),
// decides once per connection whether the caller may make control calls, caps the connections
// per listener, sheds connections instead of spinning when descriptors run out, and hands each
// connection to the gRPC server (grpc::AddInsecureChannelFromFd).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/common/socket_file.h"
#include "agent/fabric/probes/net.h"

namespace fabric {

// Who is on the other end of one API connection, decided when it was accepted.
struct Caller {
  enum class Channel { kUnix, kTcp };
  Channel channel = Channel::kUnix;
  uid_t uid = static_cast<uid_t>(-1);  // Unix only.
  gid_t gid = static_cast<gid_t>(-1);
  pid_t pid = 0;
  std::string address;      // TCP: the peer's numeric address.
  std::string certificate;  // TLS: the verified client certificate's subject ("CN=ops").
  bool control = false;
  // When `control` is false: why, for the refusal (PERMISSION_DENIED) ...
  std::string denied;
  // ... or UNAUTHENTICATED where the connection carries no identity at all (plaintext TCP).
  bool anonymous = false;

  // "uid 1000 (pid 42)", "tcp 10.0.0.5" or "tcp 10.0.0.5 (CN=ops)".
  std::string Name() const;
  // What per-caller limits count by: "uid:1000", "cert:CN=ops" or "ip:10.0.0.5".
  std::string Key() const;
};

// Who may make control calls over the Unix socket: root, the agent's own uid, and members
// (primary or supplementary group) of the control group.
struct ControlPolicy {
  uid_t agent_uid = 0;
  std::optional<gid_t> control_gid;
  std::string control_group;  // As given, for messages.
};

// A group given by name or number, as flag `flag`; InvalidArgument naming the flag when unknown.
absl::StatusOr<gid_t> ResolveGroup(const std::string& flag, const std::string& name);

// Reads the credentials of a connected Unix socket and applies `policy`.
Caller IdentifyUnixPeer(int fd, const ControlPolicy& policy);
// A TCP peer: reads only, no identity.
Caller IdentifyTcpPeer(int fd);

// The caller of each connection the agent handed to gRPC, by descriptor. gRPC names such a
// connection's peer "fd:N", and the descriptor stays open (so it is not reused) while any call on
// that connection is alive, so the lookup from a running call is exact.
class CallerTable {
 public:
  void Set(int fd, Caller caller);
  // The caller behind a call whose ServerContext::peer() is `peer`; nullopt for any other peer.
  std::optional<Caller> Find(std::string_view peer) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<int, Caller> by_fd_;
};

struct ListenerStats {
  uint64_t accepted = 0;
  uint64_t refused = 0;  // Over the connection limit.
  uint64_t shed = 0;     // Closed for lack of descriptors.
  uint64_t open = 0;     // Connections open now (as of the last accept or Stats()).
};

struct ListenerOptions {
  std::string name;  // "unix" or "tcp": logs and metrics.
  size_t max_connections = 1024;
  std::function<Caller(int fd)> identify;
  // Takes ownership of the connection (hands it to the gRPC server).
  std::function<void(int fd, const Caller&)> serve;
  // A connection over the limit; takes ownership (answers RESOURCE_EXHAUSTED, or closes).
  std::function<void(int fd)> refuse;
};

// Listening socket on SOCK_STREAM for a path, with mode 0660 set by the caller afterwards.
// `bound`: the file bound, recorded before anyone can connect, for teardown to remove only it.
absl::StatusOr<probes::Fd> ListenUnix(const std::string& path, BoundSocketFile* bound);
// "HOST:PORT", "[V6]:PORT" or ":PORT" (every address); port 0 picks one. `flag` names the option
// in errors.
absl::StatusOr<probes::Fd> ListenTcpAddress(const std::string& flag, const std::string& address);
// The port a TCP listener is bound to.
uint16_t BoundPort(int fd);

class Listener {
 public:
  static absl::StatusOr<std::unique_ptr<Listener>> Start(probes::Fd listen_fd,
                                                         ListenerOptions options);
  ~Listener();  // Stops accepting; connections already handed over stay with their server.
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  ListenerStats Stats() const;
  const std::string& name() const { return options_.name; }

 private:
  Listener(probes::Fd listen_fd, probes::Fd wake, ListenerOptions options);
  void Run();
  struct Open {
    int fd;
    dev_t dev;
    ino_t ino;
  };
  // Connections the kernel still has under the same descriptor; gRPC closes them on its own, so
  // a descriptor that is gone or now names another file is a connection that ended.
  static void SweepLocked(std::vector<Open>* list);
  // Whether `list` holds `limit` live connections.
  bool Count(std::vector<Open>* list, size_t limit);
  void Track(std::vector<Open>* list, int fd);
  static constexpr size_t kMaxRefusing = 16;

  probes::Fd listen_fd_;
  probes::Fd wake_;  // eventfd: stop.
  ListenerOptions options_;
  probes::Acceptor acceptor_;
  mutable std::mutex mu_;
  mutable std::vector<Open> open_;
  std::vector<Open> refusing_;
  std::atomic<uint64_t> accepted_{0}, refused_{0}, shed_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace fabric
