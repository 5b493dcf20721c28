// GPUDirect RDMA readiness: whether an RDMA NIC can reach GPU memory directly, through a peer
// memory module or through dma-buf, and if not, why not.
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/common/strings.h"
#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/discovery/parse.h"

namespace fabric::discovery_internal {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values

namespace {

// "6.1.0-18-amd64" -> {6, 1}.
std::optional<std::pair<int, int>> KernelVersion(std::string_view release) {
  std::vector<absl::string_view> parts = absl::StrSplit(Av(release), absl::MaxSplits('.', 2));
  int major, minor;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &major)) return std::nullopt;
  absl::string_view m = parts[1];
  size_t end = 0;
  while (end < m.size() && absl::ascii_isdigit(static_cast<unsigned char>(m[end]))) ++end;
  if (!absl::SimpleAtoi(m.substr(0, end), &minor)) return std::nullopt;
  return std::make_pair(major, minor);
}

}  // namespace

void ReadGpuDirect(const HostFs& proc, const std::set<std::string>& modules, Host* host) {
  GpuDirect* gd = host->mutable_gpudirect();
  bool nvidia = false, amd = false, habana = false, any = false;
  for (const Accelerator& a : host->accelerators()) {
    if (a.management_display()) continue;
    any = true;
    nvidia |= a.vendor() == ACCELERATOR_VENDOR_NVIDIA;
    amd |= a.vendor() == ACCELERATOR_VENDOR_AMD;
    habana |= a.vendor_name() == "Habana Labs";
  }
  for (const char* m : {"nvidia_peermem", "nv_peer_mem"}) {
    if (modules.count(m)) {
      GpuDirectPath* p = gd->add_paths();
      p->set_mechanism(m);
      p->set_detail(absl::StrCat("module ", m, " loaded"));
    }
  }
  // dma-buf: the kernel's RDMA core imports dma-bufs since 5.12, and the GPU driver must
  // export them (NVIDIA: open kernel modules 515+; AMD amdgpu; Habana habanalabs).
  auto kv = KernelVersion(host->kernel_release());
  const bool kernel_ok = kv && *kv >= std::make_pair(5, 12);
  // Every GPU driver that exports: on a host with GPUs of two vendors each serves its own.
  std::vector<std::string> exporters;
  if (nvidia) {
    auto v = proc.ReadFile("driver/nvidia/version");
    if (!v.ok()) {
      NoteTransient(host->mutable_problems(), "gpudirect", "driver/nvidia/version", v.status());
    } else {
      std::string_view text = *v;
      if (absl::StrContains(Av(text), "Open Kernel Module")) {
        int major = 0;
        size_t x86 = text.find("x86_64");
        size_t at = x86 == std::string_view::npos ? text.find("aarch64") : x86;
        if (at != std::string_view::npos) {
          std::string_view rest = Trim(text.substr(text.find(' ', at)));
          (void)absl::SimpleAtoi(Av(rest.substr(0, rest.find('.'))), &major);
        }
        if (major >= 515) {
          exporters.push_back(absl::StrCat("NVIDIA open kernel module ", major));
        }
      }
    }
  }
  if (amd && modules.count("amdgpu")) exporters.push_back("amdgpu");
  if (habana && modules.count("habanalabs")) exporters.push_back("habanalabs");
  if (kernel_ok && !exporters.empty()) {
    GpuDirectPath* p = gd->add_paths();
    p->set_mechanism("dma_buf");
    p->set_detail(absl::StrCat("kernel ", host->kernel_release(), " imports dma-buf; ",
                               absl::StrJoin(exporters, " and "),
                               exporters.size() == 1 ? " exports it" : " export it"));
  }
  if (!any) {
    gd->set_reason("no GPU or accelerator");
  } else if (host->rdma_devices().empty()) {
    gd->set_reason("no RDMA device");
  } else if (gd->paths().empty()) {
    gd->set_reason(
        absl::StrCat("no nvidia_peermem or nv_peer_mem module loaded, and no dma-buf path "
                     "(kernel ",
                     host->kernel_release().empty() ? "unknown" : host->kernel_release(),
                     exporters.empty() ? ", no GPU driver exporting dma-buf" : "", ")"));
  }
  gd->set_available(any && !host->rdma_devices().empty() && !gd->paths().empty());
}

}  // namespace fabric::discovery_internal
