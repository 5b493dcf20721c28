#include "agent/daemon/api/watch.h"

#include <google/protobuf/util/time_util.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "agent/common/log.h"
#include "agent/daemon/api/api_counters.h"
#include "agent/daemon/api/raw_call.h"
#include "agent/inventory/changes/changes.h"

namespace fabric {
namespace {

// Protobuf's wire format by hand for length-delimited fields (wire type 2): a tag and a length
// as varints, then the bytes, appended to a serialized message.
void AppendVarint(uint64_t v, std::string* out) {
  for (; v >= 0x80; v >>= 7) out->push_back(static_cast<char>((v & 0x7f) | 0x80));
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

size_t FieldSize(uint32_t number, size_t bytes) {
  return VarintSize((uint64_t{number} << 3) | 2) + VarintSize(bytes) + bytes;
}

// Where the objects of the last snapshot's event lie: `Find` gives an object's position in it.
// A refresh keeps the shared objects in their order, so the next one is almost always at the
// position after the last found (or one further, past a replaced object); only an object found
// nowhere near builds the index, once.
class PrevElements {
 public:
  // `prev`: the last snapshot's layout (the cache's lock held), or null.
  explicit PrevElements(const WatchEventCache::Layout* prev)
      : objects_(prev != nullptr && prev->event != nullptr ? &prev->objects : nullptr) {}
  std::optional<size_t> Find(const void* object) {
    if (objects_ == nullptr) return std::nullopt;
    const std::vector<const void*>& objs = *objects_;
    for (size_t i = next_; i < objs.size() && i < next_ + 2; ++i) {
      if (objs[i] == object) {
        next_ = i + 1;
        return i;
      }
    }
    if (!indexed_) {
      index_.reserve(objs.size());
      for (size_t i = 0; i < objs.size(); ++i) index_.emplace(objs[i], i);
      indexed_ = true;
    }
    auto it = index_.find(object);
    if (it == index_.end()) return std::nullopt;
    next_ = it->second + 1;
    return it->second;
  }

 private:
  const std::vector<const void*>* objects_;
  size_t next_ = 0;
  bool indexed_ = false;
  absl::flat_hash_map<const void*, size_t> index_;
};

// The host's wire bytes, in an order other than the generated code's (parsers accept fields in
// any order): its other fields first, then each RDMA device, netdev and topology pair as a field
// of its own. Runs of objects that the last snapshot's event (`prev`) held in the same order are
// copied from it as one block of bytes; the others are serialized now. Where each object lands is
// recorded for the snapshot's cache.
class HostPieces {
 public:
  // `prev`: the last snapshot's layout (the cache's lock held), or null.
  HostPieces(const v1::Host& host, const WatchEventCache::Layout* prev) {
    // Everything but the devices, netdevs and topology pairs, on an arena that points at the host's
    // own objects (nothing copied). RefreshHostFields in refresh_test lists Host's fields: a new
    // one goes here too.
    v1::Host* rest = google::protobuf::Arena::CreateMessage<v1::Host>(&arena_);
    rest->set_hostname(host.hostname());
    rest->set_kernel_release(host.kernel_release());
    rest->set_sysfs_root(host.sysfs_root());
    rest->set_procfs_root(host.procfs_root());
    Share(host.accelerators(), rest->mutable_accelerators());
    if (host.has_gpudirect()) {
      rest->unsafe_arena_set_allocated_gpudirect(const_cast<v1::GpuDirect*>(&host.gpudirect()));
    }
    *rest->mutable_default_route_netdevs() = host.default_route_netdevs();
    *rest->mutable_numa_nodes() = host.numa_nodes();
    Share(host.problems(), rest->mutable_problems());
    if (host.has_pairing()) {
      rest->unsafe_arena_set_allocated_pairing(const_cast<v1::GpuPairing*>(&host.pairing()));
    }
    if (host.has_nccl_topology()) {
      rest->unsafe_arena_set_allocated_nccl_topology(
          const_cast<v1::NcclTopology*>(&host.nccl_topology()));
    }
    rest_ = rest->SerializeAsString();
    size_ = rest_.size();
    PrevElements found(prev);
    if (prev != nullptr && prev->event != nullptr) {
      old_ = *prev->event;
      old_starts_ = &prev->starts;
    }
    objects_.reserve(
        static_cast<size_t>(host.rdma_devices_size() + host.netdevs_size() + host.topology_size()));
    auto add = [&](uint32_t number, const google::protobuf::MessageLite& m) {
      objects_.push_back(&m);
      if (std::optional<size_t> i = found.Find(&m)) {
        if (!pieces_.empty() && pieces_.back().copied() && pieces_.back().end == *i) {
          ++pieces_.back().end;  // The run goes on.
        } else {
          Piece run;
          run.first = *i;
          run.end = *i + 1;
          pieces_.push_back(std::move(run));
        }
        return;
      }
      Piece p;
      p.number = number;
      p.bytes = m.SerializeAsString();
      size_ += FieldSize(number, p.bytes.size());
      pieces_.push_back(std::move(p));
    };
    for (const v1::RdmaDevice& d : host.rdma_devices()) add(v1::Host::kRdmaDevicesFieldNumber, d);
    for (const v1::Netdev& n : host.netdevs()) add(v1::Host::kNetdevsFieldNumber, n);
    for (const v1::TopologyPair& p : host.topology()) add(v1::Host::kTopologyFieldNumber, p);
    for (const Piece& p : pieces_) {
      if (p.copied()) size_ += (*old_starts_)[p.end] - (*old_starts_)[p.first];
    }
  }
  size_t size() const { return size_; }
  // Appends the bytes, and records in `cache` the objects and where each one's field starts.
  void AppendTo(std::string* out, WatchEventCache::Layout* cache) {
    out->append(rest_);
    std::vector<size_t>& starts = cache->starts;
    starts.clear();
    starts.reserve(objects_.size() + 1);
    for (const Piece& p : pieces_) {
      if (p.copied()) {
        const std::vector<size_t>& old = *old_starts_;
        const size_t from = old[p.first];
        const size_t at = out->size();
        for (size_t k = p.first; k < p.end; ++k) starts.push_back(at + (old[k] - from));
        out->append(old_.substr(from, old[p.end] - from));
      } else {
        starts.push_back(out->size());
        AppendVarint((uint64_t{p.number} << 3) | 2, out);
        AppendVarint(p.bytes.size(), out);
        out->append(p.bytes);
      }
    }
    starts.push_back(out->size());
    cache->objects = std::move(objects_);
  }

 private:
  // Objects [first, end) of the previous event, copied as they lie there; or one object
  // serialized now (`bytes`, field `number`).
  struct Piece {
    size_t first = 0;
    size_t end = 0;
    uint32_t number = 0;
    std::string bytes;
    bool copied() const { return end > first; }
  };
  template <typename Msg>
  static void Share(const google::protobuf::RepeatedPtrField<Msg>& from,
                    google::protobuf::RepeatedPtrField<Msg>* to) {
    for (const Msg& m : from) to->UnsafeArenaAddAllocated(const_cast<Msg*>(&m));  // Read only.
  }

  google::protobuf::Arena arena_;
  std::string rest_;
  std::string_view old_;
  const std::vector<size_t>* old_starts_ = nullptr;
  std::vector<const void*> objects_;
  std::vector<Piece> pieces_;
  size_t size_ = 0;
};

}  // namespace

void FillInventory(const Snapshot& s, v1::Inventory* out) {
  *out->mutable_host() = *s.host;
  out->set_generation(s.generation);
  *out->mutable_discovered_at() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(s.discovered_at));
  s.events.Fill(absl::Now(), s.event_window, out);
}

WatchEventCache::Entry* WatchEventCache::Find(const std::shared_ptr<const Snapshot>& s) {
  for (Entry& e : entries_) {
    if (s != nullptr && e.snapshot.lock() == s) return &e;
  }
  return nullptr;
}

size_t WatchEventCache::ObjectsOf(const Snapshot& s) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    if (e.snapshot.lock().get() == &s) return e.layout.objects.size();
  }
  return 0;
}

