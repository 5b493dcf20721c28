// GIDs as sysfs prints them, for the tests of this folder.
#pragma once

namespace fabric::rdma::test_gids {

inline constexpr const char* kZero = "0000:0000:0000:0000:0000:0000:0000:0000";
inline constexpr const char* kLinkLocal = "fe80:0000:0000:0000:5054:00ff:fe12:3456";
inline constexpr const char* kV4 = "0000:0000:0000:0000:0000:ffff:0a4d:0001";       // 10.77.0.1
inline constexpr const char* kV4Other = "0000:0000:0000:0000:0000:ffff:c0a8:0105";  // 192.168.1.5
inline constexpr const char* kV6 = "2001:0db8:0000:0000:0000:0000:0000:0001";
inline constexpr const char* kV6Other = "2001:0db8:0a00:0001:0e42:a1ff:fe01:0001";
// An InfiniBand port's unused slot: the subnet prefix alone, interface id zero.
inline constexpr const char* kPrefixOnly = "fe80:0000:0000:0000:0000:0000:0000:0000";

}  // namespace fabric::rdma::test_gids
