#include "agent/policy/select/select_request.h"

#include "absl/strings/str_cat.h"
#include "agent/policy/select/select.h"

namespace fabric {

using namespace ::fabric::v1;  // NOLINT: the model's types

absl::StatusOr<std::optional<jobenv::Version>> NcclVersionOf(const SelectNicsRequest& req) {
  if (req.nccl_version().empty()) return std::nullopt;
  absl::StatusOr<jobenv::Version> v = jobenv::ParseVersion(req.nccl_version());
  if (!v.ok())
    return absl::InvalidArgumentError(absl::StrCat("nccl_version: ", v.status().message()));
  return *v;
}

absl::StatusOr<EnvOptions> EnvOptionsFor(const Host& host, const SelectNicsRequest& req,
                                         const Selection& sel, const MigResolver* mig) {
  EnvOptions opt;
  absl::StatusOr<jobenv::Consumers> consumers = jobenv::ParseConsumers(req.consumers());
  if (!consumers.ok()) return consumers.status();
  opt.consumers = *consumers;
  absl::StatusOr<std::optional<jobenv::Version>> version = NcclVersionOf(req);
  if (!version.ok()) return version.status();
  opt.nccl_version = *version;
  const size_t n = static_cast<size_t>(sel.assignments_size());
  if (req.rank_case() == SelectNicsRequest::kRankPosition) {
    if (req.rank_position() >= n) {
      return absl::InvalidArgumentError(absl::StrCat("rank position ", req.rank_position(),
                                                     " is outside the job's ", n, " GPUs"));
    }
    opt.rank = req.rank_position();
  } else if (req.rank_case() == SelectNicsRequest::kRankGpu) {
    absl::StatusOr<ResolvedGpu> gpu = ResolveGpu(host, req.rank_gpu(), mig, "rank GPU");
    if (!gpu.ok()) return gpu.status();
    for (size_t i = 0; i < n; ++i) {
      if (sel.assignments(static_cast<int>(i)).gpu() == gpu->pci_address) opt.rank = i;
    }
    if (!opt.rank) {
      return absl::InvalidArgumentError(absl::StrCat("rank GPU \"", req.rank_gpu(), "\" (",
                                                     gpu->pci_address,
                                                     ") is not one of the job's GPUs"));
    }
  }
  return opt;
}

absl::StatusOr<Selection> SelectForRequest(const Host& host, const std::vector<std::string>& gpus,
                                           const SelectNicsRequest& req,
                                           const SelectionPolicy& policy, const MigResolver* mig) {
  absl::StatusOr<Selection> sel = SelectPorts(host, gpus, policy, mig);
  if (!sel.ok()) return sel;
  absl::StatusOr<EnvOptions> opt = EnvOptionsFor(host, req, *sel, mig);
  if (!opt.ok()) return opt.status();
  if (absl::Status s = FillEnv(host, policy, *opt, &*sel); !s.ok()) return s;
  return sel;
}

}  // namespace fabric
