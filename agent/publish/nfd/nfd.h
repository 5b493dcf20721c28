// Node Feature Discovery (NFD) labels for the node's RDMA fabric, handed to nfd-worker through its
// "local" feature source: a file in /etc/kubernetes/node-feature-discovery/features.d/ with one
// `<namespace>/<name>=<value>` line per label and `#` comment lines. nfd-worker ignores dot files,
// which makes a temp file plus rename an atomic update.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "agent/common/k8s_label.h"  // IsValidLabelValue, IsValidLabelKey
#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// The label namespace: a DNS-style prefix of our own, so the labels never collide with NFD's
// built-in feature.node.kubernetes.io ones. nfd-master accepts any namespace outside
// kubernetes.io by default; a cluster that restricts them (-deny-label-ns) must allow this one
// (-extra-label-ns=rdma.fabric.io).
inline constexpr char kNfdLabelNamespace[] = "rdma.fabric.io";

// Where nfd-worker reads feature files, and the name of ours in it.
inline constexpr char kNfdFeaturesDir[] = "/etc/kubernetes/node-feature-discovery/features.d";
inline constexpr char kNfdFeatureFile[] = "fabric-agent";

// The feature file for `host`: a comment line, then these labels, in this order:
//   rdma.fabric.io/present=true|false    any RDMA device at all
//   rdma.fabric.io/link-layer=roce|infiniband|mixed
//                                        of the ports counted in `nics`; absent when none
//   rdma.fabric.io/nics=N                RDMA devices, SR-IOV VFs excepted, with an ACTIVE port
//                                        that is neither front-end (its netdev carries the
//                                        default route) nor denied by policy.deny
//   rdma.fabric.io/rate-gbps=R           the lowest rate of those ports (e.g. 400, 2.5); absent
//                                        when none is known
//   rdma.fabric.io/gpus=N                accelerators, management displays excepted
//   rdma.fabric.io/gpu-nic-aligned=true|false
//                                        SelectNics with every GPU under `policy` succeeds and
//                                        gives each a NIC at PIX or PXB; false with no GPU or no
//                                        counted NIC
//   rdma.fabric.io/gpudirect=true|false  a GPUDirect RDMA path, GPUs and counted NICs
// then the fabric position labels from LLDP neighbours, and last
//   rdma.fabric.io/health=ok|warning|critical|unknown
//                                        the health verdict (`health`; absent when unspecified),
//                                        for node affinity away from a node whose NICs fail.
// Every value is a valid Kubernetes label value. The text depends only on `host`, `policy` and
// `health` (no timestamps), so WriteNfdFeatures rewrites the file only when a label changes.
std::string RenderNfdFeatures(const v1::Host& host, const v1::SelectionPolicy& policy,
                              v1::Severity health = v1::SEVERITY_UNSPECIFIED);

// Writes `text` to DIR/fabric-agent atomically: a dot file in DIR (ignored by nfd-worker),
// fsync, rename over the old file, fsync of DIR. Only when the content differs from the file's
// current content; returns whether it wrote. The file is mode 0644. Errors: NotFound when DIR
// does not exist, FailedPrecondition when it is not a directory, the errno's code (e.g.
// PermissionDenied) when it cannot be written; no temp file is left behind.
absl::StatusOr<bool> WriteNfdFeatures(const std::string& dir, const std::string& text);

}  // namespace fabric
