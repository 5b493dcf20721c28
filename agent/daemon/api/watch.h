// WatchInventory streams without a thread each. A stream is a gRPC callback reactor; one pump
// thread, woken when a snapshot is published, a write completes or a stream opens, starts the next
// write of every stream that is ready for it. A thousand watchers cost a thousand small objects,
// not a thousand threads; an idle agent's pump sleeps without a timeout.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "agent/daemon/cycle/snapshot.h"
#include "fabric/v1/agent.pb.h"

namespace fabric {

class ApiCounters;

struct WatchOptions {
  // A client that has not taken an event for this long (stuck, or far too slow) is dropped, so
  // that it does not hold an old snapshot for long.
  absl::Duration timeout = absl::Seconds(30);
  size_t max_watches = 128;
  size_t max_watches_per_caller = 16;
};

// The inventory of one snapshot as the API serves it (GetInventory, each watch event).
void FillInventory(const Snapshot& s, v1::Inventory* out);
// The watch events' byte cache, owned by the hub (snapshots stay immutable). For each of the last
// few snapshots it keeps the first event built and where its host's bytes and each RDMA
// device's, netdev's and topology pair's field lie in it. Other streams' events for that snapshot
// copy the host's bytes whole; the next snapshot's event copies the bytes of the objects it
// shares with this one (RefreshedHost), in runs, instead of serializing them again. Snapshots are
// held weakly: the cache never keeps an old host alive. Thread-safe.
class WatchEventCache {
 public:
  static constexpr size_t kMaxSnapshots = 4;
  // The event, serialized, that a watcher who last saw `last` (null: nothing yet) gets for
  // `next`: the whole inventory, and the changes since `last` (so a slow client that skipped
  // generations still learns everything that changed).
  std::shared_ptr<const std::string> Bytes(const std::shared_ptr<const Snapshot>& last,
                                           const std::shared_ptr<const Snapshot>& next);
  // How many objects of `s` have their place recorded (0: no event of `s` is cached).
  size_t ObjectsOf(const Snapshot& s) const;

  // Where one event's pieces lie.
  struct Layout {
    struct Span {
      size_t offset = 0;
      size_t size = 0;
    };
    std::shared_ptr<const std::string> event;
    Span host;
    // The devices, netdevs and topology pairs in the order the event holds them, and where each
    // one's field (tag, length, bytes) starts in `event`; `starts` ends with the last one's end.
    // The objects belong to the entry's snapshot, alive while it is.
    std::vector<const void*> objects;
    std::vector<size_t> starts;
  };

 private:
  struct Entry {
    std::weak_ptr<const Snapshot> snapshot;
    Layout layout;
  };
  // The entry of `s` (alive, so a match is that very snapshot), or null.
  Entry* Find(const std::shared_ptr<const Snapshot>& s);

  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // Oldest first.
};

class WatchHub {
 public:
  WatchHub(const SnapshotStore* store, WatchOptions options, ApiCounters* counters);
  // The server must be shut down first (every stream done).
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // A stream for one call, counted against the limits under `caller_key`; a refused one is
  // already finished (RESOURCE_EXHAUSTED naming the limit, UNAVAILABLE before the first
  // inventory). `who` names the caller in messages.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Open(grpc::CallbackServerContext* ctx,
                                                   const std::string& caller_key,
                                                   const std::string& who);
  // A call refused before it became a stream (a request that does not parse).
  static grpc::ServerWriteReactor<grpc::ByteBuffer>* Refuse(grpc::Status status);

 private:
  class Stream;
  void Pump();
  void Wake();
  void Close(Stream* s);  // From the stream's OnDone.

  const SnapshotStore* store_;
  const WatchOptions opt_;
  ApiCounters* counters_;
  int subscription_ = -1;
  WatchEventCache events_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = false;
  bool stop_ = false;
  std::set<Stream*> streams_;
  std::map<std::string, size_t> by_caller_;
  std::thread pump_;
};

}  // namespace fabric
