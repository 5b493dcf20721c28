#include "agent/publish/nfd/nfd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/errno.h"
#include "agent/common/fd.h"
#include "agent/common/k8s_label.h"
#include "agent/fabric/neighbors/lldp.h"
#include "agent/inventory/query/host_query.h"
#include "agent/policy/rails/rails.h"
#include "agent/policy/select/select.h"

namespace fabric {
namespace {

using namespace ::fabric::v1;  // NOLINT

// Rate in Gb/s as a label value: "400", "2.5", "53.125".
std::string RateValue(double gbps) {
  if (gbps == std::floor(gbps) && gbps < 1e15) return absl::StrFormat("%.0f", gbps);
  return absl::StrFormat("%g", gbps);
}

// The facts the labels are made of.
struct Facts {
  bool present = false;
  int nics = 0;
  bool ib = false, roce = false;
  std::optional<double> min_rate;
  std::vector<std::string> gpus;
  bool aligned = false;
  bool gpudirect = false;
  std::string frontend_leaf;  // The default-route netdev's neighbour (the first by name).
  std::set<std::string> backend_leaves;  // The back-end ports' neighbours.
  // Configured rails: the leaves heard on each (by the neighbours' names).
  std::map<std::string, std::set<std::string>> rail_leaves;
};

Facts Gather(const Host& host, const SelectionPolicy& policy) {
  Facts f;
  f.present = !host.rdma_devices().empty();

  std::set<std::string> counted;
  for (const BackendPort& bp : BackendPorts(host, policy)) {
    const Port& port = *bp.port;
    counted.insert(bp.device->name());
    if (port.link_layer() == LINK_LAYER_INFINIBAND) f.ib = true;
    if (port.link_layer() == LINK_LAYER_ETHERNET) f.roce = true;
    if (port.has_rate_gbps() && std::isfinite(port.rate_gbps()) && port.rate_gbps() > 0) {
      f.min_rate = f.min_rate ? std::min(*f.min_rate, port.rate_gbps()) : port.rate_gbps();
    }
  }
  f.nics = static_cast<int>(counted.size());

  for (const Netdev& n : host.netdevs()) {
    if (n.default_route() && n.has_neighbor() && f.frontend_leaf.empty()) {
      f.frontend_leaf = n.neighbor().switch_label();
    }
  }
  for (const PortRail& r : PortRails(host, policy)) {
    if (r.neighbor == nullptr) continue;
    f.backend_leaves.insert(r.neighbor->switch_label());
    if (r.heard != nullptr) f.rail_leaves[r.heard->name()].insert(r.neighbor->switch_label());
  }

  f.gpus = ComputeGpus(host);

  if (!f.gpus.empty() && f.nics > 0) {
    absl::StatusOr<Selection> sel = SelectNics(host, f.gpus, policy);
    if (sel.ok()) {
      f.aligned = sel->assignments_size() == static_cast<int>(f.gpus.size());
      for (const GpuAssignment& a : sel->assignments()) {
        f.aligned &= a.distance() == DISTANCE_CLASS_PIX || a.distance() == DISTANCE_CLASS_PXB;
      }
    }
    f.gpudirect = host.gpudirect().available();
  }
  return f;
}

void Label(std::string& out, std::string_view name, const std::string& value) {
  const std::string key = absl::StrCat(kNfdLabelNamespace, "/", std::string(name));
  // Every value below is valid by construction; this keeps a bad one from reaching nfd-master,
  // which would reject the whole NodeFeature update.
  if (!IsValidLabelKey(key) || !IsValidLabelValue(value)) return;
  absl::StrAppend(&out, key, "=", value, "\n");
}

const char* Bool(bool b) { return b ? "true" : "false"; }

absl::Status ErrnoStatus(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(what, ": ", ErrnoText(err)));
}

// The file's content, or nullopt when it cannot be read (absent, a directory, ...).
std::optional<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

bool WriteFully(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string RenderNfdFeatures(const Host& host, const SelectionPolicy& policy) {
  const Facts f = Gather(host, policy);
  std::string out =
      "# RDMA fabric features of this node, for the NFD local feature source. Written by "
      "fabric-agent: do not edit.\n";
  Label(out, "present", Bool(f.present));
  if (f.ib || f.roce)
    Label(out, "link-layer", f.ib && f.roce ? "mixed" : f.ib ? "infiniband" : "roce");
  Label(out, "nics", absl::StrCat(f.nics));
  if (f.min_rate) Label(out, "rate-gbps", RateValue(*f.min_rate));
  Label(out, "gpus", absl::StrCat(f.gpus.size()));
  Label(out, "gpu-nic-aligned", Bool(f.aligned));
  Label(out, "gpudirect", Bool(f.gpudirect));
  // Fabric position, from the neighbours heard over LLDP (none heard: no labels, never a guess).
  if (!f.frontend_leaf.empty()) Label(out, "leaf.frontend", f.frontend_leaf);
  if (!f.backend_leaves.empty()) {
    Label(out, "backend-leaves", absl::StrCat(f.backend_leaves.size()));
    if (f.backend_leaves.size() == 1) Label(out, "leaf.backend", *f.backend_leaves.begin());
    Label(out, "leaf-group",
          neighbors::GroupLabelValue({f.backend_leaves.begin(), f.backend_leaves.end()}));
  }
  for (const auto& [rail, leaves] : f.rail_leaves) {
    Label(out, absl::StrCat("leaf.", rail),
          leaves.size() == 1 ? *leaves.begin()
                             : neighbors::GroupLabelValue({leaves.begin(), leaves.end()}));
  }
  return out;
}

absl::StatusOr<bool> WriteNfdFeatures(const std::string& dir, const std::string& text) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("NFD features directory ", dir, " does not exist (is NFD deployed?)"));
    }
    return ErrnoStatus(err, absl::StrCat("NFD features directory ", dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("NFD features directory ", dir, " is not a directory"));
  }
  const std::string path = absl::StrCat(dir, "/", kNfdFeatureFile);
  if (std::optional<std::string> current = ReadAll(path); current && *current == text) {
    return false;
  }

  // A dot file: nfd-worker skips it while it is incomplete.
  std::string tmp = absl::StrCat(dir, "/.", kNfdFeatureFile, ".XXXXXX");
  UniqueFd fd(::mkstemp(tmp.data()));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("cannot create a file in ", dir));
  auto fail = [&](const std::string& what) {
    const int err = errno;
    fd.reset();  // before the unlink
    ::unlink(tmp.c_str());
    return ErrnoStatus(err, absl::StrCat(what, " ", tmp));
  };
  if (::fchmod(fd.get(), 0644) != 0) return fail("chmod");
  if (!WriteFully(fd.get(), text)) return fail("write");
  if (::fsync(fd.get()) != 0) return fail("fsync");
  // Checked: a failed close of a written file may mean lost data. Closed before the rename.
  if (const int err = fd.Close(); err != 0) {
    ::unlink(tmp.c_str());
    return ErrnoStatus(err, absl::StrCat("close ", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus(err, absl::StrCat("rename ", tmp, " to ", path));
  }
  // The rename itself survives a crash only once the directory is synced; the file is complete
  // either way, so a failure here is not an error.
  if (UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); dfd.valid()) {
    (void)::fsync(dfd.get());
  }
  return true;
}

}  // namespace fabric
