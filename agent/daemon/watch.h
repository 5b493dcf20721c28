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

#include "absl/time/time.h"
#include "agent/daemon/snapshot.h"
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
// The event, serialized, that a watcher who last saw `last` (null: nothing yet) gets for `next`:
// the whole inventory, and the changes since `last` (so a slow client that skipped generations
// still learns everything that changed).
std::shared_ptr<const std::string> WatchEventBytes(const Snapshot* last, const Snapshot& next);

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

  std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = false;
  bool stop_ = false;
  std::set<Stream*> streams_;
  std::map<std::string, size_t> by_caller_;
  std::thread pump_;
};

}  // namespace fabric
