#include "agent/fabric/perftest/connect.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "agent/common/status.h"
#include "agent/fabric/probes/rdma_cm.h"

namespace fabric::probes {

namespace pt = ::fabric::perftest;

namespace {

static_assert(sizeof(ibv_device_attr) == pt::kDeviceAttrSize,
              "perftest sends struct ibv_device_attr raw");

// -m's bytes as the verbs enum (256 -> IBV_MTU_256 = 1, ... 4096 -> 5); the CLI admits only those.
ibv_mtu MtuEnum(int bytes) {
  int e = 1;
  while (e < 5 && (128 << e) < bytes) ++e;
  return static_cast<ibv_mtu>(e);
}

uint32_t CacheLine() {
  const long n = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
  return n > 0 ? static_cast<uint32_t>(n) : 64;
}

pt::Negotiate LocalNegotiate(const PerftestServerOptions& o, const ibv_device_attr& attr) {
  pt::Negotiate n;
  n.test_method = o.params.all_sizes ? pt::kMethodAll : pt::kMethodRegular;
  n.verb = PerftestVerb(o.params.test);
  n.tst = IsLatency(o.params.test) ? pt::kTstLatency : pt::kTstBandwidth;
  n.report_fmt = o.gbits ? pt::kReportGbits : pt::kReportMbytes;
  n.size = o.params.size;
  n.test_type = o.params.duration_mode() ? pt::kDuration : pt::kIterations;
  n.iters = o.params.duration_mode() ? 0 : o.params.iterations;
  n.num_of_qps = static_cast<int32_t>(o.params.num_qps);
  // perftest's -D is the whole run: the window and a margin either side (PerftestParams).
  n.duration =
      o.params.duration_mode()
          ? static_cast<int32_t>(absl::ToInt64Seconds(o.params.duration + 2 * o.params.margin))
          : 5;
  std::memcpy(n.device_attr.data(), &attr, sizeof attr);
  return n;
}

// Version, system data, MTU and (6.28+) the parameters; returns the MTU both use.
absl::StatusOr<ibv_mtu> Prologue(PerftestOob& oob, const PerftestServerOptions& o,
                                 const VerbsResources& verbs, pt::Version* peer,
                                 uint32_t* cycle_buffer, uint16_t* out_reads) {
  const auto ours = pt::EncodeVersion(pt::kOurVersion);
  std::array<uint8_t, pt::kVersionSize> theirs{};
  FABRIC_RETURN_IF_ERROR(oob.Exchange(ours, theirs, "waiting for the perftest version"));
  absl::StatusOr<pt::Version> v = pt::DecodeVersion(theirs);
  if (!v.ok()) return v.status();
  *peer = *v;

  std::array<uint8_t, 4> in{};
  const long page = sysconf(_SC_PAGESIZE);
  FABRIC_RETURN_IF_ERROR(oob.Exchange(pt::EncodeU32(page > 0 ? static_cast<uint32_t>(page) : 4096),
                                      in, "waiting for the page size"));
  absl::StatusOr<uint32_t> their_page = pt::DecodePageSize(in);
  if (!their_page.ok()) return their_page.status();
  *cycle_buffer = std::max<uint32_t>(*their_page, page > 0 ? page : 4096);
  FABRIC_RETURN_IF_ERROR(
      oob.Exchange(pt::EncodeU32(CacheLine()), in, "waiting for the cache line size"));

  int my_mtu = static_cast<int>(verbs.port_attr().active_mtu);
  if (o.mtu > 0) my_mtu = std::min(my_mtu, static_cast<int>(MtuEnum(o.mtu)));
  std::array<uint8_t, pt::kMtuSize> mtu_in{};
  FABRIC_RETURN_IF_ERROR(oob.Exchange(pt::EncodeMtu(my_mtu), mtu_in, "waiting for the MTU"));
  absl::StatusOr<int> their_mtu = pt::DecodeMtu(mtu_in);
  if (!their_mtu.ok()) return their_mtu.status();

  *out_reads = static_cast<uint16_t>(std::clamp(verbs.device_attr().max_qp_rd_atom, 1, 0xffff));
  if (pt::Negotiates(*peer)) {
    // 320 bytes from perftest builds with mlx5dv (the usual), else 312, and nothing says which:
    // a client sends the larger; a server reads what came and answers in its size.
    constexpr char kWhat[] = "waiting for the negotiated parameters";
    pt::Negotiate local = LocalNegotiate(o, verbs.device_attr());
    if (oob.client()) FABRIC_RETURN_IF_ERROR(oob.Write(pt::EncodeNegotiate(local), kWhat));
    absl::StatusOr<std::vector<uint8_t>> remote = oob.ReadNegotiation(kWhat);
    if (!remote.ok()) return remote.status();
    if (!oob.client()) {
      local.mlx5dv = remote->size() == pt::kNegotiateSizeMlx5dv;
      FABRIC_RETURN_IF_ERROR(oob.Write(pt::EncodeNegotiate(local), kWhat));
    }
    absl::StatusOr<pt::Negotiate> r = pt::DecodeNegotiate(*remote);
    if (!r.ok()) return r.status();
    if (std::optional<std::string> differs = pt::FirstMismatch(local, *r)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the perftest ", peer->text, oob.client() ? " server" : " client",
                       " runs another test:", *differs, " (give both ends the same flags)"));
    }
    if (r->MaxQpRdAtom() > 0 && r->MaxQpRdAtom() < *out_reads) {
      *out_reads = static_cast<uint16_t>(r->MaxQpRdAtom());
    }
  }
  return static_cast<ibv_mtu>(std::min(my_mtu, *their_mtu));
}

