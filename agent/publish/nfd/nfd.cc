#include "agent/publish/nfd/nfd.h"

#include <errno.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/atomic_file.h"
#include "agent/common/k8s_label.h"
#include "agent/fabric/neighbors/lldp.h"
#include "agent/inventory/query/host_query.h"
#include "agent/policy/health/health.h"
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

}  // namespace

std::string RenderNfdFeatures(const Host& host, const SelectionPolicy& policy,
                              v1::Severity health) {
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
  if (health != v1::SEVERITY_UNSPECIFIED) {
    Label(out, "health", absl::AsciiStrToLower(SeverityName(health)));
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
    return ErrnoError(err, absl::StrCat("NFD features directory ", dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("NFD features directory ", dir, " is not a directory"));
  }
  return ReplaceFileIfChanged(dir, kNfdFeatureFile, text);
}

}  // namespace fabric
