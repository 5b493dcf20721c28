// The RDMA engine: libibverbs RC queue pairs, connected over the out-of-band channel (or by
// rdma_cm with -R), and perftest's measurement loops. This file puts the steps together:
// verbs_resources (device, memory, QPs), rdma_cm, qp_exchange (the out-of-band steps) and
// verbs_loops (the measurement).
#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/common/status.h"
#include "agent/fabric/probes/engine.h"
#include "agent/fabric/probes/probe.h"  // HaveRdmaDevice
#include "agent/fabric/probes/qp_exchange.h"
#include "agent/fabric/probes/rdma_cm.h"
#include "agent/fabric/probes/verbs_loops.h"
#include "agent/fabric/probes/verbs_resources.h"

namespace fabric::probes {
namespace {

class RdmaTestImpl final : public RdmaTest {
 public:
  RdmaTestImpl(Role role, const ProbeParams& p, const Endpoint& local, const Canceller* cancel)
      : role_(role),
        p_(p),
        local_(local),
        cancel_(cancel),
        verbs_(role == Role::kClient, p, local),
        cm_(verbs_, local, cancel) {}
  ~RdmaTestImpl() override = default;

  absl::Status Init(const std::string& cm_bind);

  uint16_t cm_port() const override { return cm_.port(); }
  absl::Status Connect(Channel& ch, const std::string& peer, uint16_t cm_port) override;
  absl::StatusOr<Measurement> RunClient() override {
    return RunVerbsClient(verbs_, local_.timeout, cancel_, watch_);
  }
  absl::Status RunServer(Channel& ch) override {
    return RunVerbsServer(verbs_, local_.timeout, cancel_, watch_, ch);
  }
  absl::Status Release() override { return verbs_.Release(); }
  const std::string& device() const override { return verbs_.device(); }
  int gid_index() const override { return verbs_.gid_index(); }
  uint8_t port() const override { return verbs_.port(); }
  std::string memory() const override { return verbs_.memory(); }

 private:
  Role role_;
  ProbeParams p_;
  Endpoint local_;
  const Canceller* cancel_;
  VerbsResources verbs_;
  RdmaCm cm_;
  const Channel* watch_ = nullptr;  // the control connection, watched while measuring
};

absl::Status RdmaTestImpl::Init(const std::string& cm_bind) {
  if (p_.rdma_cm) return cm_.Open(role_ == Role::kServer, cm_bind);
  FABRIC_RETURN_IF_ERROR(verbs_.OpenDevice());
  FABRIC_RETURN_IF_ERROR(verbs_.SetupMemory());
  for (uint32_t q = 0; q < p_.num_qps; ++q) {
    FABRIC_RETURN_IF_ERROR(verbs_.CreateQp(verbs_.objects().qps.emplace_back(), nullptr));
    FABRIC_RETURN_IF_ERROR(verbs_.ToInit(verbs_.qp(q)));
  }
  return absl::OkStatus();
}

absl::Status RdmaTestImpl::Connect(Channel& ch, const std::string& peer, uint16_t cm_port) {
  watch_ = &ch;
  if (p_.rdma_cm) {
    FABRIC_RETURN_IF_ERROR(role_ == Role::kClient ? cm_.Connect(peer, cm_port) : cm_.Accept());
  }
  FABRIC_RETURN_IF_ERROR(ExchangeQpEndpoints(ch, verbs_));
  FABRIC_RETURN_IF_ERROR(verbs_.PostInitialRecvs());
  return Barrier(ch, role_ == Role::kClient, 1);
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
