#include "agent/fabric/probes/verbs_resources.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/status.h"
#include "agent/fabric/probes/numa.h"
#include "agent/hostfs/host_fs.h"
#include "agent/rdma/gid_choice.h"

namespace fabric::probes {

VerbsResources::VerbsResources(bool client, const ProbeParams& p, const Endpoint& local)
    : client_(client), p_(p), local_(local) {
  port_ = local_.ib_port;
  regions_ = latency() ? 2 : 1;
  stride_ = (p_.size + 63) / 64 * 64;
  if (VerbOf(p_.test) == Verb::kSend) {
    // perftest's: no more receives than the run's messages on a QP (by iterations).
    rx_depth_ = latency()            ? 2
                : p_.duration_mode() ? kRxDepthSendBw
                                     : static_cast<uint32_t>(std::min<uint64_t>(
                                           kRxDepthSendBw, std::max<uint64_t>(p_.iterations, 16)));
  }
}

absl::Status VerbsResources::OpenDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no RDMA support on this host (ibv_get_device_list: ", ErrnoText(errno), ")"));
  }
  std::unique_ptr<ibv_device*, decltype(&ibv_free_device_list)> owned(list, ibv_free_device_list);
  ibv_device* dev = nullptr;
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    names.emplace_back(ibv_get_device_name(list[i]));
    if (dev == nullptr && (local_.device.empty() || local_.device == names.back())) dev = list[i];
  }
  if (dev == nullptr) {
    if (n == 0) return absl::NotFoundError("no RDMA device on this host");
    return absl::NotFoundError(absl::StrCat("no RDMA device '", local_.device,
                                            "' (this host has: ", absl::StrJoin(names, ", "), ")"));
  }
  device_ = ibv_get_device_name(dev);
  ctx_ = ibv_open_device(dev);
  if (ctx_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("ibv_open_device ", device_, ": ", ErrnoText(errno)));
  }
  objects_->context = Context(ctx_, "ibv_close_device", errors_);
  FABRIC_RETURN_IF_ERROR(QueryDevice());
  FABRIC_RETURN_IF_ERROR(Place());
  if (port_attr_.state != IBV_PORT_ACTIVE) {
    return absl::FailedPreconditionError(absl::StrCat(
        device_, " port ", port_, " is ", ibv_port_state_str(port_attr_.state), ", not ACTIVE"));
  }
  const bool ethernet = port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (local_.gid_index) {
    gid_index_ = *local_.gid_index;
  } else {
    HostFsImpl sysfs(local_.sysfs);
    absl::StatusOr<int> g = rdma::ChooseGidIndexFromSysfs(sysfs, device_, port_);
    if (!g.ok()) {
      return absl::Status(g.status().code(),
                          absl::StrCat(device_, " port ", port_, ": ", g.status().message()));
    }
    gid_index_ = *g;
  }
  if (gid_index_ < 0 || gid_index_ >= port_attr_.gid_tbl_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("GID index ", gid_index_, " outside 0..", port_attr_.gid_tbl_len - 1));
  }
  if (int rc = ibv_query_gid(ctx_, port_, gid_index_, &gid_); rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_query_gid ", gid_index_, ": ", ErrnoText(errno)));
  }
  // RoCE always routes by GID; InfiniBand by LID unless a GID index was asked for.
  global_ = ethernet || local_.gid_index.has_value();
  return absl::OkStatus();
}

void VerbsResources::UseDevice(ibv_context* ctx, uint8_t port) {
  ctx_ = ctx;
  device_ = ibv_get_device_name(ctx_->device);
  port_ = port;
}

absl::Status VerbsResources::QueryDevice() {
  if (int rc = ibv_query_device(ctx_, &dev_attr_); rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_query_device: ", ErrnoText(rc)));
  }
  if (port_ < 1 || port_ > dev_attr_.phys_port_cnt) {
    return absl::InvalidArgumentError(absl::StrCat(device_, " has no port ", port_, " (ports 1..",
                                                   int{dev_attr_.phys_port_cnt}, ")"));
  }
  if (int rc = ibv_query_port(ctx_, port_, &port_attr_); rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_query_port ", port_, ": ", ErrnoText(rc)));
  }
  return absl::OkStatus();
}

absl::Status VerbsResources::Place() {
  if (local_.placement.mode == Placement::Mode::kNone) return absl::OkStatus();
  std::unique_ptr<NumaOs> os = MakeNumaOs();
  absl::StatusOr<std::string> where =
      probes::Place(local_.placement, HostFsImpl(local_.sysfs), device_, *os);
  if (!where.ok()) return where.status();
  placement_ = *std::move(where);
  return absl::OkStatus();
}

