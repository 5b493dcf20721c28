#include "agent/common/natural_order.h"

#include <gtest/gtest.h>

namespace fabric {
namespace {

TEST(NaturalLessTest, Orders) {
  struct Case {
    const char* a;
    const char* b;
  };
  for (const Case& c :
       {Case{"mlx5_2", "mlx5_10"}, Case{"mlx5_1", "mlx5_11"}, Case{"mlx5_9", "mlx5_10"},
        Case{"eth2", "eth10"}, Case{"a", "b"}, Case{"mlx5", "mlx5_0"}, Case{"mlx4_99", "mlx5_0"},
        Case{"x1y2", "x1y10"}, Case{"x1", "x01"}, Case{"ib0", "mlx5_0"}}) {
    EXPECT_TRUE(NaturalLess(c.a, c.b)) << c.a << " < " << c.b;
    EXPECT_FALSE(NaturalLess(c.b, c.a)) << c.b << " !< " << c.a;
  }
  EXPECT_FALSE(NaturalLess("mlx5_3", "mlx5_3"));
}

}  // namespace
}  // namespace fabric
