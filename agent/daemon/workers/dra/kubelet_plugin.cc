#include "agent/daemon/workers/dra/kubelet_plugin.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/common/atomic_file.h"
#include "agent/common/excerpt.h"
#include "agent/common/log.h"
#include "agent/daemon/workers/dra/dra_slices.h"
#include "agent/publish/cdi/cdi_spec.h"
#include "agent/publish/dra/claim.h"
#include "k8s/dra/v1/api.grpc.pb.h"
#include "k8s/dra/v1beta1/api.grpc.pb.h"
#include "k8s/pluginregistration/v1/api.grpc.pb.h"

namespace fabric {
namespace {

namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace reg = ::pluginregistration;

// v1beta1's messages are v1's, field for field: converted through the wire format.
template <typename To, typename From>
To Convert(const From& from) {
  To to;
  to.ParseFromString(from.SerializeAsString());
  return to;
}

template <typename Api, typename Req, typename Resp, typename UReq, typename UResp>
class DraService final : public Api::Service {
 public:
  explicit DraService(DraPlugin* plugin) : plugin_(plugin) {}
  grpc::Status NodePrepareResources(grpc::ServerContext* ctx, const Req* req, Resp* resp) override {
    const auto deadline = ctx->deadline();
    *resp = Convert<Resp>(plugin_->Prepare(Convert<drav1::NodePrepareResourcesRequest>(*req),
                                           deadline == std::chrono::system_clock::time_point::max()
                                               ? absl::InfiniteFuture()
                                               : absl::FromChrono(deadline)));
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const UReq* req, UResp* resp) override {
    *resp = Convert<UResp>(plugin_->Unprepare(Convert<drav1::NodeUnprepareResourcesRequest>(*req)));
    return grpc::Status::OK;
  }

 private:
  DraPlugin* plugin_;
};

using DraV1 = DraService<drav1::DRAPlugin, drav1::NodePrepareResourcesRequest,
                         drav1::NodePrepareResourcesResponse, drav1::NodeUnprepareResourcesRequest,
                         drav1::NodeUnprepareResourcesResponse>;
using DraV1beta1 =
    DraService<drav1beta1::DRAPlugin, drav1beta1::NodePrepareResourcesRequest,
               drav1beta1::NodePrepareResourcesResponse, drav1beta1::NodeUnprepareResourcesRequest,
               drav1beta1::NodeUnprepareResourcesResponse>;

class Registration final : public reg::Registration::Service {
 public:
  explicit Registration(DraPlugin* plugin) : plugin_(plugin) {}
  grpc::Status GetInfo(grpc::ServerContext*, const reg::InfoRequest*,
                       reg::PluginInfo* info) override {
    info->set_type("DRAPlugin");
    info->set_name(dra::kDriver);
    info->set_endpoint(plugin_->DraSocket());
    info->add_supported_versions("v1.DRAPlugin");
    info->add_supported_versions("v1beta1.DRAPlugin");
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const reg::RegistrationStatus* s,
                                        reg::RegistrationStatusResponse*) override {
    plugin_->Registered(s->plugin_registered(), s->error());
    return grpc::Status::OK;
  }

