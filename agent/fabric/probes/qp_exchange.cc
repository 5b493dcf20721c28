#include "agent/fabric/probes/qp_exchange.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "agent/common/status.h"

namespace fabric::probes {

absl::Status ExchangeQpEndpoints(Channel& ch, VerbsResources& verbs) {
  const ProbeParams& p = verbs.params();
  const ibv_port_attr& port_attr = verbs.port_attr();
  const uint32_t nq = verbs.num_qps();
  wire::QpInfo mine;
  mine.mtu = static_cast<uint8_t>(port_attr.active_mtu);
  mine.global = verbs.global();
  for (uint32_t q = 0; q < nq; ++q) {
    wire::QpEndpoint e;
    e.qpn = verbs.qp(q)->qp_num;
    e.psn = verbs.psn(q);
    std::memcpy(e.gid.data(), verbs.gid().raw, 16);
    e.lid = port_attr.lid;
    e.rkey = verbs.rkey();
    e.addr = reinterpret_cast<uintptr_t>(verbs.inbox(q));
    e.size = p.size;
    mine.qps.push_back(e);
  }
  absl::StatusOr<wire::QpInfo> theirs;
  if (verbs.client()) {
    FABRIC_RETURN_IF_ERROR(ch.Send(mine));
    theirs = ch.RecvAs<wire::QpInfo>("the server's QP endpoints");
  } else {
    theirs = ch.RecvAs<wire::QpInfo>("the client's QP endpoints");
    if (theirs.ok()) FABRIC_RETURN_IF_ERROR(ch.Send(mine));
  }
  if (!theirs.ok()) return theirs.status();
  if (theirs->qps.size() != nq) {
    return absl::InvalidArgumentError(
        absl::StrCat("the peer sent ", theirs->qps.size(), " QP endpoints, expected ", nq));
  }
  for (const wire::QpEndpoint& e : theirs->qps) {
    if (e.size < p.size) {
      return absl::InvalidArgumentError("the peer's buffer is smaller than the message size");
    }
  }
  verbs.set_remote(theirs->qps);
  if (!p.rdma_cm) {
    const auto mtu = static_cast<ibv_mtu>(std::min<int>(port_attr.active_mtu, theirs->mtu));
    const bool global = verbs.global() || theirs->global;
    for (uint32_t q = 0; q < nq; ++q) {
      FABRIC_RETURN_IF_ERROR(verbs.ToRtr(verbs.qp(q), verbs.remote(q), mtu, global));
      FABRIC_RETURN_IF_ERROR(verbs.ToRts(verbs.qp(q), verbs.psn(q)));
    }
  }
  return absl::OkStatus();
}

absl::Status Barrier(Channel& ch, bool client, uint32_t phase) {
  if (client) FABRIC_RETURN_IF_ERROR(ch.Send(wire::Sync{phase}));
  absl::StatusOr<wire::Sync> s =
      ch.RecvAs<wire::Sync>(client ? "the server's barrier" : "the client's barrier");
  if (!s.ok()) return s.status();
  if (s->phase != phase) return absl::InvalidArgumentError("barrier phase mismatch");
  return client ? absl::OkStatus() : ch.Send(wire::Sync{phase});
}

}  // namespace fabric::probes
