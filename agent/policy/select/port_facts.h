// What an assignment says about its port and GPU beyond the choice itself: the NIC's vendor
// profile, the rail it is cabled to, and how the NIC reaches the GPU's memory (GPUDirect RDMA).
#pragma once

#include <optional>
#include <string>

#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// Whether `rail`'s `ports` name this port: its device ("mlx5_3"), the port ("mlx5_3:1") or its
// netdev.
bool RailNamesPort(const v1::Rail& rail, const v1::RdmaDevice& dev, const v1::Port& port);

// The position in policy.rails of the rail the port is cabled to: its netdev's neighbour's rail
// (laid by the agent from LLDP), else the rail whose `ports` name it; none when neither.
std::optional<int> PortRailIndex(const v1::Host& host, const v1::SelectionPolicy& policy,
                                 const v1::RdmaDevice& dev, const v1::Port& port);

struct GpuDirectWay {
  std::string way;  // "dma_buf", "nvidia_peermem", "nv_peer_mem", "none"; empty: not known.
  std::string reason;
};

// How `dev` reaches `gpu`'s memory: a path the host has (host.gpudirect) that serves the GPU's
// vendor (dma-buf preferred, as NCCL 2.19 and later prefer it), and a PCIe path NCCL takes it
// over: at most PXB, NCCL_NET_GDR_LEVEL's default. Empty when the host says nothing of GPUDirect.
GpuDirectWay DecideGpuDirect(const v1::Host& host, const v1::Accelerator& gpu,
                             v1::DistanceClass distance);

// nic_profile, rail and (with a GPU) gpudirect of an assignment whose port is filled in.
void FillPortFacts(const v1::Host& host, const v1::SelectionPolicy& policy,
                   const v1::Accelerator* gpu, v1::GpuAssignment* a);

}  // namespace fabric