 private:
  DraPlugin* plugin_;
};

absl::StatusOr<std::pair<std::unique_ptr<grpc::Server>, BoundSocketFile>> ServeOn(
    const std::string& path, const std::vector<grpc::Service*>& services) {
  if (absl::Status s = ClearStaleSocket(path, "--dra-kubelet-dir"); !s.ok()) return s;
  std::unique_ptr<grpc::Server> server;
  auto file = BindSocketWithMode(path, 0600, [&](const std::string& private_path) {
    grpc::ServerBuilder b;
    b.AddListeningPort(absl::StrCat("unix:", private_path), grpc::InsecureServerCredentials());
    for (grpc::Service* s : services) b.RegisterService(s);
    server = b.BuildAndStart();
    return server != nullptr ? absl::OkStatus() : absl::UnavailableError("gRPC cannot bind it");
  });
  if (!file.ok()) {
    if (server != nullptr) server->Shutdown(std::chrono::system_clock::now());
    return absl::UnavailableError(
        absl::StrCat("cannot serve ", path, ": ", file.status().message()));
  }
  return std::make_pair(std::move(server), *std::move(file));
}

bool Intact(const BoundSocketFile& f) {
  struct stat st {};
  return lstat(f.path.c_str(), &st) == 0 && st.st_ino == f.ino && st.st_dev == f.dev;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DraPlugin>> DraPlugin::Start(std::unique_ptr<kubeapi::KubeApi> api,
                                                            DraPluginOptions opt) {
  auto p = std::unique_ptr<DraPlugin>(new DraPlugin(std::move(api), std::move(opt)));
  if (absl::Status s = p->Serve(); !s.ok()) return s;
  p->worker_ = std::thread([raw = p.get()] { raw->Run(); });
  return p;
}

DraPlugin::DraPlugin(std::unique_ptr<kubeapi::KubeApi> api, DraPluginOptions opt)
    : api_(std::move(api)), opt_(std::move(opt)) {
  if (!opt_.records_dir.empty()) {
    network_ = std::make_unique<ClaimNetwork>(api_.get(), opt_.records_dir);
  }
  services_.push_back(std::make_unique<DraV1>(this));
  services_.push_back(std::make_unique<DraV1beta1>(this));
  services_.push_back(std::make_unique<Registration>(this));
}

DraPlugin::~DraPlugin() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  if (api_ != nullptr) api_->Cancel();  // Claims being read end now; their answers say so.
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  StopServing();
}

std::string DraPlugin::RegistrationSocket() const {
  return absl::StrCat(opt_.registry_dir, "/", dra::kDriver, "-reg.sock");
}
std::string DraPlugin::DraSocket() const { return absl::StrCat(opt_.plugin_dir, "/dra.sock"); }

absl::Status DraPlugin::Serve() {
  for (const std::string& dir : {opt_.registry_dir, opt_.plugin_dir}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  // The DRA socket first: the kubelet dials it as soon as it reads the registration.
  auto dra = ServeOn(DraSocket(), {services_[0].get(), services_[1].get()});
  if (!dra.ok()) return dra.status();
  auto registration = ServeOn(RegistrationSocket(), {services_[2].get()});
  if (!registration.ok()) {
    dra->first->Shutdown(std::chrono::system_clock::now());
    (void)RemoveBoundSocket(dra->second);
    return registration.status();
  }
  std::tie(dra_server_, dra_file_) = *std::move(dra);
  std::tie(reg_server_, reg_file_) = *std::move(registration);
  serves_.fetch_add(1);
  return absl::OkStatus();
}

void DraPlugin::StopServing() {
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(500);
  for (auto* server : {&reg_server_, &dra_server_}) {
    if (*server != nullptr) (*server)->Shutdown(deadline);
    server->reset();
  }
  (void)RemoveBoundSocket(reg_file_);
  (void)RemoveBoundSocket(dra_file_);
}

bool DraPlugin::SocketsIntact() const { return Intact(dra_file_) && Intact(reg_file_); }

void DraPlugin::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, absl::ToChronoNanoseconds(opt_.recheck), [&] { return stop_; });
    if (stop_) break;
    lock.unlock();
    if (!SocketsIntact()) {
      // The kubelet wiped its directories (it does when it restarts): serve and so register
      // again; its watcher finds the new registration socket.
      Log(LogLevel::kInfo, "DRA plugin: ", RegistrationSocket(), " or ", DraSocket(),
          " vanished; serving them again");
      StopServing();
      if (absl::Status s = Serve(); !s.ok()) Log(LogLevel::kWarning, "DRA plugin: ", s.message());
    }
    if (network_ != nullptr) network_->Tick(absl::Now());
    lock.lock();
  }
}

void DraPlugin::Publish(const Publication& p) {
  auto view = std::make_shared<View>();
  view->host = p.snapshot.host;
  view->policy = p.snapshot.policy;
  view->devices = DraDevicesOf(p.snapshot, opt_.device_plugin);
  std::lock_guard<std::mutex> lock(mu_);
  view_ = std::move(view);
}

void DraPlugin::Registered(bool ok, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  not_registered_ = ok ? "" : (error.empty() ? "the kubelet refused it" : error);
  if (!ok)
    Log(LogLevel::kWarning, "DRA plugin: the kubelet did not register it: ", Excerpt(error, 200));
}

void DraPlugin::Findings(absl::Time, std::vector<v1::Finding>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (not_registered_.empty()) return;
  v1::Finding* f = &out->emplace_back();
  f->set_severity(v1::SEVERITY_WARNING);
  f->set_check("dra");
  f->set_code("dra.not_registered");
  f->set_message(absl::StrCat("the kubelet did not register the DRA plugin ", dra::kDriver, ": ",
                              Excerpt(not_registered_, 200)));
}

