#include "agent/fabric/gpumem/registration_failure.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/fd.h"

namespace fabric::gpumem {
namespace {

constexpr size_t kMaxRead = 64 * 1024;

bool OneOf(int err, std::initializer_list<int> errs) {
  for (int e : errs) {
    if (err == e) return true;
  }
  return false;
}

std::string IommuHint(const HostGpuFacts& h) {
  if (!h.iommu) return "";
  return "; the IOMMU is on (/sys/class/iommu has entries): its translation can block "
         "peer-to-peer DMA between the NIC and the GPU, and PCIe ACS redirects it through the "
         "root complex";
}

std::string ExplainExport(const RegistrationFailure& f) {
  const HostGpuFacts& h = f.host;
  const std::string said = f.detail.empty() ? "" : absl::StrCat(" (", f.detail, ")");
  if (f.vendor == GpuVendor::kCuda) {
    if (h.nvidia_loaded && !h.nvidia_open) {
      return absl::StrCat(
          "the NVIDIA proprietary kernel module cannot export GPU memory as dma-buf: the open "
          "kernel module is needed (or nvidia_peermem and the peer-memory path)",
          said);
    }
    return absl::StrCat("the NVIDIA driver could not export the GPU memory as dma-buf", said);
  }
  if (!h.kernel_config_missing.empty()) {
    std::string missing;
    for (const std::string& o : h.kernel_config_missing) {
      absl::StrAppend(&missing, missing.empty() ? "" : " and ", o);
    }
    return absl::StrCat("the kernel lacks ", missing,
                        ", which dma-buf export of AMD GPU memory needs (or use the peer-memory "
                        "path)",
                        said);
  }
  return absl::StrCat("the ROCm runtime could not export the GPU memory as dma-buf", said);
}

std::string ExplainPeerMemory(const RegistrationFailure& f) {
  const HostGpuFacts& h = f.host;
  if (f.vendor == GpuVendor::kCuda && !h.nvidia_peermem) {
    return "nvidia_peermem is not loaded: ibv_reg_mr cannot pin GPU memory without it (modprobe "
           "nvidia_peermem, or use the dma-buf path)";
  }
  if (f.vendor == GpuVendor::kRocm && !h.amdgpu_loaded) {
    return "amdgpu is not loaded: no AMD GPU memory can be pinned for RDMA";
  }
  if (f.vendor == GpuVendor::kRocm && !h.amd_peer_memory) {
    return "amdgpu is loaded but offers RDMA no peer memory (no amdkfd peer-memory client under "
           "/sys/kernel/mm/memory_peers: ROCm's amdgpu-dkms and an RDMA stack with peer-memory "
           "support are needed; or use the dma-buf path)";
  }
  return absl::StrCat("the NIC could not map the GPU's memory (", ErrnoText(f.err), ")",
                      IommuHint(h));
}

}  // namespace

std::string HostFiles::Under(const std::string& path) const {
  if (root_.empty() || root_ == "/") return path;
  return root_.back() == '/' ? absl::StrCat(root_, path.substr(1)) : absl::StrCat(root_, path);
}

std::optional<std::string> HostFiles::Read(const std::string& path) const {
  UniqueFd fd(open(Under(path).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string out;
  char buf[4096];
  while (out.size() < kMaxRead) {
    const ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  if (out.size() > kMaxRead) out.resize(kMaxRead);
  return out;
}

bool HostFiles::Exists(const std::string& path) const {
  struct stat st;
  return stat(Under(path).c_str(), &st) == 0;
}

bool HostFiles::HasEntries(const std::string& dir) const {
  DIR* d = opendir(Under(dir).c_str());
  if (d == nullptr) return false;
  bool any = false;
  while (const dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
      any = true;
      break;
    }
  }
  closedir(d);
  return any;
}

HostGpuFacts ReadHostGpuFacts(const HostFiles& files, const std::string& kernel_release) {
  HostGpuFacts h;
  if (std::optional<std::string> v = files.Read("/proc/driver/nvidia/version")) {
    h.nvidia_loaded = true;
    // The open module's banner: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64 ...".
    h.nvidia_open = v->find("Open Kernel Module") != std::string::npos;
  }
  h.nvidia_peermem =
      files.Exists("/sys/module/nvidia_peermem") || files.Exists("/sys/module/nv_peer_mem");
  h.amdgpu_loaded = files.Exists("/sys/module/amdgpu");
  h.amd_peer_memory = files.Exists("/sys/kernel/mm/memory_peers/amdkfd");
  h.iommu = files.HasEntries("/sys/class/iommu");
  if (!kernel_release.empty()) {
    if (std::optional<std::string> config =
            files.Read(absl::StrCat("/boot/config-", kernel_release))) {
      for (const char* option : {"CONFIG_DMABUF_MOVE_NOTIFY=y", "CONFIG_PCI_P2PDMA=y"}) {
        // Whole lines: "=y" must not match a prefix of another option's value.
        if (absl::StrCat("\n", *config, "\n").find(absl::StrCat("\n", option, "\n")) ==
            std::string::npos) {
          h.kernel_config_missing.push_back(option);
        }
      }
    }
  }
  return h;
}

std::string KernelRelease() {
  struct utsname u;
  if (uname(&u) != 0) return "";
  return u.release;
}

std::string ExplainRegistrationFailure(const RegistrationFailure& f) {
  if (f.stage == RegistrationFailure::Stage::kExport) return ExplainExport(f);
  const std::string dev = f.rdma_device.empty() ? "the RDMA device" : f.rdma_device;
  if (f.dmabuf && !f.has_reg_dmabuf_mr) {
    return "rdma-core older than v34 has no ibv_reg_dmabuf_mr (update rdma-core, or use the "
           "peer-memory path)";
  }
  if (f.dmabuf && OneOf(f.err, {EOPNOTSUPP, ENOTSUP, ENOSYS})) {
    return absl::StrCat("the RDMA provider of ", dev,
                        " cannot register dma-buf memory (Soft-RoCE and older drivers cannot; use "
                        "the peer-memory path or a NIC whose driver can)");
  }
  if (OneOf(f.err, {EPERM, EACCES})) {
    return absl::StrCat(dev, " was refused access to the GPU's memory (", ErrnoText(f.err), ")",
                        IommuHint(f.host));
  }
  if (!f.dmabuf && OneOf(f.err, {EFAULT, EINVAL, ENOENT})) return ExplainPeerMemory(f);
  if (f.dmabuf && OneOf(f.err, {EFAULT, EINVAL})) {
    return absl::StrCat(dev, " could not map the GPU's dma-buf (", ErrnoText(f.err), ")",
                        IommuHint(f.host));
  }
  return ErrnoText(f.err != 0 ? f.err : EIO);
}

std::string ExplainExportFailure(GpuVendor vendor, const std::string& detail,
                                 const HostFiles& files) {
  RegistrationFailure f;
  f.stage = RegistrationFailure::Stage::kExport;
  f.vendor = vendor;
  f.detail = detail;
  f.host = ReadHostGpuFacts(files, vendor == GpuVendor::kRocm ? KernelRelease() : "");
  return ExplainRegistrationFailure(f);
}

MrCalls DefaultMrCalls() {
  MrCalls c;
  c.reg_dmabuf_mr =
      reinterpret_cast<decltype(c.reg_dmabuf_mr)>(dlsym(RTLD_DEFAULT, "ibv_reg_dmabuf_mr"));
  // ibv_reg_mr is a macro over an inline function in newer verbs.h: wrap it.
  c.reg_mr = [](ibv_pd* pd, void* addr, size_t length, int access) -> ibv_mr* {
    return ibv_reg_mr(pd, addr, length, access);
  };
  c.dereg_mr = [](ibv_mr* mr) { return ibv_dereg_mr(mr); };
  return c;
}

absl::StatusOr<ibv_mr*> RegisterGpuRange(ibv_pd* pd, const GpuRange& range, int access,
                                         const MrCalls& calls, const HostFiles& files) {
  if (pd == nullptr) return absl::InvalidArgumentError("no protection domain to register with");
  const bool dmabuf = range.dmabuf_fd >= 0;
  RegistrationFailure f;
  f.vendor = range.vendor;
  f.dmabuf = dmabuf;
  if (pd->context != nullptr && pd->context->device != nullptr) {
    f.rdma_device = ibv_get_device_name(pd->context->device);
  }
  const char* call = dmabuf ? "ibv_reg_dmabuf_mr" : "ibv_reg_mr";
  ibv_mr* mr = nullptr;
  errno = 0;
  if (!dmabuf) {
    mr = calls.reg_mr(pd, reinterpret_cast<void*>(range.device_ptr), range.size, access);
  } else if (calls.reg_dmabuf_mr != nullptr) {
    mr = calls.reg_dmabuf_mr(pd, range.dmabuf_offset, range.size, range.device_ptr, range.dmabuf_fd,
                             access);
  } else {
    f.has_reg_dmabuf_mr = false;
  }
  if (mr != nullptr) return mr;
  f.err = errno != 0 ? errno : EIO;
  f.host = ReadHostGpuFacts(files, range.vendor == GpuVendor::kRocm ? KernelRelease() : "");
  return absl::InternalError(
      absl::StrCat(call, " of ", range.size, " bytes of GPU ", range.gpu, " on ",
                   f.rdma_device.empty() ? std::string("the RDMA device") : f.rdma_device,
                   " failed: ", ExplainRegistrationFailure(f)));
}

}  // namespace fabric::gpumem
