// The kubelet device plugins (API v1beta1), one per configured resource: a publisher, so that
// ListAndWatch follows each snapshot's host and health. Each resource is served by a gRPC server
// on <dir>/fabric-<resource>.sock and registered with the kubelet on <dir>/kubelet.sock. The
// kubelet wipes the directory when it restarts and plugins must register again: a worker thread
// watches the directory (inotify) and its own sockets, recreates what vanished and registers
// again, with a bounded exponential backoff between failed tries. The answers are
// agent/publish/deviceplugin's, from the latest snapshot.
//
// Threads: the loop publishes (Publish, Findings); gRPC's threads answer from the latest state
// under a lock; the worker thread owns the servers and the registration, and the destructor
// cancels a registration in flight, joins it, then stops every server under one deadline and
// removes the sockets: SIGTERM ends the plugins within a second whatever the kubelet does.
//
// Bounds: requests are parsed here (request.h: a non-UTF-8 ID is INVALID_ARGUMENT naming the
// field) and bounded (device_plugin.h); each refusal is counted (counts(), in the metrics) and
// logged at most every few seconds. A resource keeps at most max_streams ListAndWatch streams: a
// new one evicts the oldest (the kubelet's newest stream is always served), and a stream whose
// reader stopped reading is cancelled once a write has waited stream_write_timeout.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/common/fd.h"
#include "agent/common/token_bucket.h"
#include "agent/daemon/cycle/publisher.h"
#include "agent/publish/deviceplugin/device_plugin.h"
#include "fabric/v1/select.pb.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace fabric {

inline constexpr char kDefaultDevicePluginDir[] = "/var/lib/kubelet/device-plugins";
inline constexpr char kKubeletSocket[] = "kubelet.sock";

struct DevicePluginOptions {
  std::string dir = kDefaultDevicePluginDir;
  v1::DevicePluginConfig config;  // Validated (resource_section.h); at least one resource.
  deviceplugin::AllocateOptions allocate;
  int max_streams = 8;  // ListAndWatch streams per resource (the kubelet holds one).
  absl::Duration stream_write_timeout = absl::Seconds(10);
  absl::Duration backoff_min = absl::Seconds(1);
  absl::Duration backoff_max = absl::Seconds(30);
  // One Register call; a round of tries that meets a kubelet that does not answer waits for it
  // once, not once per resource.
  absl::Duration register_timeout = absl::Seconds(5);
  // The longest the worker sleeps without an event: a missed inotify event (an overflowed queue)
  // costs at most this.
  absl::Duration recheck = absl::Seconds(5);
};

class DevicePlugins final : public Publisher {
 public:
  // Creates the directory if missing and starts the worker, which binds the sockets (mode 0600:
  // the kubelet runs as root) and registers. Errors: a socket path longer than a Unix socket
  // takes (InvalidArgument), the directory cannot be created or watched.
  static absl::StatusOr<std::unique_ptr<DevicePlugins>> Start(DevicePluginOptions opt);
  ~DevicePlugins() override;
  DevicePlugins(const DevicePlugins&) = delete;
  DevicePlugins& operator=(const DevicePlugins&) = delete;

  void Publish(const Publication& p) override;
  // Registration failures (WARNING, one per resource, with the error) and NICs two resources
  // select; seen by the cycle at its next publish or rescan.
  void Findings(absl::Time now, std::vector<v1::Finding>* out) const override;

  std::string SocketPath(const std::string& resource) const;
  size_t registrations() const { return registrations_.load(); }  // Successful ones, all told.

  // What was refused or dropped, all resources together.
  struct Counts {
    uint64_t refused_parse = 0;    // Bytes not the request (a string not UTF-8).
    uint64_t refused_invalid = 0;  // Over a bound, an unknown ID, a negative size.
    uint64_t streams_evicted = 0;  // ListAndWatch streams a newer one replaced.
    uint64_t streams_stalled = 0;  // ListAndWatch streams cancelled: their reader stopped.
  };
  Counts counts() const;
  // A refused call: counted, and logged at most a few times a minute.
  void Refused(const std::string& resource, const char* method, bool parse,
               const std::string& why) const;
  void CountStream(bool evicted) const { (evicted ? evicted_ : stalled_).fetch_add(1); }

  // What one resource's service reads (device_plugin.cc).
  struct State {
    std::shared_ptr<const Snapshot> snapshot;
    deviceplugin::Plan plan;
    std::vector<v1beta1::ListAndWatchResponse> lists;  // Per resource, vanished IDs included.
    uint64_t version = 0;                              // Bumped when a list changes.
  };
  std::shared_ptr<const State> Latest() const;
  // Until a list changes after version `seen`, the plugins stop, or `timeout`.
  std::shared_ptr<const State> WaitNewer(uint64_t seen, absl::Duration timeout) const;
  const DevicePluginOptions& options() const { return opt_; }
  bool stopping() const { return stop_.load(); }

 private:
  struct Slot;
  explicit DevicePlugins(DevicePluginOptions opt);
  void Run();
  absl::Status Serve(Slot& slot);
  void Tend(Slot& slot, absl::Time now, absl::Status* kubelet_silent);
  absl::Status Register(const Slot& slot);
  std::string KubeletSocket() const;
  void SetError(const std::string& resource, std::string error);
  void ReadEvents();
  void WatchDirectory();
  // Every plugin registers again; `unless_on_current_kubelet`: but those whose last Register went
  // to the kubelet.sock there now.
  void RegisterAllAgain(bool unless_on_current_kubelet);

  // The worker's: the directory's watch (-1 while the directory is gone) and its parent's, which
  // sees the directory come back.
  int dir_watch_ = -1;
  int parent_watch_ = -1;
  // The Register call in flight, cancelled by the destructor.
  std::mutex register_mu_;
  grpc::ClientContext* register_ctx_ = nullptr;

  DevicePluginOptions opt_;
  std::vector<std::unique_ptr<Slot>> slots_;  // The worker thread's.
  UniqueFd inotify_;
  UniqueFd wake_;  // eventfd: the destructor stops the worker.
  std::thread worker_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> registrations_{0};
  mutable std::atomic<uint64_t> refused_parse_{0};
  mutable std::atomic<uint64_t> refused_invalid_{0};
  mutable std::atomic<uint64_t> evicted_{0};
  mutable std::atomic<uint64_t> stalled_{0};
  mutable std::mutex log_mu_;
  mutable TokenBucket log_bucket_{0.2, 5};  // Refusals logged: 5 at once, then one per 5 s.

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::shared_ptr<const State> state_;
  std::map<std::string, std::string> errors_;  // Resource -> why it is not registered.
  // Every ID the kubelet was told of, per resource (the loop's): gone ones stay, Unhealthy.
  std::vector<std::vector<std::string>> advertised_;
  std::string conflicts_;  // The last conflict findings logged.
};

}  // namespace fabric
