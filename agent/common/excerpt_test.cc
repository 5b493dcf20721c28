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

// Outside text for a terminal: whole, unquoted, no control byte left (ESC, CR, BEL, C1 as UTF-8).
TEST(TerminalText, Table) {
  struct Case {
    std::string in;
    std::string want;
  };
  const Case cases[] = {
      {"", ""},
      {"mlx5_0:1", "mlx5_0:1"},
      {"a\"b\\c", "a\"b\\c"},
      {"\x1b[2J\x1b]0;pwned\x07", "\\x1b[2J\\x1b]0;pwned\\x07"},
      {"over\rwrite", "over\\x0dwrite"},
      {"tab\there\nnl", "tab\\there\\nnl"},
      {"\xc2\x9b"
       "31m",
       "\\xc2\\x9b"
       "31m"},
      {std::string("nul\0x", 5), "nul\\x00x"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(TerminalText(c.in), c.want) << c.want;
  }
}

}  // namespace
}  // namespace fabric
