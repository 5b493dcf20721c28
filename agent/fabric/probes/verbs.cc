// The RDMA engine: libibverbs RC queue pairs, connected over the out-of-band channel (or by
// rdma_cm with -R), and perftest's measurement loops.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/log.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"
#include "agent/fabric/probes/engine.h"
#include "agent/fabric/probes/gid.h"
#include "agent/fabric/probes/verbs_handles.h"
#include "agent/inventory/hostfs/host_fs.h"

namespace fabric::probes {
namespace {

// RC attributes, set on purpose (see README.md):
// - min_rnr_timer 12 = 0.64 ms: how long a sender backs off when a receive is missing. 0 would
//   mean 655 ms, which turns one late repost into a latency outlier of two thirds of a second.
constexpr uint8_t kMinRnrTimer = 12;
// - timeout 14 = 4.096 us x 2^14 = 67 ms per transport retry, retry_cnt 7: a peer that vanished
//   fails the QP with RETRY_EXC_ERR after about half a second (some HCAs take longer).
constexpr uint8_t kAckTimeout = 14;
constexpr uint8_t kRetryCount = 7;
// - rnr_retry 7 (retry forever) only for send_bw, where the receiver reposts in a loop and may
//   fall behind a burst: that is flow control, not failure, and the completion wait still bounds
//   the test. Elsewhere no receive can be missing (write/read consume none; send_lat reposts
//   before it replies), so an RNR there is a bug and fails after 3 retries.
constexpr uint8_t kRnrRetrySendBw = 7;
constexpr uint8_t kRnrRetry = 3;
constexpr uint32_t kRxDepthSendBw = 512;  // perftest's receive depth for send_bw
constexpr int kPollBatch = 16;
constexpr uint8_t kStopMark = 0xff;
constexpr int kQpShift = 40;  // wr_id = qp index << 40 | message sequence number
constexpr uint64_t kSeqMask = (uint64_t{1} << kQpShift) - 1;

// The ping-pong marker of message k in the last byte: 1..127, never the stop mark, never the
// previous message's value.
inline uint8_t Seq(uint64_t k) { return static_cast<uint8_t>((k - 1) % 127 + 1); }

std::string Errno(int e) { return std::strerror(e); }

std::string WcError(const ibv_wc& wc, std::string_view where) {
  std::string hint;
  switch (wc.status) {
    case IBV_WC_RETRY_EXC_ERR:
      hint = " (the peer stopped answering: it is gone or unreachable)";
      break;
    case IBV_WC_RNR_RETRY_EXC_ERR:
      hint = " (the peer had no receive posted)";
      break;
    case IBV_WC_REM_ACCESS_ERR:
      hint = " (the peer rejected the rkey or address)";
      break;
    case IBV_WC_WR_FLUSH_ERR:
      hint = " (the QP had already failed)";
      break;
    default:
      break;
  }
  return absl::StrCat(Av(where), ": completion error '", ibv_wc_status_str(wc.status), "'", hint,
                      " (vendor error 0x", absl::Hex(wc.vendor_err), ")");
}

uint8_t RnrRetryFor(TestKind t) { return t == TestKind::kSendBw ? kRnrRetrySendBw : kRnrRetry; }

// Bounds a spin: expired once `timeout` passes without Progress(), on cancel, or when the
// peer closes the control connection or sends anything but a successful Done on it (no message
// is due during the measurement). The clock is read once every 64 idle ticks and the connection
// polled at most every 20 ms, so the spin stays tight.
class Spin {
 public:
  Spin(absl::Duration timeout, const Canceller* cancel, const Channel* watch = nullptr)
      : timeout_ns_(absl::ToInt64Nanoseconds(timeout)), cancel_(cancel), watch_(watch) {
    deadline_ = NowNs() + timeout_ns_;
    next_watch_ = deadline_ - timeout_ns_ + kWatchEveryNs;
  }
  void Progress() { progressed_ = true; }
  bool Tick() {
    if ((++ticks_ & 63) != 0) return false;
    return Check();
  }
  absl::Status Why(std::string_view what) const {
    if (cancel_ != nullptr && cancel_->cancelled()) return absl::CancelledError("stopped");
    if (peer_spoke_) {
      return absl::UnavailableError(absl::StrCat(
          "the peer closed the control connection or reported a failure while this side waited "
          "for ",
          Av(what)));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("nothing happened for ", absl::FormatDuration(absl::Nanoseconds(timeout_ns_)),
                     " while waiting for ", Av(what), " (the peer is gone or stalled?)"));
  }

 private:
  static constexpr int64_t kWatchEveryNs = 20'000'000;
  bool Check() {
    if (cancel_ != nullptr && cancel_->cancelled()) return true;
    const int64_t now = NowNs();
    if (watch_ != nullptr && now >= next_watch_) {
      next_watch_ = now + kWatchEveryNs;
      switch (watch_->Peek()) {
        case Channel::Pending::kOther:
          peer_spoke_ = true;
          return true;
        case Channel::Pending::kSuccess:
          // The peer finished well, so what it sent last was acknowledged: its completion can
          // lag (rxe under load) but will come. Wait for it under the usual timeout.
          watch_ = nullptr;
          break;
        case Channel::Pending::kNothing:
        case Channel::Pending::kPartial:
          break;
      }
    }
    if (progressed_) {
      progressed_ = false;
      deadline_ = now + timeout_ns_;
      return false;
    }
    return now >= deadline_;
  }
  int64_t timeout_ns_;
  int64_t deadline_;
  int64_t next_watch_;
  const Canceller* cancel_;
  const Channel* watch_;
  uint64_t ticks_ = 0;
  bool progressed_ = false;
  bool peer_spoke_ = false;
};

struct CmEvent {
  rdma_cm_event_type event;
  int status;
  rdma_cm_id* id;
};

// Makes an IPv4-mapped IPv6 text plain IPv4 (rdma_cm binds plain IPv4 addresses).
std::string PlainAddress(std::string a) {
  if (a.rfind("::ffff:", 0) == 0 && a.find('.') != std::string::npos) return a.substr(7);
  return a;
}

// One QP's objects in creation order: with rdma_cm its id (the first QP's is
// VerbsObjects::first_id), the QP on it and the connection; without, the QP alone.
struct QpObjects {
  CmId id;
  CmQp cm_qp;
  Qp qp;
  CmConnection connection;
};

// Every object of one test. Members are declared in creation order, so they are destroyed in
// reverse.
struct VerbsObjects {
  ~VerbsObjects() { PopBackToFront(qps); }  // the newest QP first
  EventChannel channel;
  CmId listener;
  CmId first_id;    // rdma_cm: the memory below is set up on this id's device
  Context context;  // without rdma_cm (with it, the ids hold the device)
  Pd pd;
  Buffer buffer;
  Mr mr;
  Cq send_cq;
  Cq recv_cq;
  std::vector<QpObjects> qps;
};

class RdmaTestImpl final : public RdmaTest {
 public:
  RdmaTestImpl(Role role, const ProbeParams& p, const Endpoint& local, const Canceller* cancel)
      : role_(role), p_(p), local_(local), cancel_(cancel) {}
  ~RdmaTestImpl() override = default;

