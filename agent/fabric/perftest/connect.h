// Internal: perftest's exchange up to connected QPs (peer.cc runs the tests over it):
// the version, system data, MTU and parameters, the QPs' keys, the connection (verbs or rdma_cm),
// and the report exchange after a bandwidth run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/fabric/perftest/figures.h"
#include "agent/fabric/perftest/oob.h"
#include "agent/fabric/perftest/options.h"
#include "agent/fabric/perftest/wire.h"
#include "agent/fabric/probes/engine.h"
#include "agent/fabric/probes/verbs_resources.h"

namespace fabric::probes {

// How the keys travel: as text over TCP (with the GID or without: each side reads the form its
// own settings imply), as perftest's binary struct over rdma_cm (56 bytes, 64 with 6.29 peers).
struct KeyForm {
  bool cm = false;
  bool gid = false;
  size_t cm_size = 56;
  int gid_index = -1;
};

// One round of keys, QP by QP; the peer's are returned.
absl::StatusOr<std::vector<perftest::Key>> SwapKeys(PerftestOob& oob,
                                                    const std::vector<perftest::Key>& mine,
                                                    const KeyForm& form, size_t count,
                                                    absl::Duration bound);

// Both ends after the accept or connect: the prologue, the memory and QPs, the keys (twice, as
// perftest prints them) and the QPs connected, then one more swap on QP 0: both are ready.
struct Connected {
  std::string peer_version;
  ibv_mtu mtu = IBV_MTU_1024;
  uint16_t out_reads = 0;
  std::vector<perftest::Key> mine;
  KeyForm keys;
};
absl::StatusOr<Connected> Connect(PerftestOob& oob, const PerftestServerOptions& o,
                                  VerbsResources& verbs, const Canceller* cancel);

// The reports, a field per exchange: `mine` out, the peer's back.
absl::StatusOr<perftest::BwReport> SwapReports(PerftestOob& oob, const perftest::BwReport& mine);

}  // namespace fabric::probes
