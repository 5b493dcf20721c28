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
#include <list>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"
#include "agent/common/socket_file.h"
#include "agent/publish/deviceplugin/request.h"
#include "agent/publish/deviceplugin/resource_section.h"
#include "k8s/deviceplugin/v1beta1/api.grpc.pb.h"

namespace fabric {
namespace {

namespace dp = ::fabric::deviceplugin;

// Which kubelet.sock a Register went to. The inode alone is not enough: a kubelet that restarts
// may get the number its predecessor's socket freed; the change time of a socket is its bind.
struct KubeletSocketId {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t ctime_s = 0;
  int64_t ctime_ns = 0;
  bool operator==(const KubeletSocketId&) const = default;
};

std::optional<KubeletSocketId> StatKubeletSocket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return std::nullopt;
  return KubeletSocketId{st.st_dev, st.st_ino, st.st_ctim.tv_sec, st.st_ctim.tv_nsec};
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical codes.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// The ListAndWatch streams of one resource: at most max_streams, the oldest evicted by a new one,
// and one whose write has waited too long cancelled (the reader stopped; the write would hold
// its gRPC thread forever).
class Streams {
 public:
  struct Entry {
    grpc::ServerContext* ctx;
    absl::Time writing_since = absl::InfiniteFuture();
    bool cancelled = false;
  };

  // Adds `ctx`'s stream, cancelling the oldest over `max`; true when one was evicted.
  std::list<Entry>::iterator Add(grpc::ServerContext* ctx, int max, bool* evicted) {
    std::lock_guard<std::mutex> lock(mu_);
    int live = 0;
    for (const Entry& e : list_) live += e.cancelled ? 0 : 1;
    *evicted = false;
    for (Entry& e : list_) {
      if (live < max) break;
      if (e.cancelled) continue;
      e.cancelled = true;
      e.ctx->TryCancel();
      --live;
      *evicted = true;
    }
    return list_.insert(list_.end(), Entry{ctx});
  }
  void Remove(std::list<Entry>::iterator it) {
    std::lock_guard<std::mutex> lock(mu_);
    list_.erase(it);
  }
  bool Cancelled(std::list<Entry>::iterator it) {
    std::lock_guard<std::mutex> lock(mu_);
    return it->cancelled;
  }
  void Writing(std::list<Entry>::iterator it, absl::Time since) {
    std::lock_guard<std::mutex> lock(mu_);
    it->writing_since = since;
  }
  // Cancels the streams whose write began before `before`; how many.
  int CancelStalled(absl::Time before) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (Entry& e : list_) {
      if (e.cancelled || e.writing_since >= before) continue;
      e.cancelled = true;
      e.ctx->TryCancel();
      ++n;
    }
    return n;
  }