absl::Status VerbsResources::SetupMemory() {
  const uint64_t tx = p_.tx_depth;
  if (tx > static_cast<uint64_t>(dev_attr_.max_qp_wr) ||
      rx_depth_ > static_cast<uint32_t>(dev_attr_.max_qp_wr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tx depth ", tx, " above ", device_, "'s limit of ", dev_attr_.max_qp_wr));
  }
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  if (pd == nullptr) return absl::InternalError(absl::StrCat("ibv_alloc_pd: ", ErrnoText(errno)));
  objects_->pd = Pd(pd, "ibv_dealloc_pd", errors_);

  const size_t bytes = stride_ * regions_ * p_.num_qps;
  constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (local_.gpu) {
    absl::StatusOr<std::unique_ptr<gpumem::RegisteredGpuMemory>> gpu =
        gpumem::AllocateRegistered(pd, *local_.gpu, bytes, kAccess);
    if (!gpu.ok()) return gpu.status();
    objects_->gpu = *std::move(gpu);
    base_ = reinterpret_cast<uint8_t*>(objects_->gpu->address());
    mr_ = objects_->gpu->mr();
    return CreateCqs();
  }
  void* mem = nullptr;
  const long page = sysconf(_SC_PAGESIZE);
  if (int rc = posix_memalign(&mem, page > 0 ? static_cast<size_t>(page) : 4096, bytes); rc != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
  }
  std::memset(mem, 0, bytes);
  objects_->buffer = Buffer(static_cast<uint8_t*>(mem), "free buffer", errors_);
  ibv_mr* mr = ibv_reg_mr(pd, mem, bytes, kAccess);
  if (mr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("ibv_reg_mr of ", bytes,
                                                     " bytes: ", ErrnoText(errno),
                                                     " (locked memory limit: ulimit -l?)"));
  }
  objects_->mr = Mr(mr, "ibv_dereg_mr", errors_);
  base_ = static_cast<uint8_t*>(mem);
  mr_ = mr;
  return CreateCqs();
}

absl::Status VerbsResources::CreateCqs() {
  const uint64_t tx = p_.tx_depth;
  const int scq = static_cast<int>(std::min<uint64_t>(tx * p_.num_qps + 1, dev_attr_.max_cqe));
  ibv_cq* send_cq = ibv_create_cq(ctx_, scq, nullptr, nullptr, 0);
  if (send_cq == nullptr) {
    return absl::InternalError(absl::StrCat("ibv_create_cq: ", ErrnoText(errno)));
  }
  objects_->send_cq = Cq(send_cq, "ibv_destroy_cq (send)", errors_);
  const int rcq =
      static_cast<int>(std::min<uint64_t>(uint64_t{rx_depth_} * p_.num_qps + 1, dev_attr_.max_cqe));
  ibv_cq* recv_cq = ibv_create_cq(ctx_, rcq, nullptr, nullptr, 0);
  if (recv_cq == nullptr) {
    return absl::InternalError(absl::StrCat("ibv_create_cq: ", ErrnoText(errno)));
  }
  objects_->recv_cq = Cq(recv_cq, "ibv_destroy_cq (recv)", errors_);
  return absl::OkStatus();
}

absl::Status VerbsResources::CreateQp(QpObjects& slot, rdma_cm_id* id) {
  ibv_qp_init_attr a{};
  a.send_cq = send_cq();
  a.recv_cq = recv_cq();
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 0;
  a.cap.max_send_wr = p_.tx_depth;
  a.cap.max_recv_wr = rx_depth_;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = p_.inline_size;
  ibv_qp* qp = nullptr;
  if (id != nullptr) {
    if (rdma_create_qp(id, objects_->pd.get(), &a) != 0) {
      return absl::InternalError(
          absl::StrCat("rdma_create_qp: ", ErrnoText(errno),
                       p_.inline_size > 0 ? " (inline size too large?)" : ""));
    }
    qp = id->qp;
    slot.cm_qp = CmQp(id, "rdma_destroy_qp", errors_);
  } else {
    qp = ibv_create_qp(objects_->pd.get(), &a);
    if (qp == nullptr) {
      return absl::InternalError(
          absl::StrCat("ibv_create_qp: ", ErrnoText(errno),
                       p_.inline_size > 0 ? absl::StrCat(" (inline size ", p_.inline_size,
                                                         " too large for this device? try -I 0)")
                                          : ""));
    }
    slot.qp = Qp(qp, "ibv_destroy_qp", errors_);
  }
  qps_.push_back(qp);
  static thread_local std::mt19937 rng{std::random_device{}()};
  psns_.push_back(rng() & 0xffffff);
  return absl::OkStatus();
}

