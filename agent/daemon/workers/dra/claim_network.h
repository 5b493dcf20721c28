// The network data of prepared claims, written into their status (status.devices[].networkData):
// for each claim the kubelet plugin prepared, the interfaces that fabric-cni's pod records put on
// its NICs in the claim's pods (agent/publish/podrecord). The records appear after the claim is
// prepared (the kubelet prepares before it creates the pod's sandbox, whose CNI ADD writes them),
// so the plugin's worker calls Tick until they do: a claim no record names within `give_up` is
// dropped (its pods have no interface of those NICs, or a runtime that does not say its pod's
// UID), one written is kept until unprepared and written again when its pods' records change.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/publish/dra/claim.h"
#include "agent/publish/kubeapi/api_client.h"

namespace fabric {

class ClaimNetwork {
 public:
  // `api` outlives this; `records_dir` is fabric-cni's (<envDir>/pods).
  ClaimNetwork(kubeapi::KubeApi* api, std::string records_dir,
               absl::Duration give_up = absl::Minutes(10))
      : api_(api), dir_(std::move(records_dir)), give_up_(give_up) {}

  // Any thread: a claim prepared with these devices, from now on.
  void Track(const dra::ParsedClaim& claim, std::vector<dra::PreparedDevice> devices,
             absl::Time now);
  void Forget(const std::string& uid);

  // The worker's pass: reads the records (when a claim waits and the directory changed) and
  // writes each claim whose network data changed. Returns the claims written.
  int Tick(absl::Time now);

 private:
  struct Entry {
    dra::ParsedClaim claim;
    std::vector<dra::PreparedDevice> devices;
    absl::Time since;
    std::string written;     // The network data last written (or found there), as a key.
    std::string error;       // The last write's error: logged once, not every pass.
    int64_t looked_at = -1;  // The records' version it was last matched against.
  };
  // records_ as the directory holds them now, read again only when it changed.
  void ReadRecords();
  // OK with whether the claim's status changed; an error the log says.
  absl::StatusOr<bool> Write(const Entry& e, const std::vector<dra::DeviceNetwork>& net);

  kubeapi::KubeApi* const api_;
  const std::string dir_;
  const absl::Duration give_up_;
  std::mutex mu_;
  std::map<std::string, Entry> claims_;  // By UID.
  // Worker thread only: the records as last read, and the directory's change time then.
  std::vector<podrecord::PodRecord> records_;
  int64_t dir_changed_ns_ = -1;
  int64_t records_version_ = 0;  // Counts the reads that changed records_.
};

}  // namespace fabric
