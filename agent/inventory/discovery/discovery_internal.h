// Shared by the parts of discovery: discovery.cc runs the scan in order and records problems; one
// .cc per concern reads its part of the host. Only for this folder; other code uses discovery.h.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/hostfs/host_fs.h"
#include "agent/inventory/discovery/parse.h"
#include "fabric/v1/host.pb.h"

namespace fabric::discovery_internal {

using Problems = google::protobuf::RepeatedPtrField<v1::FieldProblem>;

// --- Problems (discovery.cc) ------------------------------------------------------------------

void AddProblem(Problems* problems, std::string_view field, std::string_view path,
                absl::string_view reason);

// A failed read or parse: the status's message, and whether the read may succeed next time.
void AddProblem(Problems* problems, std::string_view field, std::string_view path,
                const absl::Status& why);

// For reads whose failure is normally no problem (an optional file, a module not loaded): only a
// transient failure is recorded, so that a rescan under pressure is not taken for the truth.
void NoteTransient(Problems* problems, std::string_view field, std::string_view path,
                   const absl::Status& why);

// gid_attrs of an unused GID entry fail with EINVAL on a real kernel and may be absent in a
// container: both mean "no attributes".
bool NoAttributes(const absl::Status& s);

// --- Reading one attribute --------------------------------------------------------------------

inline std::string Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

inline std::string Dirname(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string() : std::string(path.substr(0, slash));
}

// Reads one attribute and parses it; on failure records why and returns nullopt.
template <typename Parser>
auto ReadField(const HostDir& dir, std::string_view file, std::string_view field,
               Problems* problems, Parser parse)
    -> std::optional<typename decltype(parse(std::string_view()))::value_type> {
  absl::StatusOr<std::string> text = dir.ReadFile(file);
  if (!text.ok()) {
    AddProblem(problems, field, JoinPath(dir.path(), file), text.status());
    return std::nullopt;
  }
  auto value = parse(*text);
  if (!value.ok()) {
    AddProblem(problems, field, JoinPath(dir.path(), file), value.status());
    return std::nullopt;
  }
  return *std::move(value);
}

// Non-empty text without surrounding whitespace (a parser for ReadField).
inline absl::StatusOr<std::string> ParseText(std::string_view s) {
  std::string_view t = Trim(s);
  if (t.empty()) return absl::InvalidArgumentError("empty");
  return std::string(t);
}

// --- The parts, in the order discovery.cc runs them -------------------------------------------

// procfs.cc: what the later parts need of procfs.
struct ProcfsScan {
  std::vector<Ipv4Route> routes;  // for the netdevs' connected subnets
  std::set<std::string> modules;  // loaded kernel modules, for GPUDirect
};
// Hostname, kernel release, default-route netdevs and loaded modules.
ProcfsScan ReadProcfs(const HostFs& sys, const HostFs& proc, v1::Host* host);
// The IPv4 routes, with the IPv4 and IPv6 default-route netdevs into host (part of ReadProcfs).
std::vector<Ipv4Route> ReadRoutes(const HostFs& proc, v1::Host* host);
void ReadNumaNodes(const HostFs& sys, v1::Host* host);
// The effective arp_ignore/arp_announce of the RDMA netdevs (after ReadNetdevs).
void ReadArpSysctls(const HostFs& proc, v1::Host* host);

// pci.cc: reads PCI functions by their real directory (root-relative, links resolved), each once
// per scan, however many devices lead to it.
class PciReader {
 public:
  explicit PciReader(const HostFs& sys) : sys_(sys) {}
  const v1::PciFunction& Read(const std::string& dir);
  // Answers Read for the function at f.address() with `f` itself instead of reading it, so `f`
  // must outlive the reader (refresh.cc: netdev events change no PCI facts, and a PF's SR-IOV
  // set is dozens of reads).
  void Reuse(const v1::PciFunction& f) { reuse_[f.address()] = &f; }

 private:
  const HostFs& sys_;
  std::map<std::string, v1::PciFunction> cache_;
  std::map<std::string, const v1::PciFunction*> reuse_;
};

// rdma.cc: each port's directory, kept open for its GID table.
using PortDirs = std::map<const v1::Port*, std::pair<std::string, std::unique_ptr<HostDir>>>;
// What the later parts need of the RDMA devices.
struct RdmaScan {
  std::map<std::string, std::string> pci_dirs;  // device -> PCI directory; "" for rxe, siw
  PortDirs port_dirs;
};
// The RDMA devices (with their uverbs nodes) and ports, in natural name order, without GIDs.
RdmaScan ReadRdmaDevices(const HostFs& sys, PciReader* pci, v1::Host* host);
// The character devices of RDMA devices and ports.
struct RdmaNodes {
  std::map<std::string, std::string> uverbs;  // device -> "uverbs0" (class/infiniband_verbs)
  std::map<std::pair<std::string, uint32_t>, std::string> umad;  // (device, port) -> "umad0"
};
RdmaNodes ReadRdmaNodes(const HostFs& sys, v1::Host* host);
// One device (class/infiniband/<name>), appended to host->rdma_devices (refresh.cc re-reads one).
void ReadRdmaDevice(const HostFs& sys, const std::string& name, const RdmaNodes& nodes,
                    PciReader* pci, v1::Host* host, RdmaScan* scan);

// gids.cc: fills in the ports' GID tables. Takes the directories by value so that they are closed
// once read.
void ReadGidTables(PortDirs port_dirs, v1::Host* host);

// netdevs.cc: the RDMA devices' netdevs (matched to their ports), upper devices named by GID
// entries, and the default-route netdevs. Needs the GID tables and default routes read.
void ReadNetdevs(const HostFs& sys, const std::map<std::string, std::string>& device_pci_dirs,
                 const std::vector<Ipv4Route>& routes, v1::Host* host);
// What the routes say of each netdev of `host`: default_route (from default_route_netdevs) and
// its connected IPv4 subnets, in the routes' order.
class RouteFacts {
 public:
  RouteFacts(const std::vector<Ipv4Route>& routes, const v1::Host& host);
  // Whether `nd` says what the routes say already (a refresh writes only those that do not).
  bool Holds(const v1::Netdev& nd) const;
  void Apply(v1::Netdev* nd) const;

 private:
  const std::vector<std::string>& Subnets(const v1::Netdev& nd) const;

  absl::flat_hash_set<std::string> defaults_;
  absl::flat_hash_map<std::string, std::vector<std::string>> connected_;
};
// RouteFacts applied to every netdev of `host`, replacing what was there.
void ApplyRoutes(const std::vector<Ipv4Route>& routes, v1::Host* host);

// accelerators.cc: GPUs and other accelerators among the PCI functions, by PCI address, with
// their UUIDs (NVIDIA: procfs driver/nvidia/gpus/<bdf>/information; AMD: unique_id) and indices.
void ReadAccelerators(const HostFs& sys, const HostFs& proc, PciReader* pci, v1::Host* host);

// gpudirect.cc: GPUDirect RDMA readiness. Needs the accelerators, RDMA devices and modules read.
void ReadGpuDirect(const HostFs& proc, const std::set<std::string>& modules, v1::Host* host);

}  // namespace fabric::discovery_internal