wire::QpEndpoint EndpointOf(const pt::Key& k) {
  wire::QpEndpoint e;
  e.qpn = k.qpn;
  e.psn = k.psn;
  e.gid = k.gid;
  e.lid = k.lid;
  e.rkey = k.rkey;
  e.addr = k.vaddr;
  return e;
}

// The QPs, connected by rdma_cm (-R) between two swaps of empty keys, as perftest's
// create_rdma_cm_connection does: the server listens on the exchange's port, which the
// exchange's listener has freed; the client tries again while it is not listening yet.
absl::Status ConnectByRdmaCm(PerftestOob& oob, const PerftestServerOptions& o,
                             VerbsResources& verbs, const KeyForm& keys, const Canceller* cancel) {
  const std::vector<pt::Key> empty(1);
  RdmaCm cm(verbs, o.local, cancel);
  const bool server = !oob.client();
  if (server) FABRIC_RETURN_IF_ERROR(cm.Open(/*server=*/true, o.bind, o.port));
  FABRIC_RETURN_IF_ERROR(SwapKeys(oob, empty, keys, 1, o.local.timeout).status());
  if (server) {
    FABRIC_RETURN_IF_ERROR(cm.Accept(/*only_from=*/oob.peer()));
  } else {
    FABRIC_RETURN_IF_ERROR(cm.Open(/*server=*/false, "", 0));
    FABRIC_RETURN_IF_ERROR(cm.Connect(oob.peer(), o.port, Deadline::In(o.local.timeout)));
  }
  return SwapKeys(oob, empty, keys, 1, o.local.timeout).status();
}

}  // namespace

// One round of keys, QP by QP; the peer's are returned.
absl::StatusOr<std::vector<pt::Key>> SwapKeys(PerftestOob& oob, const std::vector<pt::Key>& mine,
                                              const KeyForm& form, size_t count,
                                              absl::Duration bound) {
  std::vector<pt::Key> theirs;
  std::vector<uint8_t> in(form.cm ? form.cm_size : pt::KeySize(form.gid));
  for (size_t q = 0; q < count; ++q) {
    const std::vector<uint8_t> out = form.cm ? pt::EncodeCmKey(mine[q], form.gid_index, in.size())
                                             : pt::EncodeKey(mine[q], form.gid);
    FABRIC_RETURN_IF_ERROR(oob.Exchange(out, in, "waiting for the QP keys", bound));
    absl::StatusOr<pt::Key> k = form.cm ? pt::DecodeCmKey(in) : pt::DecodeKey(in, form.gid);
    if (!k.ok()) return k.status();
    theirs.push_back(*k);
  }
  return theirs;
}

