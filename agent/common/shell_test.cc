#include "agent/common/shell.h"

#include <gtest/gtest.h>

namespace fabric {
namespace {

TEST(ShellQuote, Table) {
  const struct {
    const char* in;
    const char* want;
  } cases[] = {
      {"mlx5_0:1,mlx5_3:1", "mlx5_0:1,mlx5_3:1"},
      {"=eth0", "=eth0"},
      {"10.0.0.1/24", "10.0.0.1/24"},
      {"", "''"},
      {"a b", "'a b'"},
      {"it's", "'it'\\''s'"},
      {"$(reboot)", "'$(reboot)'"},
      {"x\ny", "'x\ny'"},
  };
  for (const auto& c : cases) EXPECT_EQ(ShellQuote(c.in), c.want) << c.in;
}

}  // namespace
}  // namespace fabric