 private:
  std::mutex mu_;
  std::list<Entry> list_;  // Oldest first.
};

std::string Bytes(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!b.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

grpc::ByteBuffer Buffer(const google::protobuf::Message& m) {
  grpc::Slice slice(m.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

using RawBase = v1beta1::DevicePlugin::WithRawCallbackMethod_Allocate<
    v1beta1::DevicePlugin::WithRawCallbackMethod_GetPreferredAllocation<
        v1beta1::DevicePlugin::WithRawCallbackMethod_PreStartContainer<
            v1beta1::DevicePlugin::Service>>>;

// One resource's DevicePlugin service, answering from the latest state. The calls that carry
// strings take the request's bytes and parse them here (request.h).
class PluginService final : public RawBase {
 public:
  PluginService(const DevicePlugins* owner, size_t index, std::string resource)
      : owner_(owner), index_(index), resource_(std::move(resource)) {}

  using RawBase::Allocate;
  using RawBase::GetPreferredAllocation;
  using RawBase::PreStartContainer;

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    bool evicted = false;
    auto self = streams_.Add(ctx, owner_->options().max_streams, &evicted);
    if (evicted) {
      owner_->CountStream(/*evicted=*/true);
      Log(LogLevel::kInfo, "device plugin ", resource_, ": a new ListAndWatch stream replaced the ",
          "oldest of ", owner_->options().max_streams);
    }
    uint64_t sent = 0;
    while (!owner_->stopping() && !ctx->IsCancelled() && !streams_.Cancelled(self)) {
      // A bounded wait: a server shut down under the stream cancels it, seen here.
      std::shared_ptr<const DevicePlugins::State> st =
          owner_->WaitNewer(sent, absl::Milliseconds(500));
      if (st == nullptr || st->version == sent) continue;
      sent = st->version;
      streams_.Writing(self, absl::Now());
      const bool ok = writer->Write(st->lists[index_]);
      streams_.Writing(self, absl::InfiniteFuture());
      if (!ok) break;
    }
    streams_.Remove(self);
    return grpc::Status::OK;
  }

  grpc::ServerUnaryReactor* GetPreferredAllocation(grpc::CallbackServerContext* ctx,
                                                   const grpc::ByteBuffer* req,
                                                   grpc::ByteBuffer* out) override {
    return Answer<v1beta1::PreferredAllocationRequest>(
        ctx, "GetPreferredAllocation", *req, out, [&](const auto& st, const auto& r) {
          return dp::PreferredAllocation(*st.snapshot->host, st.plan.resources[index_], r);
        });
  }

  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                     grpc::ByteBuffer* out) override {
    return Answer<v1beta1::AllocateRequest>(
        ctx, "Allocate", *req, out, [&](const auto& st, const auto& r) {
          return dp::Allocate(*st.snapshot->host, st.snapshot->policy, st.plan.resources[index_], r,
                              owner_->options().allocate);
        });
  }

  grpc::ServerUnaryReactor* PreStartContainer(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* req,
                                              grpc::ByteBuffer* out) override {
    // Not asked for (pre_start_required is false); its request is checked as the others'.
    return Answer<v1beta1::PreStartContainerRequest>(
        ctx, "PreStartContainer", *req, out,
        [](const auto&, const auto&) -> absl::StatusOr<v1beta1::PreStartContainerResponse> {
          return v1beta1::PreStartContainerResponse();
        });
  }

  int CancelStalled(absl::Time before) { return streams_.CancelStalled(before); }

 private:
  template <typename Request, typename F>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, const char* method,
                                   const grpc::ByteBuffer& bytes, grpc::ByteBuffer* out, F answer) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Request req;
    absl::Status s = dp::ParseRequest(Bytes(bytes), &req);
    const bool parse = !s.ok();
    std::shared_ptr<const DevicePlugins::State> st = owner_->Latest();
    if (s.ok() && st == nullptr) s = absl::UnavailableError("no inventory yet");
    if (s.ok()) {
      auto r = answer(*st, req);
      if (r.ok()) *out = Buffer(*r);
      s = r.status();
    }
    if (s.code() == absl::StatusCode::kInvalidArgument) {
      owner_->Refused(resource_, method, parse, std::string(s.message()));
    }
    reactor->Finish(ToGrpc(s));
    return reactor;
  }

  const DevicePlugins* owner_;
  size_t index_;
  std::string resource_;
  Streams streams_;
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
  // The kubelet.sock of the last successful Register, taken before the call: a new socket's
  // event that arrives after the plugin already registered with it asks for nothing more.
  std::optional<KubeletSocketId> registered_with;
  std::string error;  // The last try's; empty after a success.
  absl::Duration backoff;
  absl::Time next_try = absl::InfinitePast();
};

DevicePlugins::DevicePlugins(DevicePluginOptions opt) : opt_(std::move(opt)) {
  advertised_.resize(static_cast<size_t>(opt_.config.resources_size()));
}

absl::StatusOr<std::unique_ptr<DevicePlugins>> DevicePlugins::Start(DevicePluginOptions opt) {
  if (absl::Status s = dp::CheckSocketPaths(opt.dir, opt.config); !s.ok()) return s;
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
  p->WatchDirectory();
  if (p->dir_watch_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot watch ", p->opt_.dir, ": ", ErrnoText(errno)));
  }
  std::vector<std::string> served;
  std::vector<std::string> not_served;
  for (size_t i = 0; i < static_cast<size_t>(p->opt_.config.resources_size()); ++i) {
    auto slot = std::make_unique<Slot>();
    slot->resource = p->opt_.config.resources(static_cast<int>(i)).name();
    slot->socket_name = dp::SocketName(slot->resource);
    slot->socket_path = dp::SocketPath(p->opt_.dir, slot->resource);
    slot->service = std::make_unique<PluginService>(p.get(), i, slot->resource);
    slot->backoff = p->opt_.backoff_min;
    // Served before Start returns, so the socket is there for whoever looks; a failure is the
    // worker's to retry.
    if (absl::Status s = p->Serve(*slot); !s.ok()) {
      Log(LogLevel::kWarning, "device plugin ", slot->resource, ": ", s.message());
      not_served.push_back(slot->resource);
    } else {
      served.push_back(slot->resource);
    }
    p->slots_.push_back(std::move(slot));
  }
  // Only what is served is said to be; the rest is said when it is.
  if (!served.empty()) {
    Log(LogLevel::kInfo, "serving ", served.size(), " device plugin resources in ", p->opt_.dir);
  }
  if (!not_served.empty()) {
    Log(LogLevel::kWarning, "not serving ", not_served.size(), " device plugin resources yet (",
        absl::StrJoin(not_served, ", "), "): retrying");
  }
  p->worker_ = std::thread([raw = p.get()] { raw->Run(); });
  return p;
}

