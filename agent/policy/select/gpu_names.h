// GPU names, one resolver for every place a GPU is taken (SelectNics, Place's candidates,
// fabricctl, the daemon): what a caller writes, read into the host's Accelerator.
//
// Accepted names:
//   - a PCI address, as ParseGpuName (select.h) reads it: "0000:17:00.0", "17:00.0",
//     nvidia-smi's "00000000:17:00.0";
//   - a decimal index: nvidia-smi order (PCI bus order of the NVIDIA GPUs) when the host has
//     NVIDIA GPUs, else rocm-smi order (PCI bus order of the AMD GPUs). A host with both counts
//     the NVIDIA ones, as CUDA does; its AMD GPUs are named by UUID or PCI address;
//   - "GPU-<uuid>": an NVIDIA UUID (8-4-4-4-12 hex digits, any case) from the driver's procfs
//     information, or AMD's "GPU-<unique_id>" (16 hex digits);
//   - "MIG-<uuid>": a MIG device, resolved to its parent GPU through NVML (MigResolver).
// Errors: InvalidArgument for a malformed name or a management display; NotFound for a
// well-formed name this host does not have; FailedPrecondition for MIG-... without NVML.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// A MIG device's parent GPU: the OS boundary (NVML) behind a narrow interface.
class MigResolver {
 public:
  virtual ~MigResolver() = default;
  // PCI address (any form ParsePciAddress reads) of the GPU that holds MIG device `mig_uuid`.
  // NotFound for a UUID NVML does not know; FailedPrecondition when NVML cannot be used.
  virtual absl::StatusOr<std::string> ParentPciAddress(std::string_view mig_uuid) const = 0;
};

// NVML loaded at run time with dlopen (never a build or link dependency), on first use, once;
// thread-safe. Without the library every call fails with FailedPrecondition ("MIG-... needs
// libnvidia-ml (NVML), which is not loadable: ...").
class MigResolverImpl final : public MigResolver {
 public:
  explicit MigResolverImpl(std::string library = "libnvidia-ml.so.1");
  ~MigResolverImpl() override;
  MigResolverImpl(const MigResolverImpl&) = delete;
  MigResolverImpl& operator=(const MigResolverImpl&) = delete;

  absl::StatusOr<std::string> ParentPciAddress(std::string_view mig_uuid) const override;

 private:
  struct Nvml;
  const Nvml* Load() const;

  const std::string library_;
  mutable std::once_flag once_;
  mutable std::unique_ptr<Nvml> nvml_;
};

// The process's MigResolverImpl, created on first use (NVML itself loads on the first MIG name).
const MigResolver* ProcessMigResolver();

struct ResolvedGpu {
  const v1::Accelerator* accelerator = nullptr;  // Points into the host given.
  std::string pci_address;                       // Canonical: "0000:17:00.0".
};

// `given` as the caller wrote it (exact, no whitespace trimmed). `what` names it in errors
// ("GPU", "candidate"). `mig` may be null: MIG-... then fails with FailedPrecondition.
absl::StatusOr<ResolvedGpu> ResolveGpu(const v1::Host& host, std::string_view given,
                                       const MigResolver* mig, std::string_view what = "GPU");

// The GPUs a process's environment makes visible, as names ResolveGpu takes, in order:
// NVIDIA_VISIBLE_DEVICES (UUIDs or indices; "all", "none", "void" and empty are refused: they
// name no GPU by itself) then CUDA_VISIBLE_DEVICES, whose indices count within what
// NVIDIA_VISIBLE_DEVICES made visible (CUDA=1 with NVIDIA=GPU-a,GPU-b is GPU-b); without either,
// ROCR_VISIBLE_DEVICES then HIP_VISIBLE_DEVICES, HIP's indices counting within ROCR's. An AMD
// index becomes the GPU's PCI address where a bare index would mean an NVIDIA GPU.
// InvalidArgument when none is set (naming the variables looked at), for an empty or malformed
// list, or an index outside the list it counts within.
absl::StatusOr<std::vector<std::string>> ExpandVisible(const v1::VisibleDevices& visible,
                                                       const v1::Host& host);

// Whether any of the variables is set.
bool HasVisible(const v1::VisibleDevices& visible);

// The GPUs one SelectNics request names, read the same wherever it is answered (the agent,
// fabricctl on its own): its `gpus` as given, every GPU NCCL and RCCL drive (`all`:
// CollectiveGpus), or those the caller's environment makes visible (`visible`: ExpandVisible);
// exactly one of the three. InvalidArgument for none or several, or a bad `visible`; NotFound
// for `all` on a host without NVIDIA or AMD GPUs. The names are read by SelectNics.
absl::StatusOr<std::vector<std::string>> RequestedGpus(const v1::Host& host,
                                                       const v1::SelectNicsRequest& req);

// The PCI address forms of a GPU name (ResolveGpu, below, takes the others too): a GPU's
// PCI address as a caller wrote it, taken exactly (no whitespace trimmed, at most 16
// characters: "00000000:17:00.0"), in canonical form "0000:17:00.0". InvalidArgument names
// `what` ("GPU", "candidate") and quotes an excerpt of `given`.
absl::StatusOr<std::string> ParseGpuName(std::string_view given, std::string_view what = "GPU");

}  // namespace fabric