std::shared_ptr<const std::string> WatchEventCache::Bytes(
    const std::shared_ptr<const Snapshot>& last, const std::shared_ptr<const Snapshot>& next_ptr) {
  const Snapshot& next = *next_ptr;
  v1::InventoryEvent event;
  if (last != nullptr) {
    // Publish diffed against the generation before; a stream that skipped some diffs its own.
    std::vector<v1::InventoryChange> changes =
        last->generation == next.changes_since && last->generation != next.generation
            ? next.changes
            : DiffHosts(*last->host, *next.host);
    for (v1::InventoryChange& c : changes) {
      next.events.SetCount(&c);
      *event.add_changes() = std::move(c);
    }
  }
  // The inventory without its host, then the host serialized in place: the same bytes as
  // FillInventory's message (fields may come in any order), without copying a host of
  // hundreds of devices for every change.
  v1::Inventory inv;
  inv.set_generation(next.generation);
  *inv.mutable_discovered_at() = google::protobuf::util::TimeUtil::NanosecondsToTimestamp(
      absl::ToUnixNanos(next.discovered_at));
  next.events.Fill(absl::Now(), next.event_window, &inv);
  const std::string inv_rest = inv.SerializeAsString();
  auto append_head = [&](size_t host_size) {
    const size_t inv_size = inv_rest.size() + FieldSize(v1::Inventory::kHostFieldNumber, host_size);
    auto out = std::make_shared<std::string>(event.SerializeAsString());
    out->reserve(out->size() + FieldSize(v1::InventoryEvent::kInventoryFieldNumber, inv_size));
    AppendVarint((uint64_t{v1::InventoryEvent::kInventoryFieldNumber} << 3) | 2, out.get());
    AppendVarint(inv_size, out.get());
    out->append(inv_rest);
    AppendVarint((uint64_t{v1::Inventory::kHostFieldNumber} << 3) | 2, out.get());
    AppendVarint(host_size, out.get());
    return out;
  };
  std::lock_guard<std::mutex> lock(mu_);
  if (const Entry* cached = Find(next_ptr)) {  // Another stream's event has the host's bytes.
    auto out = append_head(cached->layout.host.size);
    out->append(*cached->layout.event, cached->layout.host.offset, cached->layout.host.size);
    return out;
  }
  const Entry* prev = last != next_ptr ? Find(last) : nullptr;
  HostPieces host(*next.host, prev != nullptr ? &prev->layout : nullptr);
  auto out = append_head(host.size());
  Entry entry;
  entry.snapshot = next_ptr;
  entry.layout.host = {out->size(), host.size()};
  host.AppendTo(out.get(), &entry.layout);
  entry.layout.event = out;
  // Entries whose snapshot is gone go first, then the oldest beyond the bound.
  std::erase_if(entries_, [](const Entry& e) { return e.snapshot.expired(); });
  if (entries_.size() >= kMaxSnapshots) entries_.erase(entries_.begin());
  entries_.push_back(std::move(entry));
  return out;
}

