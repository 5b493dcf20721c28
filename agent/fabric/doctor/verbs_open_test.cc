// The build machines have no RDMA device: what a missing device reads as. Opening a real device
// is checked in the VM rig (tests/vm), which has Soft-RoCE.
#include "agent/fabric/doctor/verbs_open.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fabric::doctor {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(OpenVerbsDevice, UnknownDeviceIsAnErrorNamingIt) {
  const std::string name = "no_such_rdma_dev_42";
  VerbsOpen v = OpenVerbsDevice(name);
  EXPECT_EQ(v.device, name);
  EXPECT_THAT(v.error, HasSubstr(name));
  EXPECT_THAT(v.ports, IsEmpty());
}

}  // namespace
}  // namespace fabric::doctor
