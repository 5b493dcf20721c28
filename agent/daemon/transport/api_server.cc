#include "agent/daemon/transport/api_server.h"

#include <grpcpp/resource_quota.h>
#include <grpcpp/server_posix.h>
#include <sys/resource.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/common/log.h"
#include "agent/daemon/transport/read_guard.h"

namespace fabric {
namespace {

// Answers every call on a connection over the limit, so the client learns why instead of
// seeing its connection closed.
class RefuseAll final : public grpc::CallbackGenericService {
 public:
  explicit RefuseAll(std::string message) : message_(std::move(message)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(const std::string& message) {
        Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, message));
      }
      void OnDone() override { delete this; }
    };
    return new Reactor(message_);
  }

 private:
  std::string message_;
};

}  // namespace

void RaiseFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
  const rlim_t before = rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
    Log(LogLevel::kDebug, "file limit raised from ", before, " to ", rl.rlim_max);
  }
}

size_t EffectiveConnectionLimit(size_t wanted, size_t listeners, uint64_t nofile) {
  constexpr uint64_t kMargin = 256;  // Discovery, netlink, probes, metrics, announcements.
  if (listeners == 0) return wanted;
  const uint64_t room = nofile > 2 * kMargin ? nofile - kMargin : nofile / 2;
  return static_cast<size_t>(std::min<uint64_t>(wanted, std::max<uint64_t>(8, room / listeners)));
}

absl::StatusOr<std::unique_ptr<ApiServer>> ApiServer::Start(
    const ApiServerOptions& options, const std::vector<grpc::Service*>& services,
    CallerTable* callers) {
  std::unique_ptr<ApiServer> api(new ApiServer());

  // Listen first: a taken port or path fails start-up before anything runs.
  auto unix_fd = ListenUnix(options.socket, &api->socket_file_);
  if (!unix_fd.ok()) return unix_fd.status();
  std::optional<probes::Fd> tcp_fd;
  if (!options.listen.empty()) {
    auto fd = ListenTcpAddress("--listen", options.listen);
    if (!fd.ok()) return fd.status();
    api->tcp_port_ = BoundPort(fd->get());
    tcp_fd = *std::move(fd);
  }

  grpc::ServerBuilder builder;
  grpc::ResourceQuota quota("fabric-agent");
  quota.SetMaxThreads(options.max_threads);
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams);
  builder.SetMaxReceiveMessageSize(options.max_request_bytes);
  for (grpc::Service* s : services) builder.RegisterService(s);
  api->server_ = builder.BuildAndStart();
  if (api->server_ == nullptr) return absl::InternalError("cannot start the gRPC server");

  rlimit rl{};
  const uint64_t nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
  const size_t listeners = tcp_fd ? 2 : 1;
  const size_t limit = EffectiveConnectionLimit(options.max_connections, listeners, nofile);
  if (limit < options.max_connections) {
    Log(LogLevel::kWarning, "--max-connections=", options.max_connections, " lowered to ", limit,
        " per listener: the file limit is ", nofile);
  }

  api->refusals_ = std::make_unique<RefuseAll>(
      absl::StrCat("fabric-agent: connection limit reached (--max-connections=", limit,
                   " per listener); try again later"));
  grpc::ServerBuilder refusal_builder;
  refusal_builder.RegisterCallbackGenericService(api->refusals_.get());
  // A refused client is told once, then the connection goes.
  refusal_builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, 1000);
  refusal_builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 1000);
  refusal_builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 1000);
  api->refusal_server_ = refusal_builder.BuildAndStart();
  if (api->refusal_server_ == nullptr) return absl::InternalError("cannot start the gRPC server");

  auto relay = Relay::Start(options.relay);
  if (!relay.ok()) return relay.status();
  api->relay_ = *std::move(relay);
  grpc::Server* server = api->server_.get();
  grpc::Server* refusal = api->refusal_server_.get();
  Relay* r = api->relay_.get();
  TlsContext* tls = options.tls;
  const RelayOptions budget = options.relay;
  // Each connection reaches gRPC guarded against the rapid reset, one of three ways: TCP through
  // the relay (TLS too); the Unix socket guarded in place, on gRPC's own reads (read_guard.h),
  // unless --relay-unix or a binary that does not export the guard's recvmsg sends it through
  // the relay as well. Whatever reaches gRPC unguarded (a relay's end, a refusal) is forgotten
  // by the guard: its number may be a closed connection's.
  auto make = [&](std::string name, probes::Fd fd, std::function<Caller(int)> identify,
                  bool relayed) -> absl::Status {
    ListenerOptions lo;
    lo.name = std::move(name);
    lo.max_connections = limit;
    lo.identify = std::move(identify);
    lo.serve = [server, callers, budget](int conn, const Caller& caller) {
      callers->Set(conn, caller);
      read_guard::Guard(conn, caller.Name(), budget.resets_per_second, budget.reset_burst);
      grpc::AddInsecureChannelFromFd(server, conn);
    };
    if (relayed) {
      // gRPC gets the relay's end; the caller (after TLS, its certificate's) is recorded under it.
      lo.serve = [server, callers, r, tls](int conn, const Caller& caller) {
        r->Add(conn, tls != nullptr ? tls->Current() : nullptr, caller.Name(),
               [server, callers, caller, tls](int end, SSL* ssl) {
                 callers->Set(
                     end, ssl != nullptr ? IdentifyTlsPeer(caller, ssl, tls->options()) : caller);
                 read_guard::Forget(end);
                 grpc::AddInsecureChannelFromFd(server, end);
               });
      };
    }
    lo.refuse = [refusal](int conn) {
      read_guard::Forget(conn);
      grpc::AddInsecureChannelFromFd(refusal, conn);
    };
    auto l = Listener::Start(std::move(fd), std::move(lo));
    if (!l.ok()) return l.status();
    api->listeners_.push_back(*std::move(l));
    return absl::OkStatus();
  };
  const ControlPolicy policy = options.policy;
  api->unix_relayed_ = options.relay_unix || !read_guard::Active();
  if (!options.relay_unix && api->unix_relayed_) {
    Log(LogLevel::kWarning,
        "this binary does not export recvmsg: the socket's connections are "
        "relayed to guard them against the rapid reset");
  }
  absl::Status s = make(
      "unix", *std::move(unix_fd), [policy](int fd) { return IdentifyUnixPeer(fd, policy); },
      api->unix_relayed_);
  if (s.ok() && tcp_fd) s = make("tcp", *std::move(tcp_fd), IdentifyTcpPeer, true);
  if (!s.ok()) return s;
  return api;
}