namespace {

// A call refused before it became a stream.
class Refused final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit Refused(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

// Every field is guarded by the hub's mutex. StartWrite and Finish are called without it (a
// reaction that gRPC ran inline would take it again); a stream the pump is acting on is pinned,
// so that OnDone on another thread does not free it under the pump.
class WatchHub::Stream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  Stream(WatchHub* hub, grpc::CallbackServerContext* ctx, std::string key)
      : hub_(hub), ctx_(ctx), key_(std::move(key)) {}

  void OnWriteDone(bool ok) override {
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(hub_->mu_);
      writing_ = false;
      if (!ok || cancelled_) finish = TakeFinish();
    }
    if (finish) {
      Finish(grpc::Status::OK);  // The client left; nobody reads the status.
    } else {
      hub_->Wake();  // Ready for the next event.
    }
  }

  void OnCancel() override {
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(hub_->mu_);
      cancelled_ = true;
      // A write in flight fails now and finishes the stream from OnWriteDone.
      if (!writing_) finish = TakeFinish();
    }
    if (finish) Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override { hub_->Close(this); }

 private:
  friend class WatchHub;

  // True once: the caller then calls Finish.
  bool TakeFinish() {
    if (finished_) return false;
    finished_ = true;
    return true;
  }

  WatchHub* const hub_;
  grpc::CallbackServerContext* const ctx_;
  const std::string key_;
  std::shared_ptr<const Snapshot> last_;  // The last snapshot sent; null before the first.
  grpc::ByteBuffer buffer_;               // The write in flight.
  absl::Time write_started_;
  bool writing_ = false;
  bool timed_out_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
  bool done_ = false;  // OnDone ran: deleted when the last pin goes.
  int pins_ = 0;
};

WatchHub::WatchHub(const SnapshotStore* store, WatchOptions options, ApiCounters* counters)
    : store_(store), opt_(options), counters_(counters) {
  subscription_ = store_->Subscribe([this] { Wake(); });
  pump_ = std::thread([this] { Pump(); });
}

