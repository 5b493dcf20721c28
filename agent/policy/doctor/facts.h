// What `fabricctl doctor` judges a job by: the facts its reader gathered in the job's own context
// (container or host), kept apart from the judging (judge.h) so that every mistake can be judged
// in a table test and the same judge runs in fabricctl, in the static fabric-env and behind the
// agent's Doctor call. An unset optional is a fact not gathered here (not a fact that is absent):
// the judge says it did not look, never that all is well.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/hostfs/dev_nodes.h"
#include "agent/hostfs/pci_acs.h"  // AcsRedirects, kAcsP2p*
#include "agent/hostfs/process_limits.h"
#include "fabric/v1/host.pb.h"

namespace fabric::doctor {

// One ibv_open_device + ibv_query_port of a device the variables name (fabricctl; the static
// helper cannot load verbs providers and leaves `verbs` unset).
struct VerbsPort {
  int number = 0;
  v1::PortState state = v1::PORT_STATE_UNSPECIFIED;
  v1::LinkLayer link_layer = v1::LINK_LAYER_UNSPECIFIED;
  int gid_table_len = 0;
};
struct VerbsOpen {
  std::string device;
  std::string error;  // Empty: it opened; else what failed ("ibv_open_device: Permission denied").
  std::vector<VerbsPort> ports;
};

// An interface of this network namespace (getifaddrs).
struct Interface {
  std::string name;
  bool up = false;                // IFF_UP and IFF_RUNNING.
  std::vector<std::string> ipv4;  // Dotted quads.
  std::vector<std::string> ipv6;  // Text form.
};

// ACS control of a PCIe bridge on a GPU's or NIC's path (config space beyond 64 bytes: root only).
struct AcsBridge {
  std::string bridge;               // Canonical BDF.
  std::optional<uint16_t> control;  // ACS Control register; nullopt: unreadable or no ACS.
  std::string error;                // Why unreadable; empty when read (or no ACS capability).
};

struct DoctorFacts {
  // The environment the job runs with, and where it came from ("this process", "--env-file F",
  // "the agent's answer for --gpus 0,1").
  std::map<std::string, std::string> env;
  std::string env_source;
  // Where the facts were gathered: "container", "host" or "agent" (the Doctor call judges
  // variables alone against the agent's host: nothing of the caller's process is known).
  std::string context = "host";

  // The host as this context's sysfs shows it (discovery); nullopt with `host_error`.
  std::optional<v1::Host> host;
  std::string host_error;

  // /dev/infiniband: nullopt when not looked at; `dev_error` when it could not be listed
  // (`dev_missing`: it does not exist).
  std::optional<std::vector<NodeOpen>> dev_nodes;
  bool dev_missing = false;
  std::string dev_error;

  // Per named device; nullopt: not tried here (static helper, the Doctor call).
  std::optional<std::vector<VerbsOpen>> verbs;
  // Whether libibverbs.so.1 can be loaded here (NCCL dlopens it: none means NET/Socket); nullopt:
  // not looked at.
  std::optional<bool> libibverbs;
  std::string libibverbs_detail;

  std::optional<ProcessLimits> limits;
  std::optional<std::vector<Interface>> interfaces;

  // IOMMU: "" not known; "off" (no IOMMU groups); else a group's type ("identity": passthrough,
  // "DMA", "DMA-FQ": translated) for the first GPU/NIC that has one.
  std::string iommu;
  std::vector<AcsBridge> acs;

  // What the agent would give this job (its answer for the job's GPUs, rank-less), and the
  // job's ranks' NCCL lines: per rank GPU, the variables it gets. Unset: no agent answer here.
  std::optional<std::map<std::string, std::string>> agent_env;
  std::string agent_error;
  std::map<std::string, std::map<std::string, std::string>> rank_envs;

  // The GPUs this job has here (PCI addresses, canonical), for /dev/shm sizing and GPUDirect.
  std::vector<std::string> gpus;
};

}  // namespace fabric::doctor
