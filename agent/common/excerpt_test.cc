#include "agent/common/excerpt.h"

#include <string>

#include "gtest/gtest.h"

namespace fabric {
namespace {

TEST(Excerpt, Table) {
  struct Case {
    std::string in;
    size_t max;
    std::string want;
  };
  const Case cases[] = {
      {"", 64, "\"\""},
      {"eth0", 64, "\"eth0\""},
      {std::string("fa0\0x", 5), 64, "\"fa0\\x00x\""},
      {"a\"b\\c", 64, "\"a\\\"b\\\\c\""},
      {"tab\there\nnl", 64, "\"tab\\there\\nnl\""},
      {"\x7f\xff", 64, "\"\\x7f\\xff\""},
      {"abcdef", 6, "\"abcdef\""},
      {"abcdefg", 6, "\"abcdef\"... (7 bytes)"},
      {"abc", 0, "\"\"... (3 bytes)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Excerpt(c.in, c.max), c.want) << c.want;
  }
}

TEST(Excerpt, BoundedForHugeInput) {
  const std::string huge(4 << 20, 'x');
  const std::string got = Excerpt(huge);
  EXPECT_LE(got.size(), 64u + 32u);
  EXPECT_NE(got.find("(4194304 bytes)"), std::string::npos);
  // Escaping at most quadruples the shown bytes.
  EXPECT_LE(Excerpt(std::string(1000, '\x01')).size(), 4u * 64 + 32);
}

}  // namespace
}  // namespace fabric
