// The verbs half of one RDMA test: the device, the registered buffer, the CQs and the RC QPs,
// their state transitions and posts. Every object is owned by a handle in VerbsObjects.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/fabric/gpumem/gpu_memory.h"
#include "agent/fabric/probes/params.h"
#include "agent/fabric/probes/verbs_handles.h"
#include "agent/fabric/probes/wire.h"

namespace fabric::probes {

// RC attributes, set on purpose (see README.md):
// - min_rnr_timer 12 = 0.64 ms: how long a sender backs off when a receive is missing. 0 would
//   mean 655 ms, which turns one late repost into a latency outlier of two thirds of a second.
inline constexpr uint8_t kMinRnrTimer = 12;
// - timeout 14 = 4.096 us x 2^14 = 67 ms per transport retry, retry_cnt 7: a peer that vanished
//   fails the QP with RETRY_EXC_ERR after about half a second (some HCAs take longer).
inline constexpr uint8_t kAckTimeout = 14;
inline constexpr uint8_t kRetryCount = 7;
// - rnr_retry 7 (retry forever) only for send_bw, where the receiver reposts in a loop and may
//   fall behind a burst: that is flow control, not failure, and the completion wait still bounds
//   the test. Elsewhere no receive can be missing (write/read consume none; send_lat reposts
//   before it replies), so an RNR there is a bug and fails after 3 retries.
inline constexpr uint8_t kRnrRetrySendBw = 7;
inline constexpr uint8_t kRnrRetry = 3;
inline constexpr uint32_t kRxDepthSendBw = 512;  // perftest's receive depth for send_bw

inline uint8_t RnrRetryFor(TestKind t) {
  return t == TestKind::kSendBw ? kRnrRetrySendBw : kRnrRetry;
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
  // GPU memory instead (--use_cuda, --use_rocm): the buffer and its MR in one.
  std::unique_ptr<gpumem::RegisteredGpuMemory> gpu;
  Mr mr;
  Cq send_cq;
  Cq recv_cq;
  std::vector<QpObjects> qps;
};

class VerbsResources {
 public:
  VerbsResources(bool client, const ProbeParams& p, const Endpoint& local);
  VerbsResources(const VerbsResources&) = delete;
  VerbsResources& operator=(const VerbsResources&) = delete;

  // Without rdma_cm: opens the device named in `local` (else the first), checks that its port is
  // ACTIVE and picks the GID index.
  absl::Status OpenDevice();
  // With rdma_cm: the device and port rdma_cm chose (held by its ids, not opened here).
  void UseDevice(ibv_context* ctx, uint8_t port);
  absl::Status QueryDevice();
  // The device is known, the buffer not yet allocated: where perftest places itself (the
  // endpoint's Placement; nothing without one). OpenDevice calls it; with rdma_cm, the caller
  // after QueryDevice.
  absl::Status Place();
  // Each region of the buffer at least `bytes` (before SetupMemory): perftest peers write
  // small messages at successive cache lines within their page-sized cycle buffer.
  void set_min_region(uint64_t bytes) {
    stride_ = std::max<size_t>(stride_, (bytes + 63) / 64 * 64);
  }
  // -a: the message size of the next run (at most the size the buffer was set up for).
  void set_size(uint64_t size) { p_.size = size; }
  // The PD, the buffer (one inbox, and for latency tests one outbox, per QP), the MR, the CQs.
  absl::Status SetupMemory();
  // Creates the next QP into `slot`: on rdma_cm's `id`, or with ibv_create_qp when it is null.
  absl::Status CreateQp(QpObjects& slot, rdma_cm_id* id);
  // Destroys the newest QP slot (one whose connection failed, to be tried again).
  absl::Status DropLastQp();
  absl::Status ToInit(ibv_qp* qp);
  absl::Status ToRtr(ibv_qp* qp, const wire::QpEndpoint& remote, ibv_mtu mtu, bool global);
  absl::Status ToRts(ibv_qp* qp, uint32_t psn);