  absl::Status Init(const std::string& cm_bind);

  uint16_t cm_port() const override { return cm_port_; }
  absl::Status Connect(Channel& ch, const std::string& peer, uint16_t cm_port) override;
  absl::StatusOr<Measurement> RunClient() override;
  absl::Status RunServer(Channel& ch) override;
  absl::Status Release() override {
    objects_.reset();
    return released_.Take();
  }
  const std::string& device() const override { return device_; }
  int gid_index() const override { return gid_index_; }
  uint8_t port() const override { return port_; }

 private:
  bool latency() const { return IsLatency(p_.test); }
  uint8_t* inbox(uint32_t q) const { return buf_ + static_cast<size_t>(q) * regions_ * stride_; }
  uint8_t* outbox(uint32_t q) const { return inbox(q) + (regions_ == 2 ? stride_ : 0); }

  absl::Status OpenDevice();
  absl::Status QueryDevice();
  absl::Status SetupMemory();
  absl::Status CreateQp(QpObjects& slot, rdma_cm_id* id);
  absl::Status ToInit(ibv_qp* qp);
  absl::Status ToRtr(ibv_qp* qp, const wire::QpEndpoint& remote, ibv_mtu mtu, bool global);
  absl::Status ToRts(ibv_qp* qp, uint32_t psn);
  absl::Status PostRecv(uint32_t q);
  absl::Status PostInitialRecvs();
  // A scatter/gather entry of one message at `at` in the registered buffer.
  ibv_sge Sge(uint8_t* at) const {
    return {reinterpret_cast<uintptr_t>(at), static_cast<uint32_t>(p_.size), mr_->lkey};
  }
  // A work request of the test's verb with the one entry `sge` (which must outlive it), aimed at
  // the peer's inbox(q), inlined where the size allows, with `flags` (IBV_SEND_SIGNALED) added.
  ibv_send_wr WorkRequest(uint32_t q, ibv_sge& sge, unsigned flags = 0) const;
  absl::Status PostSend(uint32_t q, ibv_send_wr* wr);

  absl::Status CmListen(const std::string& bind);
  absl::StatusOr<CmEvent> WaitCm(std::string_view what);
  absl::Status ExpectCm(rdma_cm_event_type want, std::string_view what, rdma_cm_id** id = nullptr);
  absl::Status CmConnect(const std::string& peer, uint16_t port);
  absl::Status CmAccept();
  // Owns a new id of `slot`'s QP.
  void OwnCmId(QpObjects& slot, rdma_cm_id* id);
  absl::Status CmCreateQp(QpObjects& slot, rdma_cm_id* id, std::string_view peer);
  absl::Status CmEstablished(QpObjects& slot, rdma_cm_id* id);
  rdma_conn_param ConnParam() const;

  absl::Status Exchange(Channel& ch);
  absl::Status Barrier(Channel& ch, uint32_t phase);

  // Duration mode, from now: the warm-up margin ends at `warm_end`, the measured window at `end`.
  struct Window {
    int64_t warm_end;
    int64_t end;
  };
  Window DurationWindow() const {
    const int64_t warm_end = NowNs() + absl::ToInt64Nanoseconds(p_.margin);
    return {warm_end, warm_end + absl::ToInt64Nanoseconds(p_.duration)};
  }
  absl::StatusOr<Measurement> RunBw();
  template <typename RoundTrip>
  absl::StatusOr<Measurement> TimeRoundTrips(RoundTrip round_trip);
  template <typename AwaitReply>
  absl::StatusOr<Measurement> RunPingPongClient(std::string_view noun, AwaitReply await_reply);
  template <typename AwaitPing>
  absl::Status RunPingPongServer(std::string_view reply_completion, AwaitPing await_ping);
  absl::StatusOr<Measurement> RunWriteLatClient();
  absl::StatusOr<Measurement> RunSendLatClient();
  absl::StatusOr<Measurement> RunReadLatClient();
  absl::Status RunWriteLatServer();
  absl::Status RunSendLatServer();
  absl::Status RunSendBwServer(Channel& ch);
  // Waits for one completion on `cq` into `wc`.
  absl::Status WaitCompletion(ibv_cq* cq, Spin& spin, std::string_view what, ibv_wc* wc);
  // Waits for one send completion (latency tests signal every message).
  absl::Status WaitSend(Spin& spin, std::string_view what);
  absl::Status WaitRecv(Spin& spin, std::string_view what);
  // Posts one work request on QP 0 and waits for its completion: `wr` must be signalled.
  absl::Status PostAndWait(ibv_send_wr& wr, Spin& spin, std::string_view what);

