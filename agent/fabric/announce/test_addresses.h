// Test helpers: announce::Address values from text (a bad literal fails the test).
#pragma once

#include <arpa/inet.h>

#include "agent/fabric/announce/announce.h"
#include "gtest/gtest.h"

namespace fabric::announce {

inline Address TestAddress(int family, int prefix_len, const char* ip, const char* gw) {
  Address a;
  a.family = family;
  a.prefix_len = prefix_len;
  EXPECT_EQ(inet_pton(family, ip, &a.addr), 1) << ip;
  if (gw != nullptr) {
    a.has_gateway = true;
    EXPECT_EQ(inet_pton(family, gw, &a.gateway), 1) << gw;
  }
  return a;
}
// 10.x.y.z/24 and fd00::x/64, with an optional gateway.
inline Address V4(const char* ip, const char* gw = nullptr) {
  return TestAddress(AF_INET, 24, ip, gw);
}
inline Address V6(const char* ip, const char* gw = nullptr) {
  return TestAddress(AF_INET6, 64, ip, gw);
}

}  // namespace fabric::announce
