// A RoCE port's active MTU, as the kernel derives it from its netdev's MTU.
#pragma once

#include <cstdint>
#include <optional>

namespace fabric::rdma {

// The RoCE headers the kernel subtracts before choosing an InfiniBand MTU (iboe_get_mtu in
// include/rdma/ib_addr.h): GRH 40, UDP 8, BTH 12, XRC 4, AtomicETH 28, ICRC 4.
inline constexpr uint32_t kRoceHeaderBytes = 40 + 8 + 12 + 4 + 28 + 4;

// The largest InfiniBand MTU (4096, 2048, 1024, 512 or 256) that fits `netdev_mtu` less the
// RoCE headers: 1500 -> 1024, 9000 -> 4096, 4200 -> 4096, 4150 -> 2048. Nullopt below 352.
inline std::optional<uint32_t> RoceActiveMtu(uint32_t netdev_mtu) {
  if (netdev_mtu < kRoceHeaderBytes) return std::nullopt;
  const uint32_t room = netdev_mtu - kRoceHeaderBytes;
  for (uint32_t mtu = 4096; mtu >= 256; mtu /= 2) {
    if (room >= mtu) return mtu;
  }
  return std::nullopt;
}

}  // namespace fabric::rdma