  Role role_;
  ProbeParams p_;
  Endpoint local_;
  const Canceller* cancel_;
  ReleaseErrors released_;  // declared before objects_, which report to it
  std::optional<VerbsObjects> objects_{std::in_place};

  std::string device_;
  uint8_t port_ = 1;
  int gid_index_ = -1;
  bool global_ = false;
  ibv_context* ctx_ = nullptr;
  ibv_device_attr dev_attr_{};
  ibv_port_attr port_attr_{};
  ibv_gid gid_{};

  rdma_event_channel* ec_ = nullptr;
  rdma_cm_id* listen_id_ = nullptr;
  uint16_t cm_port_ = 0;

  ibv_pd* pd_ = nullptr;
  uint8_t* buf_ = nullptr;
  size_t stride_ = 0;
  uint32_t regions_ = 1;
  ibv_mr* mr_ = nullptr;
  ibv_cq* scq_ = nullptr;
  ibv_cq* rcq_ = nullptr;
  uint32_t rx_depth_ = 1;
  std::vector<ibv_qp*> qps_;
  std::vector<uint32_t> psns_;
  std::vector<wire::QpEndpoint> remote_;
  const Channel* watch_ = nullptr;  // the control connection, watched while measuring
};

absl::Status RdmaTestImpl::Init(const std::string& cm_bind) {
  port_ = local_.ib_port;
  regions_ = latency() ? 2 : 1;
  stride_ = (p_.size + 63) / 64 * 64;
  if (VerbOf(p_.test) == Verb::kSend) {
    rx_depth_ = latency() ? 2
                          : static_cast<uint32_t>(std::min<uint64_t>(
                                kRxDepthSendBw, std::max<uint64_t>(p_.iterations, 16)));
  }
  if (p_.rdma_cm) {
    // rdma_cm picks the device from the address; a named one must at least exist.
    if (!local_.device.empty()) {
      int n = 0;
      ibv_device** list = ibv_get_device_list(&n);
      bool found = false;
      for (int i = 0; list != nullptr && i < n; ++i) {
        if (local_.device == ibv_get_device_name(list[i])) found = true;
      }
      if (list != nullptr) ibv_free_device_list(list);
      if (!found) return absl::NotFoundError(absl::StrCat("no RDMA device '", local_.device, "'"));
    }
    ec_ = rdma_create_event_channel();
    if (ec_ == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("rdma_create_event_channel: ", Errno(errno), " (is rdma_ucm loaded?)"));
    }
    objects_->channel = EventChannel(ec_, "rdma_destroy_event_channel", released_);
    const int flags = fcntl(ec_->fd, F_GETFL);
    if (flags < 0 || fcntl(ec_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      return absl::InternalError(absl::StrCat("fcntl on the rdma_cm channel: ", Errno(errno)));
    }
    if (role_ == Role::kServer) return CmListen(cm_bind);
    return absl::OkStatus();
  }
  FABRIC_RETURN_IF_ERROR(OpenDevice());
  FABRIC_RETURN_IF_ERROR(SetupMemory());
  for (uint32_t q = 0; q < p_.num_qps; ++q) {
    FABRIC_RETURN_IF_ERROR(CreateQp(objects_->qps.emplace_back(), nullptr));
    FABRIC_RETURN_IF_ERROR(ToInit(qps_.back()));
  }
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::OpenDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no RDMA support on this host (ibv_get_device_list: ", Errno(errno), ")"));
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
    return absl::UnavailableError(absl::StrCat("ibv_open_device ", device_, ": ", Errno(errno)));
  }
  objects_->context = Context(ctx_, "ibv_close_device", released_);
  FABRIC_RETURN_IF_ERROR(QueryDevice());
  if (port_attr_.state != IBV_PORT_ACTIVE) {
    return absl::FailedPreconditionError(absl::StrCat(
        device_, " port ", port_, " is ", ibv_port_state_str(port_attr_.state), ", not ACTIVE"));
  }
  const bool ethernet = port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (local_.gid_index) {
    gid_index_ = *local_.gid_index;
  } else {
    HostFsImpl sysfs(local_.sysfs);
    absl::StatusOr<int> g = ChooseGidIndexFromSysfs(sysfs, device_, port_);
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
    return absl::InternalError(absl::StrCat("ibv_query_gid ", gid_index_, ": ", Errno(errno)));
  }
  // RoCE always routes by GID; InfiniBand by LID unless a GID index was asked for.
  global_ = ethernet || local_.gid_index.has_value();
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::QueryDevice() {
  if (int rc = ibv_query_device(ctx_, &dev_attr_); rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_query_device: ", Errno(rc)));
  }
  if (port_ < 1 || port_ > dev_attr_.phys_port_cnt) {
    return absl::InvalidArgumentError(absl::StrCat(device_, " has no port ", port_, " (ports 1..",
                                                   int{dev_attr_.phys_port_cnt}, ")"));
  }
  if (int rc = ibv_query_port(ctx_, port_, &port_attr_); rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_query_port ", port_, ": ", Errno(rc)));
  }
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::SetupMemory() {
  const uint64_t tx = p_.tx_depth;
  if (tx > static_cast<uint64_t>(dev_attr_.max_qp_wr) ||
      rx_depth_ > static_cast<uint32_t>(dev_attr_.max_qp_wr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tx depth ", tx, " above ", device_, "'s limit of ", dev_attr_.max_qp_wr));
  }
  pd_ = ibv_alloc_pd(ctx_);
  if (pd_ == nullptr) return absl::InternalError(absl::StrCat("ibv_alloc_pd: ", Errno(errno)));
  objects_->pd = Pd(pd_, "ibv_dealloc_pd", released_);

  const size_t bytes = stride_ * regions_ * p_.num_qps;
  void* mem = nullptr;
  const long page = sysconf(_SC_PAGESIZE);
  if (int rc = posix_memalign(&mem, page > 0 ? static_cast<size_t>(page) : 4096, bytes); rc != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
  }
  buf_ = static_cast<uint8_t*>(mem);
  std::memset(buf_, 0, bytes);
  objects_->buffer = Buffer(buf_, "free buffer", released_);
  mr_ = ibv_reg_mr(pd_, buf_, bytes,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (mr_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ibv_reg_mr of ", bytes, " bytes: ", Errno(errno), " (locked memory limit: ulimit -l?)"));
  }
  objects_->mr = Mr(mr_, "ibv_dereg_mr", released_);

  const int scq = static_cast<int>(std::min<uint64_t>(tx * p_.num_qps + 1, dev_attr_.max_cqe));
  scq_ = ibv_create_cq(ctx_, scq, nullptr, nullptr, 0);
  if (scq_ == nullptr) return absl::InternalError(absl::StrCat("ibv_create_cq: ", Errno(errno)));
  objects_->send_cq = Cq(scq_, "ibv_destroy_cq (send)", released_);
  const int rcq =
      static_cast<int>(std::min<uint64_t>(uint64_t{rx_depth_} * p_.num_qps + 1, dev_attr_.max_cqe));
  rcq_ = ibv_create_cq(ctx_, rcq, nullptr, nullptr, 0);
  if (rcq_ == nullptr) return absl::InternalError(absl::StrCat("ibv_create_cq: ", Errno(errno)));
  objects_->recv_cq = Cq(rcq_, "ibv_destroy_cq (recv)", released_);
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::CreateQp(QpObjects& slot, rdma_cm_id* id) {
  ibv_qp_init_attr a{};
  a.send_cq = scq_;
  a.recv_cq = rcq_;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 0;
  a.cap.max_send_wr = p_.tx_depth;
  a.cap.max_recv_wr = rx_depth_;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = p_.inline_size;
  ibv_qp* qp = nullptr;
  if (id != nullptr) {
    if (rdma_create_qp(id, pd_, &a) != 0) {
      return absl::InternalError(absl::StrCat(
          "rdma_create_qp: ", Errno(errno), p_.inline_size > 0 ? " (inline size too large?)" : ""));
    }
    qp = id->qp;
    slot.cm_qp = CmQp(id, "rdma_destroy_qp", released_);
  } else {
    qp = ibv_create_qp(pd_, &a);
    if (qp == nullptr) {
      return absl::InternalError(
          absl::StrCat("ibv_create_qp: ", Errno(errno),
                       p_.inline_size > 0 ? absl::StrCat(" (inline size ", p_.inline_size,
                                                         " too large for this device? try -I 0)")
                                          : ""));
    }
    slot.qp = Qp(qp, "ibv_destroy_qp", released_);
  }
  qps_.push_back(qp);
  static thread_local std::mt19937 rng{std::random_device{}()};
  psns_.push_back(rng() & 0xffffff);
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::ToInit(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = port_;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (int rc = ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_modify_qp to INIT: ", Errno(rc)));
  }
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::ToRtr(ibv_qp* qp, const wire::QpEndpoint& remote, ibv_mtu mtu,
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
    return absl::InternalError(absl::StrCat("ibv_modify_qp to RTR: ", Errno(rc)));
  }
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::ToRts(ibv_qp* qp, uint32_t psn) {
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
    return absl::InternalError(absl::StrCat("ibv_modify_qp to RTS: ", Errno(rc)));
  }
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::PostRecv(uint32_t q) {
  ibv_sge sge = Sge(inbox(q));
  ibv_recv_wr wr{};
  wr.wr_id = q;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qps_[q], &wr, &bad); rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_post_recv: ", Errno(rc)));
  }
  return absl::OkStatus();
}

ibv_send_wr RdmaTestImpl::WorkRequest(uint32_t q, ibv_sge& sge, unsigned flags) const {
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

absl::Status RdmaTestImpl::PostSend(uint32_t q, ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qps_[q], wr, &bad); rc != 0) {
    return absl::UnavailableError(absl::StrCat("ibv_post_send: ", Errno(rc)));
  }
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::PostInitialRecvs() {
  if (VerbOf(p_.test) != Verb::kSend) return absl::OkStatus();
  // send_bw: only the server receives; send_lat: both sides.
  if (!latency() && role_ == Role::kClient) return absl::OkStatus();
  for (uint32_t q = 0; q < qps_.size(); ++q) {
    for (uint32_t i = 0; i < rx_depth_; ++i) FABRIC_RETURN_IF_ERROR(PostRecv(q));
  }
  return absl::OkStatus();
}

// --- rdma_cm ------------------------------------------------------------------------------

absl::Status RdmaTestImpl::CmListen(const std::string& bind) {
  if (rdma_create_id(ec_, &listen_id_, nullptr, RDMA_PS_TCP) != 0) {
    return absl::InternalError(absl::StrCat("rdma_create_id: ", Errno(errno)));
  }
  objects_->listener = CmId(listen_id_, "rdma_destroy_id (listener)", released_);
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string addr = PlainAddress(bind);
  if (int rc = getaddrinfo(addr.empty() ? nullptr : addr.c_str(), "0", &hints, &res); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rdma_cm bind address ", addr, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, freeaddrinfo);
  if (rdma_bind_addr(listen_id_, res->ai_addr) != 0) {
    return absl::UnavailableError(absl::StrCat("rdma_bind_addr ", addr, ": ", Errno(errno),
                                               " (no RDMA device on that address?)"));
  }
  if (rdma_listen(listen_id_, static_cast<int>(p_.num_qps)) != 0) {
    return absl::InternalError(absl::StrCat("rdma_listen: ", Errno(errno)));
  }
  cm_port_ = ntohs(rdma_get_src_port(listen_id_));
  return absl::OkStatus();
}

absl::StatusOr<CmEvent> RdmaTestImpl::WaitCm(std::string_view what) {
  const Deadline deadline = Deadline::In(local_.timeout);
  for (;;) {
    FABRIC_RETURN_IF_ERROR(
        WaitFd(ec_->fd, POLLIN, deadline, cancel_, absl::StrCat("waiting for ", Av(what))));
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ec_, &ev) != 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("rdma_get_cm_event: ", Errno(errno)));
    }
    CmEvent e{ev->event, ev->status, ev->id};
    if (int rc = rdma_ack_cm_event(ev); rc != 0) {
      return absl::InternalError(absl::StrCat("rdma_ack_cm_event: ", Errno(errno)));
    }
    return e;
  }
}

absl::Status RdmaTestImpl::ExpectCm(rdma_cm_event_type want, std::string_view what,
                                    rdma_cm_id** id) {
  absl::StatusOr<CmEvent> e = WaitCm(what);
  if (!e.ok()) return e.status();
  if (e->event != want) {
    // A connect request we did not expect still hands us an id to destroy.
    if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) (void)rdma_reject(e->id, nullptr, 0);
    return absl::UnavailableError(absl::StrCat("rdma_cm: ", rdma_event_str(e->event), " (status ",
                                               e->status, ") while waiting for ", Av(what)));
  }
  if (id != nullptr) *id = e->id;
  return absl::OkStatus();
}

rdma_conn_param RdmaTestImpl::ConnParam() const {
  rdma_conn_param cp{};
  cp.responder_resources = static_cast<uint8_t>(std::clamp(dev_attr_.max_qp_rd_atom, 1, 16));
  cp.initiator_depth = static_cast<uint8_t>(std::clamp(dev_attr_.max_qp_init_rd_atom, 1, 16));
  cp.retry_count = kRetryCount;
  cp.rnr_retry_count = RnrRetryFor(p_.test);
  return cp;
}

absl::Status RdmaTestImpl::CmConnect(const std::string& peer, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string addr = PlainAddress(peer);
  if (int rc = getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", addr, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, freeaddrinfo);
  const int timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(local_.timeout));
  for (uint32_t q = 0; q < p_.num_qps; ++q) {
    QpObjects& slot = objects_->qps.emplace_back();
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(ec_, &id, nullptr, RDMA_PS_TCP) != 0) {
      return absl::InternalError(absl::StrCat("rdma_create_id: ", Errno(errno)));
    }
    OwnCmId(slot, id);
    if (rdma_resolve_addr(id, nullptr, res->ai_addr, timeout_ms) != 0) {
      return absl::UnavailableError(absl::StrCat("rdma_resolve_addr ", addr, ": ", Errno(errno)));
    }
    FABRIC_RETURN_IF_ERROR(ExpectCm(RDMA_CM_EVENT_ADDR_RESOLVED, "rdma_cm address resolution"));
    if (rdma_resolve_route(id, timeout_ms) != 0) {
      return absl::UnavailableError(absl::StrCat("rdma_resolve_route: ", Errno(errno)));
    }
    FABRIC_RETURN_IF_ERROR(ExpectCm(RDMA_CM_EVENT_ROUTE_RESOLVED, "rdma_cm route resolution"));
    FABRIC_RETURN_IF_ERROR(CmCreateQp(slot, id, addr));
    rdma_conn_param cp = ConnParam();
    if (rdma_connect(id, &cp) != 0) {
      return absl::UnavailableError(absl::StrCat("rdma_connect: ", Errno(errno)));
    }
    FABRIC_RETURN_IF_ERROR(CmEstablished(slot, id));
  }
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::CmAccept() {
  for (uint32_t q = 0; q < p_.num_qps; ++q) {
    QpObjects& slot = objects_->qps.emplace_back();
    rdma_cm_id* id = nullptr;
    FABRIC_RETURN_IF_ERROR(
        ExpectCm(RDMA_CM_EVENT_CONNECT_REQUEST, "an rdma_cm connect request", &id));
    OwnCmId(slot, id);
    FABRIC_RETURN_IF_ERROR(CmCreateQp(slot, id, /*peer=*/""));
    rdma_conn_param cp = ConnParam();
    if (rdma_accept(id, &cp) != 0) {
      return absl::UnavailableError(absl::StrCat("rdma_accept: ", Errno(errno)));
    }
    FABRIC_RETURN_IF_ERROR(CmEstablished(slot, id));
  }
  return absl::OkStatus();
}

// The first id (no device yet) is created before the memory set up on its device, so it is
// released after it; the others go with their QPs.
void RdmaTestImpl::OwnCmId(QpObjects& slot, rdma_cm_id* id) {
  (ctx_ == nullptr ? objects_->first_id : slot.id) = CmId(id, "rdma_destroy_id", released_);
}

// The first id tells which device and port rdma_cm chose: the memory and CQs are set up for that
// device then. The client's named device (-d) must be the one rdma_cm routes `peer` through.
absl::Status RdmaTestImpl::CmCreateQp(QpObjects& slot, rdma_cm_id* id, std::string_view peer) {
  if (ctx_ == nullptr) {
    ctx_ = id->verbs;
    device_ = ibv_get_device_name(ctx_->device);
    port_ = id->port_num;
    if (role_ == Role::kClient && !local_.device.empty() && local_.device != device_) {
      return absl::FailedPreconditionError(
          absl::StrCat("rdma_cm routes ", Av(peer), " through ", device_, ", not ", local_.device));
    }
    FABRIC_RETURN_IF_ERROR(QueryDevice());
    FABRIC_RETURN_IF_ERROR(SetupMemory());
  }
  FABRIC_RETURN_IF_ERROR(CreateQp(slot, id));
  uint8_t timeout = kAckTimeout;
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, 1) != 0) {
    Log(LogLevel::kWarning, "rdma_set_option ACK_TIMEOUT: ", Errno(errno),
        " (keeping the CM's default)");
  }
  return absl::OkStatus();
}

// Waits for the connection rdma_connect or rdma_accept asked for; it is disconnected on release.
absl::Status RdmaTestImpl::CmEstablished(QpObjects& slot, rdma_cm_id* id) {
  FABRIC_RETURN_IF_ERROR(ExpectCm(RDMA_CM_EVENT_ESTABLISHED, "the rdma_cm connection"));
  slot.connection = CmConnection(id, "rdma_disconnect", released_);
  return absl::OkStatus();
}

// --- connection ---------------------------------------------------------------------------

absl::Status RdmaTestImpl::Exchange(Channel& ch) {
  wire::QpInfo mine;
  mine.mtu = static_cast<uint8_t>(port_attr_.active_mtu);
  mine.global = global_;
  for (uint32_t q = 0; q < qps_.size(); ++q) {
    wire::QpEndpoint e;
    e.qpn = qps_[q]->qp_num;
    e.psn = psns_[q];
    std::memcpy(e.gid.data(), gid_.raw, 16);
    e.lid = port_attr_.lid;
    e.rkey = mr_->rkey;
    e.addr = reinterpret_cast<uintptr_t>(inbox(q));
    e.size = p_.size;
    mine.qps.push_back(e);
  }
  absl::StatusOr<wire::QpInfo> theirs;
  if (role_ == Role::kClient) {
    FABRIC_RETURN_IF_ERROR(ch.Send(mine));
    theirs = ch.RecvAs<wire::QpInfo>("the server's QP endpoints");
  } else {
    theirs = ch.RecvAs<wire::QpInfo>("the client's QP endpoints");
    if (theirs.ok()) FABRIC_RETURN_IF_ERROR(ch.Send(mine));
  }
  if (!theirs.ok()) return theirs.status();
  if (theirs->qps.size() != qps_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the peer sent ", theirs->qps.size(),
                                                   " QP endpoints, expected ", qps_.size()));
  }
  for (const wire::QpEndpoint& e : theirs->qps) {
    if (e.size < p_.size) {
      return absl::InvalidArgumentError("the peer's buffer is smaller than the message size");
    }
  }
  remote_ = theirs->qps;
  if (!p_.rdma_cm) {
    const auto mtu = static_cast<ibv_mtu>(std::min<int>(port_attr_.active_mtu, theirs->mtu));
    const bool global = global_ || theirs->global;
    for (uint32_t q = 0; q < qps_.size(); ++q) {
      FABRIC_RETURN_IF_ERROR(ToRtr(qps_[q], remote_[q], mtu, global));
      FABRIC_RETURN_IF_ERROR(ToRts(qps_[q], psns_[q]));
    }
  }
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::Barrier(Channel& ch, uint32_t phase) {
  // The client speaks first, the server answers.
  const bool client = role_ == Role::kClient;
  if (client) FABRIC_RETURN_IF_ERROR(ch.Send(wire::Sync{phase}));
  absl::StatusOr<wire::Sync> s =
      ch.RecvAs<wire::Sync>(client ? "the server's barrier" : "the client's barrier");
  if (!s.ok()) return s.status();
  if (s->phase != phase) return absl::InvalidArgumentError("barrier phase mismatch");
  return client ? absl::OkStatus() : ch.Send(wire::Sync{phase});
}