DevicePlugins::~DevicePlugins() {
  stop_ = true;
  changed_.notify_all();
  {
    std::lock_guard<std::mutex> lock(register_mu_);
    if (register_ctx_ != nullptr) register_ctx_->TryCancel();
  }
  if (wake_.valid()) {
    const uint64_t one = 1;
    (void)!write(wake_.get(), &one, sizeof(one));
  }
  if (worker_.joinable()) worker_.join();
  // One deadline for all: a stream blocked in a write is cancelled once it passes, and 64
  // servers do not wait in turn.
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(200);
  for (auto& slot : slots_) {
    if (slot->server != nullptr) slot->server->Shutdown(deadline);
  }
  for (auto& slot : slots_) {
    if (slot->server != nullptr) {
      slot->server.reset();
      (void)RemoveBoundSocket(slot->file);
    }
  }
}

std::string DevicePlugins::SocketPath(const std::string& resource) const {
  return dp::SocketPath(opt_.dir, resource);
}

DevicePlugins::Counts DevicePlugins::counts() const {
  return {refused_parse_.load(), refused_invalid_.load(), evicted_.load(), stalled_.load()};
}

void DevicePlugins::Refused(const std::string& resource, const char* method, bool parse,
                            const std::string& why) const {
  (parse ? refused_parse_ : refused_invalid_).fetch_add(1);
  std::lock_guard<std::mutex> lock(log_mu_);
  if (!log_bucket_.Take(absl::Now())) return;
  Log(LogLevel::kWarning, "device plugin ", resource, ": ", method, " refused: ", why, " (",
      refused_parse_.load() + refused_invalid_.load(),
      " refused so far; logged at most every 5 s)");
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
  {
    // The destructor cancels it: a kubelet that accepts and never answers holds no shutdown.
    std::lock_guard<std::mutex> lock(register_mu_);
    if (stop_) return absl::CancelledError("stopping");
    register_ctx_ = &ctx;
  }
  v1beta1::RegisterRequest req;
  req.set_version(dp::kApiVersion);
  req.set_endpoint(slot.socket_name);
  req.set_resource_name(slot.resource);
  req.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty resp;
  grpc::Status s = stub->Register(&ctx, req, &resp);
  {
    std::lock_guard<std::mutex> lock(register_mu_);
    register_ctx_ = nullptr;
  }
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  return absl::OkStatus();
}

absl::Status DevicePlugins::Serve(Slot& slot) {
  if (absl::Status s = ClearStaleSocket(slot.socket_path, "--device-plugin-dir"); !s.ok()) {
    return s;
  }
  // Mode 0600 from the start, whatever the umask: only the kubelet (root) and the agent connect.
  auto file = BindSocketWithMode(slot.socket_path, 0600, [&](const std::string& path) {
    grpc::ServerBuilder b;
    b.AddListeningPort(absl::StrCat("unix:", path), grpc::InsecureServerCredentials());
    b.RegisterService(slot.service.get());
    slot.server = b.BuildAndStart();
    return slot.server != nullptr ? absl::OkStatus()
                                  : absl::UnavailableError("gRPC cannot bind it");
  });
  if (!file.ok()) {
    if (slot.server != nullptr) slot.server->Shutdown(std::chrono::system_clock::now());
    slot.server.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot serve ", slot.socket_path, ": ", file.status().message()));
  }
  slot.file = *file;
  return absl::OkStatus();
}

// Brings one slot to "served and registered" as far as it can now. `kubelet_silent`: a Register
// of this round that found no answer, which the rest of the round takes as theirs.
void DevicePlugins::Tend(Slot& slot, absl::Time now, absl::Status* kubelet_silent) {
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
    Log(LogLevel::kInfo, "device plugin ", slot.resource, ": serving ", slot.socket_path);
  }
  if (slot.registered) return;
  if (!kubelet_silent->ok()) return fail(absl::StrCat("Register: ", kubelet_silent->message()));
  const std::optional<KubeletSocketId> kubelet = StatKubeletSocket(KubeletSocket());
  if (absl::Status s = Register(slot); !s.ok()) {
    if (absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s)) *kubelet_silent = s;
    return fail(absl::StrCat("Register: ", s.message()));
  }
  slot.registered = true;
  slot.registered_with = kubelet;
  slot.backoff = opt_.backoff_min;
  slot.next_try = absl::InfinitePast();
  registrations_.fetch_add(1);
  slot.error.clear();
  SetError(slot.resource, "");
  Log(LogLevel::kInfo, "device plugin ", slot.resource, " registered with the kubelet, serving ",
      slot.socket_path);
}

