#include "agent/daemon/workers/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"
#include "agent/common/socket_file.h"
#include "agent/publish/deviceplugin/resource_section.h"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"

namespace fabric {
namespace {

namespace dp = ::fabric::deviceplugin;

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical codes.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// One resource's DevicePlugin service, answering from the latest state.
class PluginService final : public v1beta1::DevicePlugin::Service {
 public:
  PluginService(const DevicePlugins* owner, size_t index) : owner_(owner), index_(index) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    if (streams_.fetch_add(1) >= owner_->options().max_streams) {
      streams_.fetch_sub(1);
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("more than ", owner_->options().max_streams, " ListAndWatch streams"));
    }
    uint64_t sent = 0;
    while (!owner_->stopping() && !ctx->IsCancelled()) {
      // A bounded wait: a server shut down under the stream cancels it, seen here.
      std::shared_ptr<const DevicePlugins::State> st =
          owner_->WaitNewer(sent, absl::Milliseconds(500));
      if (st == nullptr || st->version == sent) continue;
      sent = st->version;
      if (!writer->Write(st->lists[index_])) break;
    }
    streams_.fetch_sub(1);
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override {
    std::shared_ptr<const DevicePlugins::State> st = owner_->Latest();
    if (st == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no inventory yet");
    auto r = dp::PreferredAllocation(*st->snapshot->host, st->plan.resources[index_], *req);
    if (r.ok()) *out = *std::move(r);
    return ToGrpc(r.status());
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override {
    std::shared_ptr<const DevicePlugins::State> st = owner_->Latest();
    if (st == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no inventory yet");
    auto r = dp::Allocate(*st->snapshot->host, st->snapshot->policy, st->plan.resources[index_],
                          *req, owner_->options().allocate);
    if (r.ok()) *out = *std::move(r);
    return ToGrpc(r.status());
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;  // Not asked for (pre_start_required is false).
  }

 private:
  const DevicePlugins* owner_;
  size_t index_;
  std::atomic<int> streams_{0};
};

}  // namespace

// One resource's server and registration: the worker thread's.
struct DevicePlugins::Slot {
  std::string resource;
  std::string socket_name;
  std::string socket_path;
  std::unique_ptr<PluginService> service;
  std::unique_ptr<grpc::Server> server;
  BoundSocketFile file;
  bool registered = false;
  // The kubelet.sock it registered on: a restarted kubelet's is another file. Its creation and
  // our socket vanishing (the kubelet wipes the directory) both call for registering, once.
  dev_t kubelet_dev = 0;
  ino_t kubelet_ino = 0;
  std::string error;  // The last try's; empty after a success.
  absl::Duration backoff;
  absl::Time next_try = absl::InfinitePast();
};

DevicePlugins::DevicePlugins(DevicePluginOptions opt) : opt_(std::move(opt)) {
  advertised_.resize(static_cast<size_t>(opt_.config.resources_size()));
}

absl::StatusOr<std::unique_ptr<DevicePlugins>> DevicePlugins::Start(DevicePluginOptions opt) {
  std::error_code ec;
  std::filesystem::create_directories(opt.dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the device plugin directory ", opt.dir, ": ", ec.message()));
  }
  std::unique_ptr<DevicePlugins> p(new DevicePlugins(std::move(opt)));
  p->inotify_.reset(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  p->wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!p->inotify_.valid() || !p->wake_.valid()) {
    return absl::InternalError(absl::StrCat("inotify/eventfd: ", ErrnoText(errno)));
  }
  // The kubelet removes and creates files in the directory; it never removes the directory.
  if (inotify_add_watch(p->inotify_.get(), p->opt_.dir.c_str(),
                        IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot watch ", p->opt_.dir, ": ", ErrnoText(errno)));
  }
  for (size_t i = 0; i < static_cast<size_t>(p->opt_.config.resources_size()); ++i) {
    auto slot = std::make_unique<Slot>();
    slot->resource = p->opt_.config.resources(static_cast<int>(i)).name();
    slot->socket_name = dp::SocketName(slot->resource);
    slot->socket_path = (std::filesystem::path(p->opt_.dir) / slot->socket_name).string();
    slot->service = std::make_unique<PluginService>(p.get(), i);
    slot->backoff = p->opt_.backoff_min;
    // Served before Start returns, so the socket is there for whoever looks; a failure is the
    // worker's to retry.
    if (absl::Status s = p->Serve(*slot); !s.ok()) {
      Log(LogLevel::kWarning, "device plugin ", slot->resource, ": ", s.message());
    }
    p->slots_.push_back(std::move(slot));
  }
  p->worker_ = std::thread([raw = p.get()] { raw->Run(); });
  return p;
}

DevicePlugins::~DevicePlugins() {
  stop_ = true;
  changed_.notify_all();
  if (wake_.valid()) {
    const uint64_t one = 1;
    (void)!write(wake_.get(), &one, sizeof(one));
  }
  if (worker_.joinable()) worker_.join();
  for (auto& slot : slots_) {
    if (slot->server != nullptr) {
      slot->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      slot->server.reset();
      (void)RemoveBoundSocket(slot->file);
    }
  }
}

std::string DevicePlugins::SocketPath(const std::string& resource) const {
  return (std::filesystem::path(opt_.dir) / dp::SocketName(resource)).string();
}

std::shared_ptr<const DevicePlugins::State> DevicePlugins::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

std::shared_ptr<const DevicePlugins::State> DevicePlugins::WaitNewer(uint64_t seen,
                                                                     absl::Duration timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                    [&] { return stop_.load() || (state_ != nullptr && state_->version != seen); });
  return state_;
}

void DevicePlugins::Publish(const Publication& p) {
  auto next = std::make_shared<State>();
  // A copy shares the host (a shared_ptr); the policy and health are small.
  next->snapshot = std::make_shared<const Snapshot>(p.snapshot);
  next->plan =
      dp::PlanResources(*p.snapshot.host, p.snapshot.policy, opt_.config, p.snapshot.health);
  std::string conflicts;
  for (const v1::Finding& f : next->plan.findings) absl::StrAppend(&conflicts, f.message(), "\n");
  if (conflicts != conflicts_) {
    for (const v1::Finding& f : next->plan.findings) Log(LogLevel::kWarning, f.message());
    conflicts_ = std::move(conflicts);
  }
  for (size_t i = 0; i < next->plan.resources.size(); ++i) {
    v1beta1::ListAndWatchResponse list = next->plan.resources[i].list;
    dp::AddVanished(advertised_[i], &list);
    for (const v1beta1::Device& d : list.devices()) {
      if (std::find(advertised_[i].begin(), advertised_[i].end(), d.id()) == advertised_[i].end()) {
        advertised_[i].push_back(d.id());
      }
    }
    next->lists.push_back(std::move(list));
  }
  std::lock_guard<std::mutex> lock(mu_);
  bool same = state_ != nullptr && state_->lists.size() == next->lists.size();
  for (size_t i = 0; same && i < next->lists.size(); ++i) {
    same = state_->lists[i].SerializeAsString() == next->lists[i].SerializeAsString();
  }
  next->version = state_ == nullptr ? 1 : state_->version + (same ? 0 : 1);
  state_ = std::move(next);
  if (!same) changed_.notify_all();
}

void DevicePlugins::Findings(absl::Time, std::vector<v1::Finding>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [resource, error] : errors_) {
    v1::Finding* f = &out->emplace_back();
    f->set_severity(v1::SEVERITY_WARNING);
    f->set_check(dp::kCheck);
    f->set_subject(resource);
    f->set_message(absl::StrCat("device plugin ", resource, " is not registered with the kubelet (",
                                opt_.dir, "/", kKubeletSocket, "): ", error));
  }
  if (state_ != nullptr) {
    out->insert(out->end(), state_->plan.findings.begin(), state_->plan.findings.end());
  }
}

void DevicePlugins::SetError(const std::string& resource, std::string error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error.empty()) {
    errors_.erase(resource);
  } else {
    errors_[resource] = std::move(error);
  }
}

std::string DevicePlugins::KubeletSocket() const {
  return (std::filesystem::path(opt_.dir) / kKubeletSocket).string();
}

absl::Status DevicePlugins::Register(const Slot& slot) {
  auto channel = grpc::CreateChannel(absl::StrCat("unix:", KubeletSocket()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + opt_.register_timeout));
  v1beta1::RegisterRequest req;
  req.set_version(dp::kApiVersion);
  req.set_endpoint(slot.socket_name);
  req.set_resource_name(slot.resource);
  req.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty resp;
  grpc::Status s = stub->Register(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  return absl::OkStatus();
}

absl::Status DevicePlugins::Serve(Slot& slot) {
  if (absl::Status s = ClearStaleSocket(slot.socket_path, "--device-plugin-dir"); !s.ok()) {
    return s;
  }
  grpc::ServerBuilder b;
  b.AddListeningPort(absl::StrCat("unix:", slot.socket_path), grpc::InsecureServerCredentials());
  b.RegisterService(slot.service.get());
  slot.server = b.BuildAndStart();
  auto file = slot.server != nullptr ? RecordBoundSocket(slot.socket_path)
                                     : absl::UnavailableError("gRPC cannot bind it");
  if (!file.ok()) {
    slot.server.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot serve ", slot.socket_path, ": ", file.status().message()));
  }
  slot.file = *file;
  return absl::OkStatus();
}

// Brings one slot to "served and registered" as far as it can now.
void DevicePlugins::Tend(Slot& slot, absl::Time now) {
  if (slot.server != nullptr) {
    // Our socket gone (the kubelet wiped the directory) or replaced: serve again.
    struct stat st {};
    if (lstat(slot.socket_path.c_str(), &st) != 0 || st.st_ino != slot.file.ino ||
        st.st_dev != slot.file.dev) {
      Log(LogLevel::kInfo, "device plugin ", slot.resource, ": ", slot.socket_path,
          " vanished; serving it again");
      slot.server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
      slot.server.reset();
      slot.registered = false;
    }
  }
  if (now < slot.next_try) return;
  auto fail = [&](const std::string& error) {
    if (error != slot.error) {  // Once per error, not once per try.
      Log(LogLevel::kWarning, "device plugin ", slot.resource, ": ", error,
          "; trying again, at most every ", absl::FormatDuration(opt_.backoff_max));
    }
    slot.error = error;
    SetError(slot.resource, error);
    slot.next_try = now + slot.backoff;
    slot.backoff = std::min(slot.backoff * 2, opt_.backoff_max);
  };
  if (slot.server == nullptr) {
    if (absl::Status s = Serve(slot); !s.ok()) return fail(std::string(s.message()));
  }
  if (slot.registered) return;
  if (absl::Status s = Register(slot); !s.ok()) {
    return fail(absl::StrCat("Register: ", s.message()));
  }
  slot.registered = true;
  if (struct stat ks{}; lstat(KubeletSocket().c_str(), &ks) == 0) {
    slot.kubelet_dev = ks.st_dev;
    slot.kubelet_ino = ks.st_ino;
  }
  slot.backoff = opt_.backoff_min;
  slot.next_try = absl::InfinitePast();
  registrations_.fetch_add(1);
  slot.error.clear();
  SetError(slot.resource, "");
  Log(LogLevel::kInfo, "device plugin ", slot.resource, " registered with the kubelet, serving ",
      slot.socket_path);
}

void DevicePlugins::Run() {
  while (!stop_) {
    absl::Time now = absl::Now();
    absl::Time wake = now + opt_.recheck;
    for (auto& slot : slots_) {
      Tend(*slot, now);
      if (!slot->registered) wake = std::min(wake, std::max(slot->next_try, now));
    }
    pollfd fds[2] = {{inotify_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    const int ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(wake - absl::Now()), 0, 60000));
    if (poll(fds, 2, ms) < 0 && errno != EINTR) {
      Log(LogLevel::kError, "device plugins: poll: ", ErrnoText(errno));
      return;
    }
    if (stop_) return;
    // A new kubelet.sock is a kubelet that (re)started: every plugin registers again now.
    alignas(inotify_event) char buf[4096];
    ssize_t n;
    while ((n = read(inotify_.get(), buf, sizeof(buf))) > 0) {
      for (char* p = buf; p < buf + n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        const bool kubelet = ev->len > 0 && std::string(ev->name) == kKubeletSocket;
        if (kubelet && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
          Log(LogLevel::kInfo, "device plugins: the kubelet's socket was created; registering");
          struct stat ks {};
          const bool known = lstat(KubeletSocket().c_str(), &ks) == 0;
          for (auto& slot : slots_) {
            if (known && slot->registered && slot->kubelet_ino == ks.st_ino &&
                slot->kubelet_dev == ks.st_dev) {
              continue;  // Already registered on this one (after our socket vanished).
            }
            slot->registered = false;
            slot->backoff = opt_.backoff_min;
            slot->next_try = absl::InfinitePast();
          }
        }
      }
    }
  }
}

}  // namespace fabric
