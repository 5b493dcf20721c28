// The host-wide GPU-port pairing: which of several equally good ports each GPU uses, fixed for
// the whole host so that a GPU gets the same port whether it is asked for alone, with others,
// or by another process (as NCCL's ncclTopoGetLocalNet maps a GPU to one of its equally close
// NICs by the GPU's own index).
#pragma once

#include <set>
#include <string>

#include "fabric/v1/host.pb.h"
#include "fabric/v1/select.pb.h"

namespace fabric {

// For every compute GPU, the ports that rank best for it and are equal on every criterion above
// the pairing (GID, function type, distance, NUMA, rate: select.h). GPUs whose best ports are
// the same set share a switch, root port or NUMA node at the level where the tie sits; they are
// paired with those ports in PCI order, the i-th GPU with port i modulo the number of ports.
// Computed once per inventory snapshot (the daemon stores it in Host.pairing); empty when the
// host has no usable port.
v1::GpuPairing PairGpus(const v1::Host& host, const v1::SelectionPolicy& policy);

// `host.pairing` when the snapshot carries one, else PairGpus.
v1::GpuPairing PairingOf(const v1::Host& host, const v1::SelectionPolicy& policy);

// What the ranking (PairGpus, SelectNics) reads of the host's ports, as text: each port's chosen
// GID, subnet, function, NUMA node, rate and exclusion. Two hosts that differ only in their GID
// tables and addresses rank every GPU's ports alike when this is equal; the daemon then keeps the
// pairing and NFD labels it has.
std::string RankingInputs(const v1::Host& host, const v1::SelectionPolicy& policy);
// The same for the ports named in `subjects` ("mlx5_1:1") or whose netdev is named there, each
// port as it reads alone. Enough when only those ports' GID tables and their netdevs' addresses
// changed: the others rank as before, and so do the host-wide rules over them all.
std::string RankingInputs(const v1::Host& host, const v1::SelectionPolicy& policy,
                          const std::set<std::string>& subjects);

}  // namespace fabric