absl::Status VerbsResources::ToInit(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = port_;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (int rc = ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_modify_qp to INIT: ", ErrnoText(rc)));
  }
  return absl::OkStatus();
}

absl::Status VerbsResources::ToRtr(ibv_qp* qp, const wire::QpEndpoint& remote, ibv_mtu mtu,
                                   bool global) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu;
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = static_cast<uint8_t>(std::clamp(dev_attr_.max_qp_rd_atom, 1, 16));
  a.min_rnr_timer = kMinRnrTimer;
  a.ah_attr.dlid = remote.lid;
  a.ah_attr.sl = 0;
  a.ah_attr.port_num = port_;
  if (global) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
    a.ah_attr.grh.hop_limit = 64;
  }
  if (int rc = ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_modify_qp to RTR: ", ErrnoText(rc)));
  }
  return absl::OkStatus();
}

absl::Status VerbsResources::ToRts(ibv_qp* qp, uint32_t psn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = kAckTimeout;
  a.retry_cnt = kRetryCount;
  a.rnr_retry = RnrRetryFor(p_.test);
  a.sq_psn = psn;
  a.max_rd_atomic = static_cast<uint8_t>(std::clamp(dev_attr_.max_qp_init_rd_atom, 1, 16));
  if (int rc = ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_modify_qp to RTS: ", ErrnoText(rc)));
  }
  return absl::OkStatus();
}

absl::Status VerbsResources::Release() {
  // GPU memory says what failed itself; its MR goes after the QPs, as a host buffer's.
  absl::Status gpu;
  if (objects_ && objects_->gpu) {
    PopBackToFront(objects_->qps);
    gpu = objects_->gpu->Release();
  }
  objects_.reset();
  absl::Status rest = errors_.Take();
  if (gpu.ok()) return rest;
  if (rest.ok()) return gpu;
  return absl::InternalError(absl::StrCat(gpu.message(), "; ", rest.message()));
}

absl::Status VerbsResources::DropLastQp() {
  if (objects_->qps.empty()) return absl::OkStatus();
  // A slot whose QP was not created yet has no entry in qps_.
  if (objects_->qps.size() == qps_.size()) {
    qps_.pop_back();
    psns_.pop_back();
  }
  objects_->qps.pop_back();
  return errors_.Take();
}

absl::Status VerbsResources::PostRecv(uint32_t q) {
  // The whole region, not this run's size: with -a a receive posted for one size takes the next
  // size's message.
  ibv_sge sge = Sge(inbox(q), stride_);
  ibv_recv_wr wr{};
  wr.wr_id = q;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qps_[q], &wr, &bad); rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_post_recv: ", ErrnoText(rc)));
  }
  return absl::OkStatus();
}

ibv_send_wr VerbsResources::WorkRequest(uint32_t q, ibv_sge& sge, unsigned flags) const {
  const Verb verb = VerbOf(p_.test);
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = verb == Verb::kWrite  ? IBV_WR_RDMA_WRITE
              : verb == Verb::kRead ? IBV_WR_RDMA_READ
                                    : IBV_WR_SEND;
  // Reads cannot be inlined: the data comes from the peer.
  wr.send_flags =
      flags | ((verb != Verb::kRead && p_.size <= p_.inline_size) ? IBV_SEND_INLINE : 0);
  // A send ignores the remote address and key.
  wr.wr.rdma.remote_addr = remote_[q].addr;
  wr.wr.rdma.rkey = remote_[q].rkey;
  return wr;
}

absl::Status VerbsResources::PostSend(uint32_t q, ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qps_[q], wr, &bad); rc != 0) {
    return absl::UnavailableError(absl::StrCat("ibv_post_send: ", ErrnoText(rc)));
  }
  return absl::OkStatus();
}

absl::Status VerbsResources::PostInitialRecvs() {
  if (VerbOf(p_.test) != Verb::kSend) return absl::OkStatus();
  // send_bw: only the server receives; send_lat: both sides.
  if (!latency() && client_) return absl::OkStatus();
  return PostRecvs();
}

absl::Status VerbsResources::PostRecvs() {
  for (uint32_t q = 0; q < qps_.size(); ++q) {
    for (uint32_t i = 0; i < rx_depth_; ++i) FABRIC_RETURN_IF_ERROR(PostRecv(q));
  }
  return absl::OkStatus();
}

}  // namespace fabric::probes