std::string ApiServer::Describe(const ApiServerOptions& o) const {
  std::string tcp;
  if (!o.listen.empty()) {
    const char* mode = o.tls == nullptr                     ? "plaintext, reads only"
                       : o.tls->options().client_ca.empty() ? "TLS, reads only"
                                                            : "mTLS, control calls with a client "
                                                              "certificate";
    tcp = absl::StrCat(" and ", o.listen, " (port ", tcp_port_, "; ", mode, ")");
  }
  return absl::StrCat(
      "serving on unix:", o.socket, unix_relayed_ ? " (relayed)" : "", tcp,
      "; control calls on the socket: root, uid ", o.policy.agent_uid,
      o.policy.control_gid ? absl::StrCat(" and group ", o.policy.control_group) : "");
}

ApiServer::~ApiServer() { Shutdown(absl::ZeroDuration()); }

void ApiServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  listeners_.clear();  // No new connections.
  const auto deadline = absl::ToChronoTime(absl::Now() + grace);
  if (server_ != nullptr) {
    server_->Shutdown(deadline);
    server_->Wait();
  }
  if (refusal_server_ != nullptr) {
    refusal_server_->Shutdown(deadline);
    refusal_server_->Wait();
  }
  relay_.reset();  // The calls are done: close every client connection.
}

std::vector<std::pair<std::string, ListenerStats>> ApiServer::Stats() const {
  std::vector<std::pair<std::string, ListenerStats>> out;
  for (const auto& l : listeners_) out.emplace_back(l->name(), l->Stats());
  return out;
}

}  // namespace fabric
