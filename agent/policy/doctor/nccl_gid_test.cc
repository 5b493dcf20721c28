#include "agent/policy/doctor/nccl_gid.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/rdma/gid.h"

namespace fabric::doctor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// "INDEX GID TYPE" lines ("v1", "v2", "?": unreadable type) as sysfs shows a port's table.
std::vector<rdma::GidSlot> Table(const std::vector<std::string>& lines) {
  std::vector<rdma::GidSlot> out;
  for (const std::string& line : lines) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    rdma::GidSlot s;
    s.index = std::stoi(f[0]);
    auto gid = rdma::ParseGid(f[1]);
    EXPECT_TRUE(gid.ok()) << line;
    s.gid = gid.value_or(rdma::GidBytes{});
    if (f[2] == "v1") s.kind = rdma::GidKind::kIbOrRoceV1;
    if (f[2] == "v2") s.kind = rdma::GidKind::kRoceV2;
    out.push_back(s);
  }
  return out;
}

NcclGidRule Rule(const std::map<std::string, std::string>& env) {
  return ReadNcclGidRule([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

constexpr char kLinkLocal[] = "fe80:0000:0000:0000:0e42:a1ff:fe01:0001";
std::string V4(const char* hex) { return absl::StrCat("0000:0000:0000:0000:0000:ffff:", hex); }

// The host's address (10.0.0.1) at 2/3, a neighbour pod's (10.0.1.6) at 4/5, ours (10.0.1.5)
// at 6/7; index 8 and up empty.
std::vector<rdma::GidSlot> Shared() {
  return Table({absl::StrCat("0 ", kLinkLocal, " v1"), absl::StrCat("1 ", kLinkLocal, " v2"),
                "2 " + V4("0a00:0001") + " v1", "3 " + V4("0a00:0001") + " v2",
                "4 " + V4("0a00:0106") + " v1", "5 " + V4("0a00:0106") + " v2",
                "6 " + V4("0a00:0105") + " v1", "7 " + V4("0a00:0105") + " v2"});
}

TEST(NcclGidTest, PicksAsNcclDoes) {
  struct Case {
    const char* what;
    std::vector<rdma::GidSlot> table;
    std::map<std::string, std::string> env;
    int want;
  };
  const std::vector<rdma::GidSlot> pods_only =
      Table({absl::StrCat("0 ", kLinkLocal, " v1"), absl::StrCat("1 ", kLinkLocal, " v2"),
             "2 " + V4("0a00:0106") + " v1", "3 " + V4("0a00:0106") + " v2",
             "4 " + V4("0a00:0105") + " v1", "5 " + V4("0a00:0105") + " v2"});
  const std::vector<rdma::GidSlot> v6 =
      Table({absl::StrCat("0 ", kLinkLocal, " v1"), absl::StrCat("1 ", kLinkLocal, " v2"),
             "2 2001:0db8:0000:0000:0000:0000:0000:0005 v1",
             "3 2001:0db8:0000:0000:0000:0000:0000:0005 v2"});
  const std::vector<rdma::GidSlot> untyped =
      Table({absl::StrCat("0 ", kLinkLocal, " ?"), "1 " + V4("0a00:0105") + " ?",
             "2 " + V4("0a00:0106") + " ?"});
  const Case cases[] = {
      {"the first IPv4 RoCE v2 GID: the host's", Shared(), {}, 3},
      {"only pods' addresses: the lower index, a neighbour's", pods_only, {}, 3},
      {"a range picks ours", Shared(), {{"NCCL_IB_ADDR_RANGE", "10.0.1.5/32"}}, 7},
      {"a /24 range: the neighbour's comes first",
       Shared(),
       {{"NCCL_IB_ADDR_RANGE", "10.0.1.0/24"}},
       5},
      {"RoCE v1 asked", Shared(), {{"NCCL_IB_ROCE_VERSION_NUM", "1"}}, 2},
      {"IPv6", v6, {{"NCCL_IB_ADDR_FAMILY", "AF_INET6"}}, 3},
      {"IPv6 asked, none global", Shared(), {{"NCCL_IB_ADDR_FAMILY", "AF_INET6"}}, 0},
      {"types unreadable: the first IPv4 one", untyped, {}, 1},
      {"an explicit index", Shared(), {{"NCCL_IB_GID_INDEX", "7"}}, 7},
      {"garbage reads as 0", Shared(), {{"NCCL_IB_GID_INDEX", "three"}}, 0},
      {"octal", Shared(), {{"NCCL_IB_GID_INDEX", "07"}}, 7},
      {"hex", Shared(), {{"NCCL_IB_GID_INDEX", "0x5"}}, 5},
      {"empty is unset", Shared(), {{"NCCL_IB_GID_INDEX", ""}}, 3},
      {"-1 is unset", Shared(), {{"NCCL_IB_GID_INDEX", "-1"}}, 3},
      {"a malformed range is ignored", Shared(), {{"NCCL_IB_ADDR_RANGE", "10.0.1.5"}}, 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(NcclGidPick(c.table, 256, Rule(c.env)), c.want);
  }
}

TEST(NcclGidTest, SaysWhatNcclReadsDifferently) {
  EXPECT_THAT(Rule({}).problems, IsEmpty());
  EXPECT_THAT(Rule({{"NCCL_IB_GID_INDEX", "3"}}).problems, IsEmpty());
  EXPECT_THAT(Rule({{"NCCL_IB_GID_INDEX", "three"}}).problems,
              ElementsAre(HasSubstr("not a number: NCCL reads it as 0")));
  EXPECT_THAT(Rule({{"NCCL_IB_GID_INDEX", "3 "}}).problems,
              ElementsAre(HasSubstr("not a number: NCCL reads it as 3")));
  EXPECT_THAT(Rule({{"NCCL_IB_GID_INDEX", "010"}}).problems, ElementsAre(HasSubstr("octal, 8")));
  EXPECT_THAT(Rule({{"NCCL_IB_GID_INDEX", "99999999999999999999"}}).problems,
              ElementsAre(HasSubstr("out of range: NCCL uses -1")));
  EXPECT_THAT(Rule({{"NCCL_IB_ADDR_FAMILY", "inet"}}).problems,
              ElementsAre(HasSubstr("neither AF_INET nor AF_INET6")));
  EXPECT_THAT(Rule({{"NCCL_IB_ADDR_RANGE", "10.0.1.0/40"}}).problems,
              ElementsAre(HasSubstr("/40 is not a prefix length")));
  EXPECT_THAT(Rule({{"NCCL_IB_ADDR_RANGE", "fd00::/64"}}).problems,
              ElementsAre(HasSubstr("is not an IPv4 ADDRESS/BITS")));
  EXPECT_THAT(
      Rule({{"NCCL_IB_ADDR_FAMILY", "AF_INET6"}, {"NCCL_IB_ADDR_RANGE", "fd00::/64"}}).problems,
      IsEmpty());
}

TEST(NcclGidTest, ShortAndEmptyTablesStayInBounds) {
  EXPECT_EQ(NcclGidPick({}, 0, Rule({})), 0);
  EXPECT_EQ(NcclGidPick(Shared(), 3, Rule({})), 2) << "entries past the table length are unseen";
  EXPECT_EQ(NcclGidPick(Table({"900 " + V4("0a00:0105") + " v2"}), 16, Rule({})), 0);
}

}  // namespace
}  // namespace fabric::doctor
