// RDMA port counters from sysfs: class/infiniband/<device>/ports/<port>/counters/ (the IB
// PortCounters set every driver with a PMA exposes) and hw_counters/ (driver-specific, e.g.
// mlx5's RoCE congestion and retransmission counters). Parsing is apart from reading, so the
// parser is table-tested and fuzzed (counters_fuzz.cc) without files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/hostfs/host_fs.h"
#include "fabric/v1/agent.pb.h"
#include "fabric/v1/host.pb.h"

namespace fabric::metrics {

// One counter file's value. The kernel prints every counter in decimal ("%llu\n", both in
// counters/ and hw_counters/); nothing else is a value:
//   "12345\n", "12345", "0\n", "007\n"          -> 12345, 12345, 0, 7
//   "", "\n", " 1", "1 ", "1\n\n", "+1", "-1", "0x1f", "1.5", "12abc",
//   "18446744073709551616" (2^64)               -> InvalidArgument, the message quoting the input
//   "N/A (no PMA)\n"                             -> Unavailable: older kernels print this
//                                                  for counters of a device without a PMA
absl::StatusOr<uint64_t> ParseCounterValue(std::string_view text);

struct Counter {
  std::string name;  // The file's name, e.g. "port_rcv_data" or "np_cnp_sent".
  uint64_t value = 0;
};

struct PortCounters {
  std::vector<Counter> counters;     // counters/, by name.
  std::vector<Counter> hw_counters;  // hw_counters/, by name.
  // Files that could not be read or parsed (field "counters/<name>" or "hw_counters/<name>", the
  // root-relative path, and why). Such a file is left out; the others are still read.
  std::vector<v1::FieldProblem> problems;
};

// Reads counters/ and hw_counters/ below an open port directory. A missing directory has no
// counters and is no problem (hw_counters/ is driver-specific; some drivers have no counters/).
// A file that disappears between listing and reading, or reads "N/A (no PMA)", is left out and
// no problem either; any other unreadable (e.g. a directory, EIO, longer than a counter can be)
// or unparsable file is a problem.
PortCounters ReadPortCounters(const HostDir& port_dir);

// The same for port `port` of RDMA device `device`, found through class/infiniband/<device>
// inside the sysfs root. NotFound when the device's directory or the port's is gone (the device
// was removed since the inventory was taken: the caller drops it); other errors when the device
// directory cannot be opened.
absl::StatusOr<PortCounters> ReadPortCounters(const HostFs& sysfs, std::string_view device,
                                              uint32_t port);

// Opens class/infiniband/<device> inside the root (RealPath, then OpenDir). NotFound when the
// device is gone.
absl::StatusOr<std::unique_ptr<HostDir>> OpenRdmaDeviceDir(const HostFs& sysfs,
                                                           std::string_view device);

// The RDMA devices of `host` whose sysfs directory is still there, each with it open, in inventory
// order; with `only`, only the device of that name. A device removed since the inventory was
// taken is left out.
struct PresentDevice {
  const v1::RdmaDevice* device;
  std::unique_ptr<HostDir> dir;
};
std::vector<PresentDevice> PresentRdmaDevices(const v1::Host& host, const HostFs& sysfs,
                                              std::string_view only = {});

// hw_counters/ entries that are not counts. lifespan is the age in milliseconds after which the
// driver refreshes the cached hw_counters values (a writable setting); bnxt_re's active_* are
// current resource counts and its watermark_* their highest levels, which go down again.
bool IsHwSetting(std::string_view name);
bool IsHwLevel(std::string_view name);

// The counters of the ports of `host` (the inventory) that `req` asks for, read now below
// `sysfs`: the GetPortCounters RPC, and `fabricctl counters` with --sysfs. A device gone since the
// inventory was taken is left out with a note; unreadable files are the port's problems. Only
// the request is an error: NotFound for a device the host does not have (the message lists those
// it has) or a port the device does not have; InvalidArgument for a port without a device.
absl::StatusOr<v1::PortCountersResponse> ReadHostPortCounters(
    const v1::Host& host, const HostFs& sysfs, const v1::GetPortCountersRequest& req);

}  // namespace fabric::metrics