absl::Status RdmaTestImpl::Connect(Channel& ch, const std::string& peer, uint16_t cm_port) {
  watch_ = &ch;
  if (p_.rdma_cm) {
    FABRIC_RETURN_IF_ERROR(role_ == Role::kClient ? CmConnect(peer, cm_port) : CmAccept());
  }
  FABRIC_RETURN_IF_ERROR(Exchange(ch));
  FABRIC_RETURN_IF_ERROR(PostInitialRecvs());
  return Barrier(ch, 1);
}

// --- measurement loops --------------------------------------------------------------------

absl::Status RdmaTestImpl::WaitCompletion(ibv_cq* cq, Spin& spin, std::string_view what,
                                          ibv_wc* wc) {
  for (;;) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n > 0) {
      if (wc->status != IBV_WC_SUCCESS) return absl::UnavailableError(WcError(*wc, what));
      spin.Progress();
      return absl::OkStatus();
    }
    if (n < 0) return absl::UnavailableError("ibv_poll_cq failed (device removed?)");
    if (spin.Tick()) return spin.Why(what);
  }
}

absl::Status RdmaTestImpl::WaitSend(Spin& spin, std::string_view what) {
  ibv_wc wc;
  return WaitCompletion(scq_, spin, what, &wc);
}

absl::Status RdmaTestImpl::WaitRecv(Spin& spin, std::string_view what) {
  ibv_wc wc;
  FABRIC_RETURN_IF_ERROR(WaitCompletion(rcq_, spin, what, &wc));
  return PostRecv(static_cast<uint32_t>(wc.wr_id));
}

