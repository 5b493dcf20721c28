// The DRA driver's ResourceSlices and the node's fabric condition, kept on the API server: a
// publisher on the agent's pipeline. Publish (the loop) computes what the cluster should see (the
// devices of agent/publish/dra, vanished ones kept tainted; the FabricHealthy condition) and hands
// it to a worker thread, which writes only what differs from what the server holds: an inventory
// change that changes no device writes nothing. A write is a new pool generation on every slice
// (readers take only the newest generation); a 409 re-reads and tries again; slices of this node
// and driver that are not ours any more (a smaller host, an earlier run) are deleted. While the
// server cannot be reached the agent serves everything else, health says so (WARNING
// dra.api_unreachable), and the worker retries with exponential backoff and jitter.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/daemon/cycle/publisher.h"
#include "agent/publish/dra/devices.h"
#include "agent/publish/kubeapi/api_client.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

inline constexpr char kNodeCondition[] = "FabricHealthy";

struct DraSlicesOptions {
  std::string node;  // This node's name (a DNS subdomain: checked by Start).
  // NICs the device plugins serve (their config): the driver leaves them out.
  v1::DevicePluginConfig device_plugin;
  bool node_condition = true;  // Keep the FabricHealthy condition in the node's status.
  absl::Duration min_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Minutes(2);
  // Re-read what the server holds this often even when nothing changed here: slices deleted or
  // changed by someone else are written again (a read; it writes nothing when they are ours).
  absl::Duration resync = absl::Minutes(5);
  int max_conflicts = 5;  // 409s in one sync before it counts as a failure and backs off.
};

// The devices the driver publishes for a snapshot (agent/publish/dra's Devices without the NICs
// the device plugins serve, by their config `dp`): the slices and the kubelet plugin name them
// alike.
std::vector<dra::Device> DraDevicesOf(const Snapshot& s, const v1::DevicePluginConfig& dp);

class DraSlices final : public Publisher {
 public:
  // InvalidArgument for a node name that is not a DNS subdomain. Starts the worker thread.
  static absl::StatusOr<std::unique_ptr<DraSlices>> Start(std::unique_ptr<kubeapi::KubeApi> api,
                                                          DraSlicesOptions opt);
  ~DraSlices() override;  // Stops the worker; a call in flight ends within the client's bound.
  DraSlices(const DraSlices&) = delete;
  DraSlices& operator=(const DraSlices&) = delete;

  void Publish(const Publication& p) override;
  // WARNING while the last sync failed, with the error: dra.api_unreachable (no answer, or not
  // served), dra.unauthorized (401 or 403: an expired token, a missing RBAC rule) or
  // dra.write_refused (a write the server refused).
  void Findings(absl::Time now, std::vector<v1::Finding>* out) const override;

  struct Stats {
    uint64_t syncs = 0;      // Completed, written or not.
    uint64_t writes = 0;     // Creates, updates, deletes and condition patches that succeeded.
    uint64_t conflicts = 0;  // 409s met.
    uint64_t failures = 0;   // Syncs that failed.
    int64_t generation = 0;  // The pool's, as last written or found.
    size_t slices = 0;
  };
  Stats stats() const;
  // Whether the latest published state is on the server (tests and benchmarks wait on it).
  bool WaitSynced(absl::Duration timeout) const;

 private:
  struct Desired {
    std::vector<dra::Device> devices;
    std::string condition_status;  // "True" or "False".
    std::string condition_reason;
    std::string condition_message;
    bool operator==(const Desired&) const = default;
  };
  DraSlices(std::unique_ptr<kubeapi::KubeApi> api, DraSlicesOptions opt);
  void Run();
  absl::Status Sync(const Desired& d);
  absl::Status SyncSlices(const std::vector<dra::Device>& devices);
  absl::Status SyncCondition(const Desired& d);
  absl::StatusOr<kubeapi::ApiResponse> Call(const char* method, const std::string& path,
                                            const std::string& body,
                                            const char* content_type = "application/json");

  const std::unique_ptr<kubeapi::KubeApi> api_;
  const DraSlicesOptions opt_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stop_ = false;
  Desired desired_;
  uint64_t desired_version_ = 0;
  uint64_t synced_version_ = 0;
  absl::Status last_error_;
  Stats stats_;
  std::vector<dra::Device> published_;  // The loop's: devices as last handed over.

  // The worker's own.
  std::string node_uid_;
  std::string condition_written_;  // status/reason/message last patched.
  std::string condition_status_;   // The status last patched, and since when it holds.
  std::string condition_transition_;
  std::mt19937_64 jitter_{std::random_device{}()};
  std::thread worker_;
};

}  // namespace fabric
