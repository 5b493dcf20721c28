// The doctor's verbs check: opens one RDMA device with the real libibverbs, as NCCL would, and
// queries its ports. Apart from the fact reader (read_facts.h) so that the static fabric-env,
// which cannot load verbs providers, does not link libibverbs.
#pragma once

#include <string>

#include "agent/policy/doctor/facts.h"

namespace fabric::doctor {

// ibv_get_device_list, ibv_open_device, ibv_query_device, ibv_query_port per port and a checked
// ibv_close_device for the device `name` ("mlx5_1"). Every failure is a sentence in `error`
// naming the device, with the errno text; ports queried before a failure are kept.
VerbsOpen OpenVerbsDevice(const std::string& name);

}  // namespace fabric::doctor