WatchHub::~WatchHub() {
  store_->Unsubscribe(subscription_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  pump_.join();
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchHub::Refuse(grpc::Status status) {
  return new Refused(std::move(status));
}

void WatchHub::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    dirty_ = true;
  }
  cv_.notify_all();
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchHub::Open(grpc::CallbackServerContext* ctx,
                                                           const std::string& caller_key,
                                                           const std::string& who) {
  if (store_->Current() == nullptr) {
    return Refuse(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "the first inventory is not ready yet"));
  }
  std::unique_lock<std::mutex> lock(mu_);
  const char* limit = nullptr;
  size_t bound = 0;
  auto it = by_caller_.find(caller_key);
  const size_t mine = it == by_caller_.end() ? 0 : it->second;
  if (streams_.size() >= opt_.max_watches) {
    limit = "max_watches", bound = opt_.max_watches;
  } else if (mine >= opt_.max_watches_per_caller) {
    limit = "max_watches_per_caller", bound = opt_.max_watches_per_caller;
  }
  if (limit != nullptr) {
    lock.unlock();
    if (counters_ != nullptr) counters_->OverLimit(limit);
    return Refuse(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("too many watch streams: --", absl::StrReplaceAll(limit, {{"_", "-"}}), "=",
                     bound, " reached", who.empty() ? "" : absl::StrCat(" (", who, ")"))));
  }
  auto* s = new Stream(this, ctx, caller_key);
  streams_.insert(s);
  ++by_caller_[caller_key];
  if (counters_ != nullptr) ++counters_->watches;
  dirty_ = true;
  lock.unlock();
  cv_.notify_all();
  return s;
}

void WatchHub::Close(Stream* s) {
  bool free_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (streams_.erase(s) == 1) {
      if (--by_caller_[s->key_] == 0) by_caller_.erase(s->key_);
      if (counters_ != nullptr) --counters_->watches;
    }
    s->done_ = true;
    free_now = s->pins_ == 0;
  }
  if (free_now) delete s;
}

void WatchHub::Pump() {
  // What one round decided, done after the lock is released.
  struct Act {
    Stream* s;
    bool write;  // Else Finish with `status`.
    grpc::Status status;
  };
  std::vector<Act> acts;
  std::vector<Stream*> freed;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    dirty_ = false;
    const std::shared_ptr<const Snapshot> current = store_->Current();
    const bool shutting_down = store_->shutting_down();
    const absl::Time now = absl::Now();
    absl::Time next = absl::InfiniteFuture();
    // Streams mostly stand at the same generation: one event per starting point per round.
    std::map<const Snapshot*, std::shared_ptr<const std::string>> events;
    for (Stream* s : streams_) {
      if (s->finished_) continue;
      if (shutting_down) {
        s->finished_ = true;
        ++s->pins_;
        acts.push_back(
            {s, false,
             grpc::Status(grpc::StatusCode::UNAVAILABLE, "fabric-agent is shutting down")});
        continue;
      }
      if (s->writing_) {
        // A write waits while the client does not read (flow control). TryCancel is safe under
        // the lock: gRPC runs OnCancel of an application reactor on its own threads.
        if (now - s->write_started_ >= opt_.timeout) {
          if (!s->timed_out_) {
            Log(LogLevel::kWarning, "dropping watch client ", s->ctx_->peer(),
                ": it took no event for ", absl::FormatDuration(now - s->write_started_));
            s->timed_out_ = true;
            s->ctx_->TryCancel();
          }
        } else {
          next = std::min(next, s->write_started_ + opt_.timeout);
        }
        continue;
      }
      if (s->cancelled_ || current == nullptr) continue;
      if (s->last_ != nullptr && s->last_->generation >= current->generation) continue;
      auto [ev, fresh] = events.try_emplace(s->last_.get());
      if (fresh) {
        ev->second = events_.Bytes(s->last_, current);
      }
      s->buffer_ = BytesToBuffer(ev->second);
      s->last_ = current;
      s->writing_ = true;
      s->write_started_ = now;
      ++s->pins_;
      acts.push_back({s, true, grpc::Status::OK});
    }
    events.clear();
    if (!acts.empty()) {
      lock.unlock();
      for (Act& a : acts) {
        if (a.write) {
          a.s->StartWrite(&a.s->buffer_);
        } else {
          a.s->Finish(std::move(a.status));
        }
      }
      lock.lock();
      for (Act& a : acts) {
        if (--a.s->pins_ == 0 && a.s->done_) freed.push_back(a.s);
      }
      acts.clear();
      for (Stream* s : freed) delete s;
      freed.clear();
    }
    if (dirty_ || stop_) continue;
    // Sleeps without a timeout while no write is in progress: an idle agent does not wake.
    if (next == absl::InfiniteFuture()) {
      cv_.wait(lock, [this] { return dirty_ || stop_; });
    } else {
      cv_.wait_until(lock, absl::ToChronoTime(next), [this] { return dirty_ || stop_; });
    }
  }
}

}  // namespace fabric
