// What the health checks of this folder share: the one way a check adds a finding.
#pragma once

#include <string>

#include "fabric/v1/health.pb.h"
#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric::health_internal {

// `cause` makes the stable code "<check>.<cause>"; `evidence` is the values the finding rests on.
void Add(v1::Health* h, v1::Severity s, const char* check, const char* cause,
         v1::RepairAction repair, const std::string& subject, const std::string& message,
         std::string evidence = "");

// The inventory's own consistency, beyond each port's state (inventory_checks.cc):
//   firmware    WARNING   HCAs of one model (PCI vendor:device, physical functions) on
//                         different firmware versions
//   uverbs      CRITICAL  an RDMA device without its uverbs character device (ib_uverbs not
//                         loaded, or the device half-registered): no process can open it
//   umad        WARNING   a port of a CA without its umad character device: MAD tools and
//                         subnet-manager queries fail, verbs do not
//   host_class  CRITICAL  fewer active back-end ports than its class expects (8-GPU classes:
//                         8 x 400 Gb/s on H100/H200/B200/MI300X); WARNING when enough are
//                         active but some below the class's rate
void CheckFirmware(v1::Health* h, const v1::Host& host);
void CheckUverbs(v1::Health* h, const v1::Host& host);
void CheckUmad(v1::Health* h, const v1::Host& host);
//   pci_topology OK      a virtual machine's flat PCI tree (topology.h VirtualPciTree): said,
//                         so that no one reads the pairing as distance's, with what pairs
//                         instead (the NCCL topology file, or NUMA and order)
//                WARNING  the configured NCCL topology file could not be read (nccl_topo.h)
void CheckPciTopology(v1::Health* h, const v1::Host& host);
void CheckHostClass(v1::Health* h, const v1::Host& host, const v1::SelectionPolicy& policy,
                    const v1::HealthConfig& config);

}  // namespace fabric::health_internal
