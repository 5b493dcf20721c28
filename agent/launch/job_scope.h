// A job's scope on this host and this process's GPU, read from what launchers put in a process's
// environment: what `fabricctl env --gpus=job --rank-gpu=auto`, `fabricctl exec` and the Slurm
// plugin ask the agent for. Pure (the environment is a parameter): table tests in
// job_scope_test.cc.
//
// --gpus=job: SLURM_STEP_GPUS, else SLURM_JOB_GPUS (Slurm's GPU indices on the node, the step's
// whole allocation while each task sees only its own), else the *_VISIBLE_DEVICES the process
// has (the container's or allocation's GPUs), else every GPU.
// --rank-gpu=auto: under Slurm's scope, the one GPU CUDA_VISIBLE_DEVICES (ROCR_, HIP_) names;
// else the launcher's local rank (kLocalRankVars, first set) as a position in the scope; else,
// when the scope is one visible GPU, that GPU; else none (no pins).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric::launch {

using GetEnv = std::function<const char*(const char*)>;

// The variables launchers set to a process's rank among those on its node, in the order read:
// torchrun, Slurm, Open MPI, MPICH/Intel MPI (Hydra), PMIx/PMI, MVAPICH2, Cray PALS.
inline constexpr const char* kLocalRankVars[] = {
    "LOCAL_RANK",       "SLURM_LOCALID",  "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",  "PMI_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
    "PALS_LOCAL_RANKID"};

struct JobRequest {
  v1::SelectNicsRequest req;
  std::vector<std::string> provenance;  // Where the scope and rank came from (--dry-run).
  std::vector<std::string> notes;       // What was skipped, for stderr.
};

// `gpus`: "job", "visible", "all" or GPU names (GpuNames). `rank`: "auto", "none" or a GPU name.
// `consumers` as jobenv::ParseConsumers (checked by whoever renders). InvalidArgument for a
// malformed GPU list or local-rank variable, a local rank past a scope known here, and more than
// kMaxGpusPerRequest GPUs.
absl::StatusOr<JobRequest> ReadJobRequest(std::string_view gpus, std::string_view rank,
                                          std::string_view consumers, const GetEnv& getenv);

// --gpus as a comma-separated list of names; InvalidArgument when it names none or more than
// kMaxGpusPerRequest.
absl::StatusOr<std::vector<std::string>> GpuNames(const std::string& gpus);

// --gpus as a SelectNics request: "all", "visible" (this process's NVIDIA_/CUDA_/ROCR_/
// HIP_VISIBLE_DEVICES; InvalidArgument when none is set), or names (GpuNames). Nothing is
// resolved here: the request means the same to the agent and to local discovery.
absl::StatusOr<v1::SelectNicsRequest> GpuRequest(
    std::string_view gpus, const std::function<const char*(const char*)>& getenv = nullptr);

// --gpus=visible: this process's NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES,
// ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES, unset ones absent. `getenv` is the environment.
v1::VisibleDevices VisibleFromEnvironment(
    const std::function<const char*(const char*)>& getenv = nullptr);

// The Selection for `req` on a host in hand (fabricctl's discovery, the published host file):
// RequestedGpus, then SelectForRequest with the process's NVML for MIG names. NotFound when the
// host has no RDMA device (`where` says where none was found).
absl::StatusOr<v1::Selection> SelectOnHost(const v1::Host& host, const v1::SelectionPolicy& policy,
                                           const v1::SelectNicsRequest& req,
                                           std::string_view where);

// "0,1,4-6" (Slurm's GPU index lists) as names {"0","1","4","5","6"}; InvalidArgument otherwise.
absl::StatusOr<std::vector<std::string>> ExpandIndexList(std::string_view list);

}  // namespace fabric::launch