absl::Status RdmaTestImpl::PostAndWait(ibv_send_wr& wr, Spin& spin, std::string_view what) {
  FABRIC_RETURN_IF_ERROR(PostSend(0, &wr));
  return WaitSend(spin, what);
}

absl::StatusOr<Measurement> RdmaTestImpl::RunClient() {
  switch (p_.test) {
    case TestKind::kWriteBw:
    case TestKind::kSendBw:
    case TestKind::kReadBw:
      return RunBw();
    case TestKind::kWriteLat:
      return RunWriteLatClient();
    case TestKind::kSendLat:
      return RunSendLatClient();
    case TestKind::kReadLat:
      return RunReadLatClient();
  }
  return absl::InternalError("unknown test");
}

absl::Status RdmaTestImpl::RunServer(Channel& ch) {
  switch (p_.test) {
    case TestKind::kWriteLat:
      return RunWriteLatServer();
    case TestKind::kSendLat:
      return RunSendLatServer();
    case TestKind::kSendBw:
      return RunSendBwServer(ch);
    default:
      // write_bw, read_bw, read_lat: the server's memory is the target; its CPU stays out.
      return absl::OkStatus();
  }
}

absl::StatusOr<Measurement> RdmaTestImpl::RunBw() {
  const uint32_t nq = p_.num_qps;
  const bool dur = p_.duration_mode();
  const uint64_t iters = p_.iterations;

  std::vector<ibv_sge> sges(nq);
  std::vector<std::vector<ibv_send_wr>> wrs(nq, std::vector<ibv_send_wr>(p_.post_list));
  for (uint32_t q = 0; q < nq; ++q) {
    sges[q] = Sge(outbox(q));
    for (ibv_send_wr& wr : wrs[q]) wr = WorkRequest(q, sges[q]);
  }
  std::vector<uint64_t> posted(nq, 0), completed(nq, 0), last_signaled(nq, 0);
  uint64_t total_completed = 0;
  const uint64_t total = dur ? 0 : iters * nq;

  Measurement m;
  Spin spin(local_.timeout, cancel_, watch_);
  ibv_wc wc[kPollBatch];
  const auto [warm_end, end] = DurationWindow();
  bool in_window = !dur;
  bool stopping = false;
  uint64_t window_base = 0;
  if (!dur) m.first_ns = NowNs();

  for (;;) {
    for (uint32_t q = 0; q < nq; ++q) {
      for (;;) {
        const uint64_t room = p_.tx_depth - (posted[q] - completed[q]);
        uint64_t chunk = p_.post_list;
        if (!dur) chunk = std::min(chunk, iters - posted[q]);
        // Stopping: one last signaled message, so its completion covers the unsignaled tail.
        if (stopping) chunk = last_signaled[q] < posted[q] ? 1 : 0;
        if (chunk == 0 || room < chunk) break;
        for (uint64_t j = 0; j < chunk; ++j) {
          const uint64_t seq = posted[q] + j + 1;
          ibv_send_wr& wr = wrs[q][j];
          wr.wr_id = (uint64_t{q} << kQpShift) | seq;
          const bool signal = stopping || seq % p_.cq_mod == 0 || (!dur && seq == iters);
          wr.send_flags = (wr.send_flags & ~IBV_SEND_SIGNALED) | (signal ? IBV_SEND_SIGNALED : 0);
          if (signal) last_signaled[q] = seq;
          wr.next = j + 1 < chunk ? &wrs[q][j + 1] : nullptr;
        }
        FABRIC_RETURN_IF_ERROR(PostSend(q, wrs[q].data()));
        posted[q] += chunk;
        if (stopping) break;
      }
    }
    const int n = ibv_poll_cq(scq_, kPollBatch, wc);
    if (n > 0) {
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) {
          return absl::UnavailableError(WcError(
              wc[i], absl::StrCat(Av(TestName(p_.test)), " after ", total_completed, " messages")));
        }
        const auto q = static_cast<uint32_t>(wc[i].wr_id >> kQpShift);
        const uint64_t seq = wc[i].wr_id & kSeqMask;
        total_completed += seq - completed[q];
        completed[q] = seq;
      }
      const int64_t now = NowNs();
      spin.Progress();
      if (!dur) {
        m.marks.push_back({now, total_completed});
        m.last_ns = now;
        if (total_completed == total) break;
      } else if (!in_window && !stopping) {
        if (now >= warm_end) {
          in_window = true;
          window_base = total_completed;
          m.first_ns = now;
        }
      } else if (in_window) {
        m.messages = total_completed - window_base;
        m.marks.push_back({now, m.messages});
        m.last_ns = now;
        if (now >= end) {
          in_window = false;
          stopping = true;
        }
      }
    } else if (n < 0) {
      return absl::UnavailableError("ibv_poll_cq failed (device removed?)");
    } else if (spin.Tick()) {
      return spin.Why(absl::StrCat("completions after ", total_completed, " messages"));
    }
    if (stopping) {
      bool drained = true;
      for (uint32_t q = 0; q < nq; ++q) drained = drained && completed[q] == posted[q];
      if (drained) break;
    }
  }
  if (!dur) m.messages = total;
  return m;
}

