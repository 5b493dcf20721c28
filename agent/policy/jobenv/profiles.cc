// Each profile holds only what its vendor publishes (the sources below, read December 2026).
// GID indices are not in them: the agent reads each port's GID table and chooses (a vendor's
// default index, 1 for ionic and 3 for bnxt_re, is a guess at a table the agent can see).
#include "agent/policy/jobenv/profiles.h"

#include "absl/strings/match.h"
#include "agent/common/strings.h"

namespace fabric::jobenv {
namespace {

constexpr std::string_view kPrimus =
    "AMD-AGI/Primus runner/helpers/hooks/03_enable_ainic.sh (fd1eeab)";
// AMD's Pollara AI NIC: RCCL with AMD's network plugin (built into RCCL from ROCm 7.2.1, where
// RCCL_AINIC_ROCE=1 turns it on; librccl-anp.so before). The traffic classes are Primus'
// defaults; its hook reads the site's from `nicctl show qos`, and a site sets its own here.
constexpr ProfileVar kIonic[] = {
    {"NCCL_NET_PLUGIN", "librccl-anp.so", kPrimus},
    {"RCCL_AINIC_ROCE", "1", kPrimus},
    {"NCCL_IB_TC", "104", kPrimus},
    {"NCCL_IB_FIFO_TC", "192", kPrimus},
    {"NCCL_IB_ROCE_VERSION_NUM", "2", kPrimus},
    {"NCCL_IB_SL", "0", kPrimus},
    {"NCCL_IB_USE_INLINE", "1", kPrimus},
    {"NCCL_IB_QPS_PER_CONNECTION", "1", kPrimus},
    {"NCCL_MAX_P2P_CHANNELS", "56", kPrimus},
    {"NCCL_GDR_FLUSH_DISABLE", "1", kPrimus},
    {"NCCL_DMABUF_ENABLE", "0", kPrimus},
    {"NCCL_IGNORE_CPU_AFFINITY", "1", kPrimus},
};

// Broadcom Thor/Thor2: Broadcom publishes no NCCL recipe; AMD's cluster guides for RCCL on
// Thor2 are the source.
constexpr std::string_view kCvs = "ROCm/cvs cvs/input/env_file/rccl/thor2_env_script.sh";
constexpr ProfileVar kBnxt[] = {
    {"NCCL_IGNORE_CPU_AFFINITY", "1",
     "ROCm/gpu-cluster-networking docs/how-to/multi-node-config.rst"},
    {"NCCL_PXN_DISABLE", "0",
     "AMD-AGI/Primus docs/02-user-guide/preflight-without-container.md (Broadcom NICs)"},
    // Without it bnxt_re fails registration ("ib_umem_get failed! rc = -14") from ROCm 7.1.
    {"NCCL_CUMEM_ENABLE", "1", kCvs},
    {"NCCL_DMABUF_ENABLE", "1", kCvs},
};

// AWS EFA: NCCL reaches it through aws-ofi-nccl over libfabric; NCCL_IB_HCA does not apply, and
// FI_EFA_IFACE (jobenv.cc, from the job's devices) is what names the devices. FI_PROVIDER,
// FI_EFA_USE_DEVICE_RDMA and FI_EFA_FORK_SAFE are no longer set by hand (doc/efa-env-var.md).
constexpr ProfileVar kEfa[] = {
    {"NCCL_NET_PLUGIN", "ofi", "aws/aws-ofi-nccl src/Makefile.am"},
};

constexpr Profile kProfiles[] = {
    {"mlx5", "NVIDIA ConnectX and BlueField (mlx5)", true, {}},
    {"bnxt_re", "Broadcom NetXtreme-E (bnxt_re)", true, kBnxt},
    {"ionic", "AMD Pensando Pollara (ionic)", true, kIonic},
    // Intel publishes libfabric settings for MPI over irdma, none for NCCL: NCCL's defaults.
    {"irdma", "Intel Ethernet E810/X722 (irdma)", true, {}},
    {"efa", "AWS Elastic Fabric Adapter (efa)", false, kEfa},
};

struct DriverProfile {
  std::string_view driver;  // The PCI driver of the NIC's function.
  std::string_view device;  // The RDMA device's name prefix, where the driver is not known.
  std::string_view profile;
};
constexpr DriverProfile kDrivers[] = {
    {"mlx5_core", "mlx5_", "mlx5"}, {"bnxt_en", "bnxt_re", "bnxt_re"},
    {"ionic", "ionic", "ionic"},    {"ice", "irdma", "irdma"},
    {"i40e", "", "irdma"},          {"efa", "efa", "efa"},
};

}  // namespace

std::span<const Profile> Profiles() { return kProfiles; }

const Profile* FindProfile(std::string_view name) {
  for (const Profile& p : kProfiles) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string_view ProfileOf(std::string_view pci_driver, std::string_view device) {
  for (const DriverProfile& d : kDrivers) {
    if (!pci_driver.empty() && pci_driver == d.driver) return d.profile;
  }
  if (!pci_driver.empty()) return "";
  for (const DriverProfile& d : kDrivers) {
    if (!d.device.empty() && absl::StartsWith(Av(device), Av(d.device))) return d.profile;
  }
  return "";
}

}  // namespace fabric::jobenv