void DevicePlugins::RegisterAllAgain(bool unless_on_current_kubelet) {
  const std::optional<KubeletSocketId> current =
      unless_on_current_kubelet ? StatKubeletSocket(KubeletSocket()) : std::nullopt;
  for (auto& slot : slots_) {
    // Already registered with this very socket (its event came after our Register): the kubelet
    // has it; a second Register would only make it reopen our endpoint.
    if (current.has_value() && slot->registered && slot->registered_with == current) continue;
    slot->registered = false;
    slot->backoff = opt_.backoff_min;
    slot->next_try = absl::InfinitePast();
  }
}

// The directory's watch; while the directory is gone, its parent's, which sees it come back. The
// kubelet never removes the directory, but an operator or a node reset may: without a new watch,
// a kubelet restart was seen only at the next recheck.
void DevicePlugins::WatchDirectory() {
  constexpr uint32_t kDir = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF |
                            IN_MOVE_SELF | IN_ONLYDIR;
  const std::filesystem::path dir(opt_.dir);
  if (dir_watch_ < 0) dir_watch_ = inotify_add_watch(inotify_.get(), opt_.dir.c_str(), kDir);
  if (dir_watch_ < 0 && parent_watch_ < 0 && dir.has_parent_path()) {
    parent_watch_ = inotify_add_watch(inotify_.get(), dir.parent_path().c_str(),
                                      IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
    // Created between the two: seen now.
    dir_watch_ = inotify_add_watch(inotify_.get(), opt_.dir.c_str(), kDir);
  }
  if (dir_watch_ >= 0 && parent_watch_ >= 0) {
    (void)inotify_rm_watch(inotify_.get(), parent_watch_);
    parent_watch_ = -1;
  }
}

void DevicePlugins::ReadEvents() {
  alignas(inotify_event) char buf[4096];
  ssize_t n;
  bool kubelet = false;
  bool dir_back = false;
  while ((n = read(inotify_.get(), buf, sizeof(buf))) > 0) {
    for (char* p = buf; p < buf + n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(p);
      p += sizeof(inotify_event) + ev->len;
      const std::string name = ev->len > 0 ? std::string(ev->name) : "";
      if (ev->wd == dir_watch_ && (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))) {
        // Removed (the kernel drops the watch) or moved away (the watch would follow it).
        if (!(ev->mask & IN_IGNORED)) (void)inotify_rm_watch(inotify_.get(), dir_watch_);
        dir_watch_ = -1;
        Log(LogLevel::kWarning, "device plugins: ", opt_.dir, " was removed; waiting for it");
      } else if (ev->wd == parent_watch_ && (ev->mask & IN_IGNORED)) {
        parent_watch_ = -1;
      } else if (ev->wd == dir_watch_ && name == kKubeletSocket &&
                 (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
        kubelet = true;
      }
    }
  }
  if (dir_watch_ < 0) {
    WatchDirectory();  // Also at each recheck: a parent that came back too.
    if (dir_watch_ >= 0) {
      Log(LogLevel::kInfo, "device plugins: ", opt_.dir, " is back; watching it again");
      dir_back = true;
    }
  }
  // A new kubelet.sock is a kubelet that (re)started, whatever inode it got: every plugin
  // registers again now. A directory that came back may already hold it.
  if (kubelet || (dir_back && std::filesystem::exists(KubeletSocket()))) {
    Log(LogLevel::kInfo, "device plugins: the kubelet's socket was created; registering");
    RegisterAllAgain(/*unless_on_current_kubelet=*/true);
  } else if (dir_back) {
    RegisterAllAgain(/*unless_on_current_kubelet=*/false);  // Our sockets went with it.
  }
}

void DevicePlugins::Run() {
  while (!stop_) {
    // Events first: a registration made after a kubelet.sock was created is on the new kubelet.
    ReadEvents();
    absl::Time now = absl::Now();
    absl::Time wake = now + opt_.recheck;
    absl::Status kubelet_silent;
    for (auto& slot : slots_) {
      if (stop_) return;
      Tend(*slot, now, &kubelet_silent);
      if (!slot->registered) wake = std::min(wake, std::max(slot->next_try, now));
      if (int n = slot->service->CancelStalled(absl::Now() - opt_.stream_write_timeout); n > 0) {
        stalled_.fetch_add(static_cast<uint64_t>(n));
        Log(LogLevel::kWarning, "device plugin ", slot->resource, ": cancelled ", n,
            " ListAndWatch streams whose reader stopped reading for ",
            absl::FormatDuration(opt_.stream_write_timeout));
      }
    }
    // A stalled write is looked at twice within its timeout.
    wake = std::min(wake, absl::Now() + opt_.stream_write_timeout / 2);
    pollfd fds[2] = {{inotify_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    const int ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(wake - absl::Now()), 0, 60000));
    if (poll(fds, 2, ms) < 0 && errno != EINTR) {
      Log(LogLevel::kError, "device plugins: poll: ", ErrnoText(errno));
      return;
    }
  }
}

}  // namespace fabric
