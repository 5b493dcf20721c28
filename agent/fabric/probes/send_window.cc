#include "agent/fabric/probes/send_window.h"

#include <algorithm>

#include "agent/common/status.h"
#include "agent/fabric/probes/clock.h"

namespace fabric::probes {
namespace {

constexpr int kQpShift = 40;  // wr_id = qp index << 40 | message sequence number
constexpr uint64_t kSeqMask = (uint64_t{1} << kQpShift) - 1;

}  // namespace

SendWindow::SendWindow(VerbsResources& v)
    : v_(v),
      p_(v.params()),
      dur_(p_.duration_mode()),
      sges_(p_.num_qps),
      wrs_(p_.num_qps, std::vector<ibv_send_wr>(p_.post_list)),
      posted_(p_.num_qps, 0),
      completed_(p_.num_qps, 0),
      last_signaled_(p_.num_qps, 0) {
  for (uint32_t q = 0; q < p_.num_qps; ++q) {
    sges_[q] = v_.Sge(v_.outbox(q));
    for (ibv_send_wr& wr : wrs_[q]) wr = v_.WorkRequest(q, sges_[q]);
  }
}

absl::Status SendWindow::Fill(uint32_t q, std::vector<int64_t>* post_ns) {
  const uint64_t iters = p_.iterations;
  for (;;) {
    const uint64_t room = p_.tx_depth - (posted_[q] - completed_[q]);
    uint64_t chunk = p_.post_list;
    if (!dur_) chunk = std::min(chunk, iters - posted_[q]);
    if (stopping_) chunk = last_signaled_[q] < posted_[q] ? 1 : 0;
    if (chunk == 0 || room < chunk) return absl::OkStatus();
    for (uint64_t j = 0; j < chunk; ++j) {
      const uint64_t seq = posted_[q] + j + 1;
      ibv_send_wr& wr = wrs_[q][j];
      wr.wr_id = (uint64_t{q} << kQpShift) | seq;
      const bool signal = stopping_ || seq % p_.cq_mod == 0 || (!dur_ && seq == iters);
      wr.send_flags = (wr.send_flags & ~IBV_SEND_SIGNALED) | (signal ? IBV_SEND_SIGNALED : 0);
      if (signal) last_signaled_[q] = seq;
      wr.next = j + 1 < chunk ? &wrs_[q][j + 1] : nullptr;
    }
    if (post_ns != nullptr) post_ns->insert(post_ns->end(), chunk, NowNs());
    FABRIC_RETURN_IF_ERROR(v_.PostSend(q, wrs_[q].data()));
    posted_[q] += chunk;
    if (stopping_) return absl::OkStatus();
  }
}

void SendWindow::Complete(uint64_t wr_id) {
  const auto q = static_cast<uint32_t>(wr_id >> kQpShift);
  const uint64_t seq = wr_id & kSeqMask;
  if (q >= completed_.size() || seq <= completed_[q]) return;  // not one of ours, or stale
  total_completed_ += seq - completed_[q];
  completed_[q] = seq;
}

bool SendWindow::Drained() const {
  for (size_t q = 0; q < posted_.size(); ++q) {
    if (completed_[q] != posted_[q]) return false;
  }
  return true;
}

}  // namespace fabric::probes
