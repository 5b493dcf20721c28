// The DRA driver's kubelet plugin: the kubelet's plugin watcher finds our registration socket in
// its plugins_registry directory and asks it (pluginregistration.Registration) for the DRA
// socket, where we serve DRAPlugin v1 and v1beta1 (identical messages). NodePrepareResources
// reads each claim from the API server, takes the results allocated to our driver on this node's
// pool and answers their CDI device IDs: each NIC's device in the agent's CDI spec and one device
// of the claim's own spec (written to the CDI directory) with the job environment for exactly
// those NICs. Each claim is answered on its own (one bad claim fails no other), and preparing or
// unpreparing a claim again answers as the first time did (by claim UID). When the kubelet wipes
// its directories the worker serves both sockets again within `recheck`, and there writes the
// prepared claims' network data once their pods' interfaces are known (claim_network.h).
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
#include "agent/common/socket_file.h"
#include "agent/daemon/cycle/publisher.h"
#include "agent/daemon/workers/dra/claim_network.h"
#include "agent/publish/dra/devices.h"
#include "agent/publish/kubeapi/api_client.h"
#include "k8s/dra/v1/api.pb.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace fabric {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;

inline constexpr char kPluginRegistryDir[] = "/var/lib/kubelet/plugins_registry";
inline constexpr char kPluginDir[] = "/var/lib/kubelet/plugins/rdma.fabric.io";

struct DraPluginOptions {
  std::string registry_dir = kPluginRegistryDir;
  std::string plugin_dir = kPluginDir;
  std::string cdi_dir;  // Where the claims' own CDI specs are written (the agent's CDI dir).
  std::string node;     // This node: the pool whose devices it prepares.
  // fabric-cni's pod records (<envDir>/pods): the claims' network data comes from there. Empty:
  // claims get none.
  std::string records_dir;
  v1::DevicePluginConfig device_plugin;  // NICs the device plugins serve are not ours.
  absl::Duration recheck = absl::Seconds(2);
  // One call naming more claims than this is refused for every claim; prepared claims kept.
  size_t max_claims = 2048;
  size_t max_prepared = 10000;
};

class DraPlugin final : public Publisher {
 public:
  // Creates the directories if missing, serves both sockets (mode 0600: the kubelet is root) and
  // starts the worker. Errors: a directory that cannot be made, a socket another process serves.
  static absl::StatusOr<std::unique_ptr<DraPlugin>> Start(std::unique_ptr<kubeapi::KubeApi> api,
                                                          DraPluginOptions opt);
  ~DraPlugin() override;
  DraPlugin(const DraPlugin&) = delete;
  DraPlugin& operator=(const DraPlugin&) = delete;

  void Publish(const Publication& p) override;
  // WARNING dra.not_registered when the kubelet said it could not register us.
  void Findings(absl::Time now, std::vector<v1::Finding>* out) const override;

  std::string RegistrationSocket() const;
  std::string DraSocket() const;
  size_t serves() const { return serves_.load(); }  // Times the sockets were (re)served.

  // The calls, as the gRPC services answer them (both API versions). Claims not reached by the
  // call's `deadline` (the kubelet's) are answered with that error: the kubelet asks again.
  drav1::NodePrepareResourcesResponse Prepare(const drav1::NodePrepareResourcesRequest& req,
                                              absl::Time deadline = absl::InfiniteFuture());
  drav1::NodeUnprepareResourcesResponse Unprepare(const drav1::NodeUnprepareResourcesRequest& req);
  void Registered(bool ok, const std::string& error);

 private:
  struct Served;
  struct View {
    std::shared_ptr<const v1::Host> host;
    v1::SelectionPolicy policy;
    std::vector<dra::Device> devices;
  };
  DraPlugin(std::unique_ptr<kubeapi::KubeApi> api, DraPluginOptions opt);
  absl::Status Serve();
  void StopServing();
  bool SocketsIntact() const;
  void Run();
  drav1::NodePrepareResourceResponse PrepareOne(const drav1::Claim& claim, const View& view);

  const std::unique_ptr<kubeapi::KubeApi> api_;
  const DraPluginOptions opt_;
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::unique_ptr<grpc::Server> dra_server_, reg_server_;
  BoundSocketFile dra_file_, reg_file_;
  std::atomic<size_t> serves_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::shared_ptr<const View> view_;
  std::string not_registered_;  // The kubelet's error; empty when registered or not yet told.
  std::mutex prepared_mu_;      // Held across a claim's preparation: one claim at a time.
  std::map<std::string, drav1::NodePrepareResourceResponse> prepared_;  // By claim UID.
  std::unique_ptr<ClaimNetwork> network_;                               // With records_dir.
  std::thread worker_;
};

}  // namespace fabric