  absl::Status PostRecv(uint32_t q);
  // The receives a test posts before its sync: send_bw's server's, send_lat's both sides'.
  absl::Status PostInitialRecvs();
  // The receive depth on every QP (send_bw -b: both sides).
  absl::Status PostRecvs();
  // A scatter/gather entry of one message at `at` in the registered buffer.
  ibv_sge Sge(uint8_t* at) const { return Sge(at, p_.size); }
  // One of `length` bytes at `at`.
  ibv_sge Sge(uint8_t* at, uint64_t length) const {
    return {reinterpret_cast<uintptr_t>(at), static_cast<uint32_t>(length), mr_->lkey};
  }
  // A work request of the test's verb with the one entry `sge` (which must outlive it), aimed at
  // the peer's inbox(q), inlined where the size allows, with `flags` (IBV_SEND_SIGNALED) added.
  ibv_send_wr WorkRequest(uint32_t q, ibv_sge& sge, unsigned flags = 0) const;
  absl::Status PostSend(uint32_t q, ibv_send_wr* wr);

  // Destroys every object, newest first; Internal listing the destroys that failed, else OK.
  absl::Status Release();

  VerbsObjects& objects() { return *objects_; }
  ReleaseErrors& errors() { return errors_; }

  bool client() const { return client_; }
  const ProbeParams& params() const { return p_; }
  bool latency() const { return IsLatency(p_.test); }
  bool has_device() const { return ctx_ != nullptr; }
  ibv_context* context() const { return ctx_; }
  const std::string& device() const { return device_; }
  // Where the test runs, once the device is known ("NUMA node 0, mlx5_0's"; empty: unplaced).
  const std::string& placement() const { return placement_; }
  uint8_t port() const { return port_; }
  int gid_index() const { return gid_index_; }
  bool global() const { return global_; }
  const ibv_device_attr& device_attr() const { return dev_attr_; }
  const ibv_port_attr& port_attr() const { return port_attr_; }
  const ibv_gid& gid() const { return gid_; }
  uint32_t rkey() const { return mr_->rkey; }
  // Where the buffer is: "host memory", or the GPU's name.
  std::string memory() const {
    if (!objects_->gpu) return "host memory";
    return gpumem::Describe(*local_.gpu, objects_->gpu->device_name());
  }
  ibv_cq* send_cq() const { return objects_->send_cq.get(); }
  ibv_cq* recv_cq() const { return objects_->recv_cq.get(); }

  uint32_t num_qps() const { return static_cast<uint32_t>(qps_.size()); }
  ibv_qp* qp(uint32_t q) const { return qps_[q]; }
  uint32_t psn(uint32_t q) const { return psns_[q]; }
  // The peer's endpoints, one per QP (from the out-of-band exchange).
  void set_remote(std::vector<wire::QpEndpoint> remote) { remote_ = std::move(remote); }
  const wire::QpEndpoint& remote(uint32_t q) const { return remote_[q]; }

  // QP q's part of the buffer: what the peer writes or sends (inbox) and what this side sends
  // from (outbox; the inbox again unless a latency test).
  uint8_t* inbox(uint32_t q) const { return base_ + static_cast<size_t>(q) * regions_ * stride_; }
  uint8_t* outbox(uint32_t q) const { return inbox(q) + (regions_ == 2 ? stride_ : 0); }

 private:
  absl::Status CreateCqs();

  bool client_;
  ProbeParams p_;
  Endpoint local_;

  std::string device_;
  std::string placement_;  // what Place did, for the user
  uint8_t port_ = 1;
  int gid_index_ = -1;
  bool global_ = false;
  ibv_context* ctx_ = nullptr;  // objects_->context, or rdma_cm's
  ibv_device_attr dev_attr_{};
  ibv_port_attr port_attr_{};
  ibv_gid gid_{};

  uint8_t* base_ = nullptr;  // the buffer: host memory, or a GPU's (never dereferenced then)
  ibv_mr* mr_ = nullptr;
  size_t stride_ = 0;
  uint32_t regions_ = 1;
  uint32_t rx_depth_ = 1;
  std::vector<ibv_qp*> qps_;  // in objects_->qps, for the data path
  std::vector<uint32_t> psns_;
  std::vector<wire::QpEndpoint> remote_;

  ReleaseErrors errors_;  // declared before objects_, whose handles report to it
  std::optional<VerbsObjects> objects_{std::in_place};
};

}  // namespace fabric::probes
