// Gathers the facts `fabricctl doctor` and `fabric-env doctor` judge a job by (facts.h), in the
// context the reader runs in: the job's container or the host. Reading only; the judge decides.
// Verbs come in through a seam (`open_verbs`) so that the static fabric-env, which cannot load
// verbs providers, links this without libibverbs.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/policy/doctor/facts.h"

namespace fabric::doctor {

struct ReadOptions {
  std::string sysfs = "/sys", procfs = "/proc";  // Discovery roots.
  std::string proc_self = "/proc/self", shm = "/dev/shm", dev_dir = "/dev/infiniband";
  std::string context = "host";  // Or "container" (the caller decides).
  // Opens one named device with verbs; null: not tried (fabric-env is static).
  std::function<VerbsOpen(const std::string&)> open_verbs;
  bool look_for_libibverbs = false;  // The static helper: search for the library instead.
  size_t max_verbs_opens = 64;
  // The host already discovered from `sysfs` and `procfs` by the caller (one discovery per run
  // on a 512-VF host); null: ReadFacts discovers it.
  const v1::Host* host = nullptr;
  // The LD_LIBRARY_PATH the job's loader searches first; nullopt: this process's.
  std::optional<std::string> ld_library_path;
  // Searched after LD_LIBRARY_PATH: the loader's usual directories (ld.so.cache aside).
  std::vector<std::string> lib_dirs = {"/usr/lib/x86_64-linux-gnu",
                                       "/usr/lib/aarch64-linux-gnu",
                                       "/usr/lib64",
                                       "/usr/lib",
                                       "/lib64",
                                       "/lib"};
};

// The RDMA device names the job's variables select on the host just discovered (the caller's
// rule: doctor::NamedDevices over its variables).
using NamedFn = std::function<std::vector<std::string>(const v1::Host&)>;

// Fills everything in DoctorFacts except env/env_source/agent_env/agent_error/rank_envs/gpus,
// which the caller sets. `named` picks the devices to open and look at; `gpus`: the job's GPUs'
// PCI addresses (empty: every accelerator of the discovered host but management displays).
void ReadFacts(const ReadOptions& opt, const NamedFn& named, const std::vector<std::string>& gpus,
               DoctorFacts* facts);

// getifaddrs(): this network namespace's interfaces, in natural name order.
absl::StatusOr<std::vector<Interface>> ReadInterfaces();

}  // namespace fabric::doctor
