// The RDMA character devices a process can really use, as the kernel answers an open(): what
// `fabricctl doctor` reports about /dev/infiniband inside a job's container. A node that exists
// can still refuse: ENXIO/ENODEV (no driver behind its numbers), EPERM (the container's cgroup
// device rules), EACCES (its mode). Opening uverbsN and rdma_cm has no effect past the close.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fabric {

struct NodeOpen {
  std::string name;     // "uverbs0", "rdma_cm".
  bool is_char = true;  // A character device (a plain file there is a mistake of its own).
  int error = 0;        // errno of open(O_RDWR), 0 when it opened.
};

// uverbs* and rdma_cm under `dir` (/dev/infiniband), in natural order; at most `limit` of them.
// NotFound when `dir` does not exist; another error when it cannot be listed.
absl::StatusOr<std::vector<NodeOpen>> OpenRdmaNodes(const std::string& dir, size_t limit = 1024);

}  // namespace fabric
