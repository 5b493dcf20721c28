#include "agent/fabric/probes/numa.h"

#include <numa.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/strings.h"

namespace fabric::probes {
namespace {

class NumaOsImpl final : public NumaOs {
 public:
  bool Available() const override { return numa_available() >= 0; }
  int MaxNode() const override { return numa_max_node(); }
  int OnlineCpus() const override { return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)); }
  int AllowedCpus() const override {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
  }
  absl::Status RunOnNode(int node) override {
    if (numa_run_on_node(node) != 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot run on NUMA node ", node, ": ", ErrnoText(errno)));
    }
    bitmask* to = numa_allocate_nodemask();
    numa_bitmask_setbit(to, static_cast<unsigned>(node));
    numa_set_membind(to);
    // What is allocated already follows (perftest's numa_migrate_pages); a failure leaves the
    // pages where they are, which costs speed, not correctness.
    (void)numa_migrate_pages(0, numa_all_nodes_ptr, to);
    numa_free_nodemask(to);
    return absl::OkStatus();
  }
  absl::Status PinCpus(const std::string& cpus) override {
    bitmask* mask = numa_parse_cpustring_all(cpus.c_str());
    if (mask == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--pin_cores=", cpus, " is not a CPU list"));
    }
    const int rc = numa_sched_setaffinity(0, mask);
    const int err = errno;
    numa_free_cpumask(mask);
    if (rc != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot pin to CPUs ", cpus, ": ", ErrnoText(err)));
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<NumaOs> MakeNumaOs() { return std::make_unique<NumaOsImpl>(); }

absl::StatusOr<std::string> Place(const Placement& p, const HostFs& sys, const std::string& device,
                                  NumaOs& os) {
  switch (p.mode) {
    case Placement::Mode::kNone:
    case Placement::Mode::kOff:
      return std::string();
    case Placement::Mode::kCpus:
      if (absl::Status s = os.PinCpus(p.cpus); !s.ok()) return s;
      return absl::StrCat("CPUs ", p.cpus);
    case Placement::Mode::kNode:
      if (!os.Available()) {
        return absl::FailedPreconditionError("--numa_node: this kernel has no NUMA support");
      }
      if (p.node < 0 || p.node > os.MaxNode()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--numa_node=", p.node, " is not a node of this host (0..", os.MaxNode(), ")"));
      }
      if (absl::Status s = os.RunOnNode(p.node); !s.ok()) return s;
      return absl::StrCat("NUMA node ", p.node);
    case Placement::Mode::kAuto:
      break;
  }
  // Someone narrowed the CPUs already: their choice stands (perftest's rule).
  if (!os.Available() || os.AllowedCpus() < os.OnlineCpus()) return std::string();
  absl::StatusOr<std::string> text =
      sys.ReadFile(absl::StrCat("class/infiniband/", device, "/device/numa_node"));
  if (!text.ok()) return std::string();  // a software device, or no PCI function behind it
  int node = -1;                         // -1: the kernel does not know
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(Av(*text)), &node) || node < 0 ||
      node > os.MaxNode()) {
    return std::string();
  }
  if (absl::Status s = os.RunOnNode(node); !s.ok()) {
    return absl::StrCat("not bound to ", device, "'s NUMA node (", s.message(), ")");
  }
  return absl::StrCat("NUMA node ", node, ", ", device, "'s");
}

}  // namespace fabric::probes
