// The environment a job's processes get on one host, by plain rules over plain structs (no
// protobuf, no gRPC): the agent, fabricctl, the CDI writer, fabric-cni and the in-container helper
// all render through Render, so they hand out the same bytes.
//
// Two parts. `job`: what every rank of the job on this host gets, computed from the job scope
// alone (NCCL and RCCL need the same NCCL_IB_HCA on every rank, NVIDIA/nccl#1478). `pins`: what
// one rank gets on top, for its own GPU, and only for the libraries that take one NIC per process
// (UCX_NET_DEVICES, NVSHMEM_HCA_LIST, UCCL_P2P_RDMA_DEV). Per-GPU maps that are the same on every
// rank (vLLM, SGLang) are job variables. Each variable's consumer, syntax and the source it was
// checked against are in consumers.cc and the README's table (docs/research/job-env-consumers.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace fabric::jobenv {

using EnvMap = std::map<std::string, std::string>;

// The libraries whose variables are rendered. Default: all but vLLM, whose map makes vLLM raise
// for a GPU missing from it and which prepends to the variables it pins (so it owns them).
struct Consumers {
  bool nccl = true;      // NCCL and RCCL (and UCCL's collectives, which fall back to NCCL_*).
  bool ucx = true;       // UCX, and NIXL and NVSHMEM's UCX transport through it.
  bool nvshmem = true;   // NVSHMEM's IB transports (IBRC, IBDEVX, IBGDA).
  bool mooncake = true;  // Mooncake's transfer engine.
  bool uccl = true;      // UCCL's EP and P2P engines.
  bool sglang = true;    // FABRIC_SGLANG_IB_DEVICE, for --disaggregation-ib-device.
  bool vllm = false;     // VLLM_GPU_NIC_PCIE_MAPPING and VLLM_NIC_SELECTION_VARS.
  bool operator==(const Consumers&) const = default;
};

// The consumer names, in the order `ParseConsumers` and the help text list them.
std::vector<std::string> ConsumerNames();

// "default", "all", a list ("nccl,ucx": exactly these) or changes to the default set
// ("+vllm,-uccl"); names as ConsumerNames. InvalidArgument names an unknown consumer.
absl::StatusOr<Consumers> ParseConsumers(std::string_view text);
std::string ConsumersText(const Consumers& c);  // "nccl,ucx,...": ParseConsumers reads it back.

// An NCCL release, "2.30.7": what NCCL_IB_HCA may say depends on it.
struct Version {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const Version&) const = default;
};
// "2.30.7" (a suffix after '-' or '+', as in "2.30.7-1", is ignored). InvalidArgument otherwise.
absl::StatusOr<Version> ParseVersion(std::string_view text);
// NCCL 2.30.7 reads "hca:port:rail:plane" in NCCL_IB_HCA (older releases ignore what follows the
// port); 2.29.7 orders its HCAs by PCI path (NCCL_IB_DEVICE_PCI_ORDER, default on).
inline constexpr Version kNcclRails{2, 30, 7};
inline constexpr Version kNcclPciOrder{2, 29, 7};

// Another IPv4 GID of a chosen port: NCCL_IB_ADDR_RANGE must not also select it.
struct OtherGid {
  uint32_t index = 0;
  std::string ipv4;
  bool roce_v2_or_unknown = false;  // What NCCL's dynamic pick would take (RoCE v1 it skips).
  std::string what;                 // For notes: "RoCE v2 on eth3".
};

// One GPU of the scope and the port chosen for it (the agent's selection, or fabric-cni's pod
// interface).
struct Pick {
  std::string gpu;     // Canonical PCI address; empty for a pod interface without a GPU.
  std::string device;  // "mlx5_1".
  uint32_t port = 1;
  std::string device_pci;  // The NIC's PCI address (vLLM's map); empty when unknown.
  std::string netdev;
  bool roce = false;                  // Ethernet link layer: GIDs need choosing.
  std::optional<uint32_t> gid_index;  // RoCE: the chosen GID; unset when none is usable.
  std::string ipv4;                   // The chosen GID's address (IPv4-mapped).
  std::string ipv4_subnet;            // Its connected subnet, CIDR, when known.
  std::string ipv6;                   // The chosen GID's address when it is a global IPv6 one.
  std::vector<OtherGid> other_ipv4_gids;
  std::string gpu_vendor;      // "nvidia" (NCCL's) or "amd" (RCCL's); empty for other devices.
  std::string profile;         // The NIC's vendor profile (profiles.h); empty when unknown.
  std::string gpudirect;       // "nvidia_peermem", "nv_peer_mem", "dma_buf", "none"; empty: no GPU.
  std::string sys_image_guid;  // Shared by one NIC's ports; empty when unknown.
  std::optional<uint32_t> rail;  // NCCL's rail number: the port's rail's place in the policy.
  std::string Port() const;      // "mlx5_1:1".
};

struct Request {
  // The job's GPUs on this host, in the caller's order (the CUDA ordinals after
  // CUDA_VISIBLE_DEVICES: SGLang's keys). At least one.
  std::vector<Pick> scope;
  // scope[*rank] is this process's GPU; unset: no pins.
  std::optional<size_t> rank;
  Consumers consumers;
  // NCCL_SOCKET_IFNAME: this name (the policy's, or fabric-cni's pod interfaces) when set, else
  // the first default-route netdev in natural order, else the first pick's netdev.
  std::string socket_ifname;
  std::vector<std::string> default_route_netdevs;
  // The operator's variables (policy.static_env): job variables that win over computed ones.
  EnvMap static_env;
  // The NCCL the job loads, when known (the environment plugin says): from kNcclRails the list
  // names rails, from kNcclPciOrder it follows NCCL's own order.
  std::optional<Version> nccl_version;
  // The operator's changes to a NIC vendor profile's variables (policy.nic_profiles), by profile
  // name: a value replaces or adds, an empty one leaves the variable out.
  std::map<std::string, EnvMap> profile_env;
  // NCCL_TOPO_FILE: the topology file the agent read (Host.nccl_topology), for NCCL and RCCL.
  std::string nccl_topo_file;
};

struct Result {
  // The same for every rank of the scope; NCCL's lines are byte-identical whatever the scope's
  // order (FABRIC_SGLANG_IB_DEVICE follows it: its keys are CUDA ordinals).
  EnvMap job;
  EnvMap pins;                     // The rank GPU's; empty without a rank.
  std::vector<std::string> notes;  // Fallbacks and omissions, for an operator to read.
  EnvMap Merged() const;           // job, then pins (no name is in both).
};

// The job variables that hold for every subset of the scope: those that name no device (GID
// rules, the socket interface, the operator's static env). CDI's per-GPU and per-NIC devices carry
// only these, so a container given any combination of devices sees no two values of one name.
EnvMap SubsetInvariant(const EnvMap& job);

// NCCL's and RCCL's own variables, which NCCL's environment plugin answers: where the plugin is
// set (CDI, the device plugin), they are left to it, since a set variable wins over its answer.
bool AnsweredByNcclEnvPlugin(std::string_view name);

// InvalidArgument for an empty scope, a pick without a device, or a rank outside the scope.
absl::StatusOr<Result> Render(const Request& req);

}  // namespace fabric::jobenv