// perftest's latency loop on QP 0: `round_trip(k)` posts message k and waits for what ends it,
// for k = 1.. until the iterations are done or, in duration mode, the margin and then the
// duration have passed. The time is read just before each post, so a sample is the time between
// two successive posts; in duration mode only those after the warm-up margin are kept. (A
// template, so that the body is inlined into the timed loop.)
template <typename RoundTrip>
absl::StatusOr<Measurement> RdmaTestImpl::TimeRoundTrips(RoundTrip round_trip) {
  const bool dur = p_.duration_mode();
  Measurement m;
  if (!dur) m.posts.reserve(p_.iterations);
  const auto [warm_end, end] = DurationWindow();
  for (uint64_t k = 1;; ++k) {
    const int64_t now = NowNs();
    if (dur ? now >= end : k > p_.iterations) break;
    if (!dur || now >= warm_end) m.posts.push_back(now);
    FABRIC_RETURN_IF_ERROR(round_trip(k));
  }
  return m;
}

// write_lat and send_lat: message k carries Seq(k) in its last byte; `await_reply(spin, k)` waits
// for the server's answer. In duration mode a last message carries the stop mark, which ends the
// server's loop.
template <typename AwaitReply>
absl::StatusOr<Measurement> RdmaTestImpl::RunPingPongClient(std::string_view noun,
                                                            AwaitReply await_reply) {
  uint8_t* out_last = outbox(0) + p_.size - 1;
  ibv_sge sge = Sge(outbox(0));
  ibv_send_wr wr = WorkRequest(0, sge, IBV_SEND_SIGNALED);
  const std::string completion = absl::StrCat("the ", Av(noun), "'s completion");
  Spin spin(local_.timeout, cancel_, watch_);
  absl::StatusOr<Measurement> m = TimeRoundTrips([&](uint64_t k) -> absl::Status {
    *out_last = Seq(k);
    FABRIC_RETURN_IF_ERROR(PostAndWait(wr, spin, completion));
    return await_reply(spin, k);
  });
  if (!m.ok()) return m;
  if (p_.duration_mode()) {
    *out_last = kStopMark;
    FABRIC_RETURN_IF_ERROR(
        PostAndWait(wr, spin, absl::StrCat("the last ", Av(noun), "'s completion")));
  }
  m->messages = m->posts.size();
  return m;
}

