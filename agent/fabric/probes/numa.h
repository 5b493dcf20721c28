// Where a test's thread runs and its buffer lives, as current perftest places itself before it
// opens the device: --pin_cores, --numa_node, or by default the NIC's NUMA node (its CPUs, and
// memory bound there), unless something already narrowed the process's CPUs (taskset, a cgroup's
// cpuset, Slurm's binding) or --disable_numa. libnuma behind NumaOs.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/hostfs/host_fs.h"

namespace fabric::probes {

struct Placement {
  enum class Mode {
    kNone,  // leave the thread as it is (the agent: its threads are not one test's)
    kAuto,  // the NIC's node, unless the CPUs are narrowed already (perftest's default)
    kNode,  // --numa_node
    kCpus,  // --pin_cores
    kOff,   // --disable_numa
  };
  Mode mode = Mode::kNone;
  int node = -1;     // kNode
  std::string cpus;  // kCpus: "0-3,8,12-15"
};

// The calling thread's CPUs and memory policy (libnuma: the policy is the thread's).
class NumaOs {
 public:
  virtual ~NumaOs() = default;
  virtual bool Available() const = 0;  // a NUMA-capable kernel
  virtual int MaxNode() const = 0;
  virtual int OnlineCpus() const = 0;
  virtual int AllowedCpus() const = 0;  // in this thread's affinity
  // Runs on `node`'s CPUs and binds future allocations there, moving what is allocated already.
  virtual absl::Status RunOnNode(int node) = 0;
  // sched_setaffinity to `cpus` ("0-3,8"); InvalidArgument for a list libnuma cannot parse.
  virtual absl::Status PinCpus(const std::string& cpus) = 0;
};
std::unique_ptr<NumaOs> MakeNumaOs();

// Applies `p` for `device` (its node from sysfs class/infiniband/DEVICE/device/numa_node).
// Returns what was done, for a log line ("NUMA node 1, the NIC's"; empty: nothing). An explicit
// --numa_node or --pin_cores that cannot be applied is an error; the automatic binding that
// fails says so in the returned words and the test goes on, as perftest's warning.
absl::StatusOr<std::string> Place(const Placement& p, const HostFs& sys, const std::string& device,
                                  NumaOs& os);

}  // namespace fabric::probes
