// The FabricAgent gRPC service over the snapshot store. Every call reads one immutable snapshot.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/daemon/api/api_counters.h"
#include "agent/daemon/api/selection_cache.h"
#include "agent/daemon/api/watch.h"
#include "agent/daemon/cycle/snapshot.h"
#include "agent/daemon/transport/listener.h"
#include "agent/daemon/workers/announcer.h"
#include "agent/daemon/workers/prober.h"
#include "agent/hostfs/host_fs.h"
#include "agent/policy/select/gpu_names.h"
#include "fabric/v1/agent.grpc.pb.h"

namespace fabric {

// absl and gRPC share the canonical status codes; the message is kept as it is.
grpc::Status ToGrpc(const absl::Status& s);

// Every method is a raw callback method: the service decodes requests itself (agent/daemon/
// raw_call.h), reads answer on the thread that read the request (no hand-off to a worker), watch
// streams hold no thread (agent/daemon/api/watch.h), and the calls that block (Announce, RunProbe,
// and GetPortCounters: hw_counters/ reads query the device's firmware) run on threads of their
// own, bounded in number.
template <class B>
using RawMethods = v1::FabricAgent::WithRawCallbackMethod_GetInventory<
    v1::FabricAgent::WithRawCallbackMethod_SelectNics<v1::FabricAgent::WithRawCallbackMethod_Place<
        v1::FabricAgent::WithRawCallbackMethod_WatchInventory<
            v1::FabricAgent::WithRawCallbackMethod_GetHealth<
                v1::FabricAgent::WithRawCallbackMethod_Ping<
                    v1::FabricAgent::WithRawCallbackMethod_Announce<
                        v1::FabricAgent::WithRawCallbackMethod_ListAnnouncements<
                            v1::FabricAgent::WithRawCallbackMethod_RunProbe<
                                v1::FabricAgent::WithRawCallbackMethod_ListProbeResults<
                                    v1::FabricAgent::WithRawCallbackMethod_GetPortCounters<
                                        v1::FabricAgent::WithRawCallbackMethod_Doctor<B>>>>>>>>>>>>;
using FabricAgentBase = RawMethods<v1::FabricAgent::Service>;

struct ServiceOptions {
  // Watch streams: how long a client may take no event, and how many streams are allowed.
  absl::Duration watch_timeout = absl::Seconds(30);
  size_t max_watches = 128;
  size_t max_watches_per_caller = 16;
  // Who is behind each connection; null: every caller may make control calls (in-process tests).
  const CallerTable* callers = nullptr;
  // Calls that block (Announce, RunProbe) each hold a thread while they run.
  size_t max_blocking_calls = 256;
  ApiCounters* counters = nullptr;  // Optional.
  // Where GetPortCounters reads the counters; null: it answers UNAVAILABLE.
  const HostFs* sysfs = nullptr;
  // How MIG-... names find their parent GPU (the process's NVML in the agent); null: they fail.
  const MigResolver* mig = nullptr;
};

class FabricAgentService final : public FabricAgentBase {
 public:
  // `announcer` and `prober` may be null (their methods then answer UNAVAILABLE).
  explicit FabricAgentService(const SnapshotStore* store, Announcer* announcer = nullptr,
                              Prober* prober = nullptr, ServiceOptions options = {});
  ~FabricAgentService() override;

  using Reactor = grpc::ServerUnaryReactor;
  using Ctx = grpc::CallbackServerContext;
  using Bytes = grpc::ByteBuffer;
  Reactor* GetInventory(Ctx* ctx, const Bytes* req, Bytes* out) override;
  Reactor* SelectNics(Ctx* ctx, const Bytes* req, Bytes* out) override;
  Reactor* Place(Ctx* ctx, const Bytes* req, Bytes* out) override;
  grpc::ServerWriteReactor<Bytes>* WatchInventory(Ctx* ctx, const Bytes* req) override;
  Reactor* GetHealth(Ctx* ctx, const Bytes* req, Bytes* out) override;
  Reactor* Ping(Ctx* ctx, const Bytes* req, Bytes* out) override;
  Reactor* Announce(Ctx* ctx, const Bytes* req, Bytes* out) override;
  Reactor* ListAnnouncements(Ctx* ctx, const Bytes* req, Bytes* out) override;
  Reactor* RunProbe(Ctx* ctx, const Bytes* req, Bytes* out) override;
  Reactor* ListProbeResults(Ctx* ctx, const Bytes* req, Bytes* out) override;
  Reactor* GetPortCounters(Ctx* ctx, const Bytes* req, Bytes* out) override;
  Reactor* Doctor(Ctx* ctx, const Bytes* req, Bytes* out) override;

 private:
  absl::StatusOr<std::shared_ptr<const Snapshot>> Ready() const;
  // Control calls (those that make the agent send, probe or change something) need a caller
  // who may make them: PERMISSION_DENIED, or UNAUTHENTICATED where the connection carries no
  // identity. Logged and counted.
  grpc::Status AuthorizeControl(const grpc::ServerContextBase& ctx, std::string_view method);
  std::optional<Caller> CallerOf(const grpc::ServerContextBase& ctx) const;
  // SelectNics' answer as serialized bytes, from the cache or computed into it.
  absl::StatusOr<std::shared_ptr<const std::string>> Select(const v1::SelectNicsRequest& req);
  // Doctor's judgement of a job's variables against this host (doctor_call.cc); `cancelled`:
  // the client gave up (its deadline passed), so the work stops (CANCELLED).
  absl::StatusOr<v1::DoctorReport> JudgeJob(const v1::DoctorRequest& req,
                                            const std::function<bool()>& cancelled);

  // A unary call: decodes the request, runs `fn` (here, or on a thread of its own when
  // `blocking`), encodes the answer.
  template <typename Req, typename Resp, typename Fn>
  Reactor* Unary(Ctx* ctx, const Bytes* in, Bytes* out, Fn fn, bool blocking = false);
  // A control call: authorized, then run as a blocking Unary (it sends or probes).
  template <typename Req, typename Resp, typename Fn>
  Reactor* Control(Ctx* ctx, const Bytes* in, Bytes* out, std::string_view method, Fn fn);
  // Runs `fn` on a new thread; false when max_blocking_calls are already running.
  bool Offload(std::function<void()> fn);

  const SnapshotStore* store_;
  Announcer* announcer_;
  Prober* prober_;
  ServiceOptions opt_;
  ApiCounters own_counters_;
  ApiCounters* counters_;
  WatchHub watches_;
  SelectionCache selections_;

  std::mutex blocking_mu_;
  std::condition_variable blocking_cv_;
  size_t blocking_ = 0;  // Offloaded calls running.
};

}  // namespace fabric