// The server's side of write_lat and send_lat: `await_ping(spin, k)` waits for the client's
// message k and prepares the reply; it returns true when the message was the stop mark.
template <typename AwaitPing>
absl::Status RdmaTestImpl::RunPingPongServer(std::string_view reply_completion,
                                             AwaitPing await_ping) {
  ibv_sge sge = Sge(outbox(0));
  ibv_send_wr wr = WorkRequest(0, sge, IBV_SEND_SIGNALED);
  Spin spin(local_.timeout + p_.margin, cancel_, watch_);
  for (uint64_t k = 1; p_.duration_mode() || k <= p_.iterations; ++k) {
    absl::StatusOr<bool> stop = await_ping(spin, k);
    if (!stop.ok()) return stop.status();
    if (*stop) break;
    FABRIC_RETURN_IF_ERROR(PostAndWait(wr, spin, reply_completion));
  }
  return absl::OkStatus();
}

absl::StatusOr<Measurement> RdmaTestImpl::RunWriteLatClient() {
  volatile uint8_t* in_last = inbox(0) + p_.size - 1;
  return RunPingPongClient("write", [&](Spin& spin, uint64_t k) -> absl::Status {
    const uint8_t want = Seq(k);
    while (*in_last != want) {
      if (spin.Tick()) return spin.Why(absl::StrCat("the server's write ", k));
    }
    spin.Progress();
    return absl::OkStatus();
  });
}