drav1::NodePrepareResourceResponse DraPlugin::PrepareOne(const drav1::Claim& claim,
                                                         const View& view) {
  drav1::NodePrepareResourceResponse out;
  const std::string ref = absl::StrCat(claim.namespace_(), "/", claim.name());
  auto r = api_->Call({"GET", dra::ClaimApiPath(claim.namespace_(), claim.name()), ""});
  if (!r.ok()) {
    out.set_error(absl::StrCat("reading ResourceClaim ", ref, ": ", r.status().message()));
    return out;
  }
  if (r->code != 200) {
    out.set_error(absl::StrCat("reading ResourceClaim ", ref, ": HTTP ", r->code, " ",
                               Excerpt(r->body, 200)));
    return out;
  }
  auto parsed = dra::ParseClaim(r->body);
  if (!parsed.ok()) {
    out.set_error(std::string(parsed.status().message()));
    return out;
  }
  if (parsed->uid != claim.uid()) {
    out.set_error(absl::StrCat("ResourceClaim ", ref, " has UID ", Excerpt(parsed->uid),
                               ", not the kubelet's ", Excerpt(claim.uid())));
    return out;
  }
  if (view.host == nullptr) {
    out.set_error("the agent has no inventory yet");
    return out;
  }
  auto prepared = dra::PrepareClaim(*parsed, opt_.node, view.devices, *view.host, view.policy);
  if (!prepared.ok()) {
    out.set_error(std::string(prepared.status().message()));
    return out;
  }
  if (!prepared->spec_json.empty()) {
    auto written = ReplaceFileIfChanged(opt_.cdi_dir, prepared->spec_file, prepared->spec_json);
    if (!written.ok()) {
      out.set_error(absl::StrCat("writing the claim's CDI spec: ", written.status().message()));
      return out;
    }
  }
  if (network_ != nullptr) network_->Track(*parsed, prepared->devices, absl::Now());
  for (const dra::PreparedDevice& d : prepared->devices) {
    drav1::Device* dev = out.add_devices();
    dev->add_request_names(d.request);
    dev->set_pool_name(d.pool);
    dev->set_device_name(d.device);
    for (const std::string& id : d.cdi_ids) dev->add_cdi_device_ids(id);
  }
  return out;
}

drav1::NodePrepareResourcesResponse DraPlugin::Prepare(
    const drav1::NodePrepareResourcesRequest& req, absl::Time deadline) {
  drav1::NodePrepareResourcesResponse resp;
  auto& claims = *resp.mutable_claims();
  if (static_cast<size_t>(req.claims_size()) > opt_.max_claims) {
    for (const drav1::Claim& c : req.claims()) {
      claims[c.uid()].set_error(
          absl::StrCat(req.claims_size(), " claims in one call, more than ", opt_.max_claims));
    }
    return resp;
  }
  std::shared_ptr<const View> view;
  {
    std::lock_guard<std::mutex> lock(mu_);
    view = view_;
  }
  std::lock_guard<std::mutex> lock(prepared_mu_);
  for (const drav1::Claim& c : req.claims()) {
    if (auto it = prepared_.find(c.uid()); it != prepared_.end()) {
      claims[c.uid()] = it->second;  // Prepared before: the same answer.
      continue;
    }
    if (absl::Now() >= deadline) {
      claims[c.uid()].set_error(
          "not prepared: the call's deadline passed (the kubelet asks again)");
      continue;
    }
    drav1::NodePrepareResourceResponse one =
        view != nullptr ? PrepareOne(c, *view) : drav1::NodePrepareResourceResponse();
    if (view == nullptr) one.set_error("the agent has no inventory yet");
    if (one.error().empty()) {
      if (prepared_.size() >= opt_.max_prepared) {
        one.Clear();
        one.set_error(absl::StrCat(opt_.max_prepared, " claims prepared on this node already"));
      } else {
        prepared_[c.uid()] = one;
      }
    }
    claims[c.uid()] = std::move(one);
  }
  return resp;
}

drav1::NodeUnprepareResourcesResponse DraPlugin::Unprepare(
    const drav1::NodeUnprepareResourcesRequest& req) {
  drav1::NodeUnprepareResourcesResponse resp;
  std::lock_guard<std::mutex> lock(prepared_mu_);
  for (const drav1::Claim& c : req.claims()) {
    drav1::NodeUnprepareResourceResponse& one = (*resp.mutable_claims())[c.uid()];
    // The spec file is named by the UID: removed even when this process did not write it (a
    // restart between prepare and unprepare). A UID no CDI name can carry had no file.
    if (cdi::ValidDeviceName(dra::ClaimCdiDevice(c.uid())) && !opt_.cdi_dir.empty()) {
      auto removed = RemoveFileIfPresent(opt_.cdi_dir, dra::ClaimSpecFile(c.uid()));
      if (!removed.ok()) {
        one.set_error(absl::StrCat("removing the claim's CDI spec: ", removed.status().message()));
        continue;
      }
    }
    prepared_.erase(c.uid());
    if (network_ != nullptr) network_->Forget(c.uid());
  }
  return resp;
}

}  // namespace fabric