absl::StatusOr<Connected> Connect(PerftestOob& oob, const PerftestServerOptions& o,
                                  VerbsResources& verbs, const Canceller* cancel) {
  pt::Version peer;
  uint32_t cycle_buffer = 0;
  uint16_t out_reads = 0;
  absl::StatusOr<ibv_mtu> mtu = Prologue(oob, o, verbs, &peer, &cycle_buffer, &out_reads);
  if (!mtu.ok()) return mtu.status();
  Connected c;
  c.peer_version = peer.text;
  c.mtu = *mtu;
  c.out_reads = out_reads;
  c.keys.cm = o.params.rdma_cm;
  c.keys.gid = verbs.global();
  c.keys.cm_size = pt::CmKeySize(peer);
  c.keys.gid_index = verbs.gid_index();
  // Small messages land at successive cache lines within the peer's cycle buffer.
  verbs.set_min_region(std::max<uint64_t>(o.params.size, cycle_buffer));
  FABRIC_RETURN_IF_ERROR(verbs.SetupMemory());
  const uint32_t n = o.params.num_qps;
  if (o.params.rdma_cm) {
    FABRIC_RETURN_IF_ERROR(ConnectByRdmaCm(oob, o, verbs, c.keys, cancel));
  } else {
    for (uint32_t q = 0; q < n; ++q) {
      FABRIC_RETURN_IF_ERROR(verbs.CreateQp(verbs.objects().qps.emplace_back(), nullptr));
      FABRIC_RETURN_IF_ERROR(verbs.ToInit(verbs.qp(q)));
    }
  }
  for (uint32_t q = 0; q < n; ++q) {
    pt::Key k;
    k.lid = verbs.port_attr().lid;
    k.out_reads = out_reads;
    k.qpn = verbs.qp(q)->qp_num;
    k.psn = verbs.psn(q);
    k.rkey = verbs.rkey();
    k.vaddr = reinterpret_cast<uintptr_t>(verbs.inbox(q));
    std::memcpy(k.gid.data(), verbs.gid().raw, 16);
    c.mine.push_back(k);
  }
  const bool send = VerbOf(o.params.test) == Verb::kSend;
  // write_lat and read_lat swap QP 0's keys once more before the round of all QPs.
  if (IsLatency(o.params.test) && !send) {
    FABRIC_RETURN_IF_ERROR(SwapKeys(oob, c.mine, c.keys, 1, o.local.timeout).status());
  }
  absl::StatusOr<std::vector<pt::Key>> theirs = SwapKeys(oob, c.mine, c.keys, n, o.local.timeout);
  if (!theirs.ok()) return theirs.status();
  std::vector<wire::QpEndpoint> remote;
  for (const pt::Key& k : *theirs) remote.push_back(EndpointOf(k));
  verbs.set_remote(remote);
  if (!o.params.rdma_cm) {  // rdma_cm has brought them to RTS
    for (uint32_t q = 0; q < n; ++q) {
      FABRIC_RETURN_IF_ERROR(verbs.ToRtr(verbs.qp(q), verbs.remote(q), *mtu, c.keys.gid));
      FABRIC_RETURN_IF_ERROR(verbs.ToRts(verbs.qp(q), verbs.psn(q)));
    }
  }
  // Then every QP's keys again (perftest prints them) and QP 0's once more: send_bw and send_lat
  // swap QP 0's first.
  const uint32_t first = send ? 1 : n, second = send ? n : 1;
  FABRIC_RETURN_IF_ERROR(SwapKeys(oob, c.mine, c.keys, first, o.local.timeout).status());
  FABRIC_RETURN_IF_ERROR(SwapKeys(oob, c.mine, c.keys, second, o.local.timeout).status());
  return c;
}

// The reports, a field per exchange: `mine` out, the peer's back.
absl::StatusOr<pt::BwReport> SwapReports(PerftestOob& oob, const pt::BwReport& mine) {
  std::vector<uint8_t> report;
  for (const auto& field : pt::EncodeBwReport(mine)) {
    std::array<uint8_t, pt::kBwReportFieldSize> in{};
    FABRIC_RETURN_IF_ERROR(oob.Exchange(field, in, "waiting for the report"));
    report.insert(report.end(), in.begin(), in.end());
  }
  return pt::DecodeBwReport(report);
}

}  // namespace fabric::probes