absl::Status RdmaTestImpl::RunWriteLatServer() {
  volatile uint8_t* in_last = inbox(0) + p_.size - 1;
  uint8_t* out_last = outbox(0) + p_.size - 1;
  auto await_write = [&](Spin& spin, uint64_t k) -> absl::StatusOr<bool> {
    const uint8_t want = Seq(k);
    uint8_t got;
    while ((got = *in_last) != want && got != kStopMark) {
      if (spin.Tick()) return spin.Why(absl::StrCat("the client's write ", k));
    }
    if (got == kStopMark) return true;
    spin.Progress();
    *out_last = want;
    return false;
  };
  return RunPingPongServer("the write's completion", await_write);
}

absl::StatusOr<Measurement> RdmaTestImpl::RunSendLatClient() {
  return RunPingPongClient("send", [&](Spin& spin, uint64_t k) {
    return WaitRecv(spin, absl::StrCat("the server's reply ", k));
  });
}

absl::Status RdmaTestImpl::RunSendLatServer() {
  volatile uint8_t* in_last = inbox(0) + p_.size - 1;
  auto await_send = [&](Spin& spin, uint64_t k) -> absl::StatusOr<bool> {
    FABRIC_RETURN_IF_ERROR(WaitRecv(spin, absl::StrCat("the client's send ", k)));
    return *in_last == kStopMark;
  };
  return RunPingPongServer("the reply's completion", await_send);
}

absl::StatusOr<Measurement> RdmaTestImpl::RunReadLatClient() {
  ibv_sge sge = Sge(outbox(0));
  ibv_send_wr wr = WorkRequest(0, sge, IBV_SEND_SIGNALED);
  Spin spin(local_.timeout, cancel_, watch_);
  absl::StatusOr<Measurement> m =
      TimeRoundTrips([&](uint64_t k) { return PostAndWait(wr, spin, absl::StrCat("read ", k)); });
  if (!m.ok()) return m;
  // The last read's completion closes the last sample.
  m->posts.push_back(NowNs());
  m->messages = m->posts.size() - 1;
  return m;
}

absl::Status RdmaTestImpl::RunSendBwServer(Channel& ch) {
  const bool dur = p_.duration_mode();
  const uint64_t expected = dur ? 0 : p_.iterations * p_.num_qps;
  uint64_t received = 0;
  ibv_wc wc[kPollBatch];
  // The client's warm-up counts as traffic, but its set-up may take a margin's time.
  Spin spin(local_.timeout + p_.margin, cancel_);
  uint32_t idle = 0;
  for (;;) {
    const int n = ibv_poll_cq(rcq_, kPollBatch, wc);
    if (n > 0) {
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) {
          return absl::UnavailableError(
              WcError(wc[i], absl::StrCat("receive after ", received, " messages")));
        }
        FABRIC_RETURN_IF_ERROR(PostRecv(static_cast<uint32_t>(wc[i].wr_id)));
      }
      received += static_cast<uint64_t>(n);
      spin.Progress();
      idle = 0;
      if (!dur && received >= expected) return absl::OkStatus();
      continue;
    }
    if (n < 0) return absl::UnavailableError("ibv_poll_cq failed (device removed?)");
    // In duration mode the client's Done ends the test; in either mode it means the client
    // has finished (or given up), so stop receiving.
    if ((++idle & 1023) == 0 && ch.Readable()) return absl::OkStatus();
    if (spin.Tick()) return spin.Why(absl::StrCat("receives after ", received, " messages"));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<RdmaTest>> RdmaTest::Prepare(Role role, const ProbeParams& p,
                                                            const Endpoint& local,
                                                            const std::string& cm_bind,
                                                            const Canceller* cancel) {
  auto t = std::make_unique<RdmaTestImpl>(role, p, local, cancel);
  if (absl::Status s = t->Init(cm_bind); !s.ok()) {
    // Release now so that a teardown failure is reported along with the set-up failure.
    if (absl::Status r = t->Release(); !r.ok()) {
      return absl::Status(s.code(), absl::StrCat(s.message(), "; releasing: ", r.message()));
    }
    return s;
  }
  return std::unique_ptr<RdmaTest>(std::move(t));
}

bool HaveRdmaDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return false;
  ibv_free_device_list(list);
  return n > 0;
}

}  // namespace fabric::probes
