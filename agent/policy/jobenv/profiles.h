// NIC vendor profiles: the variables a NIC's vendor publishes for NCCL and RCCL over it, each with
// the source it was read in. NCCL's defaults are mlx5's; other NICs need their vendor's recipe
// (AMD's Pollara through its own net plugin, AWS EFA through libfabric with no NCCL_IB_HCA at all).
// The operator changes a profile in the config (selection.nic_profiles); jobenv.cc applies it.
#pragma once

#include <span>
#include <string_view>

namespace fabric::jobenv {

struct ProfileVar {
  std::string_view name;
  std::string_view value;
  std::string_view source;  // Where the vendor publishes it.
};

struct Profile {
  std::string_view name;  // "mlx5": what selection.nic_profiles and GpuAssignment.nic_profile say.
  std::string_view what;  // "NVIDIA ConnectX (mlx5)".
  // NCCL's own IB transport drives the NIC (NCCL_IB_HCA and the GID variables apply); false for
  // a NIC NCCL reaches through a net plugin over libfabric (EFA).
  bool nccl_ib = true;
  std::span<const ProfileVar> vars;
};

std::span<const Profile> Profiles();
const Profile* FindProfile(std::string_view name);  // Null when there is none of that name.

// The profile of a NIC from its PCI driver ("mlx5_core"), else its RDMA device's name ("irdma0");
// empty when neither says (a software device: rxe, siw).
std::string_view ProfileOf(std::string_view pci_driver, std::string_view device);

}  // namespace fabric::jobenv
