// fabric-env's NUL records as the NCCL env plugin keeps them: the table's lookups, and what it
// skips (names that are not identifiers, no '=', a record cut off) or refuses (over its bounds).
#include "agent/ncclenv/env_records.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

struct Table {
  fabric_env_table t{};
  size_t skipped = 0;
  int rc = 0;
  explicit Table(const std::string& bytes) {
    rc = fabric_env_table_parse(bytes.data(), bytes.size(), &t, &skipped);
  }
  ~Table() { fabric_env_table_free(&t); }
  std::string Get(const char* name) const {
    const char* v = fabric_env_table_get(&t, name);
    return v == nullptr ? "<null>" : v;
  }
};

TEST(EnvRecords, Table) {
  using namespace std::string_literals;
  const struct {
    std::string bytes;
    std::vector<std::pair<const char*, std::string>> want;
    size_t count, skipped;
  } cases[] = {
      {"", {{"A", "<null>"}}, 0, 0},
      {"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1\0NCCL_IB_GID_INDEX=3\0"s,
       {{"NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"}, {"NCCL_IB_GID_INDEX", "3"}, {"NCCL", "<null>"}},
       2,
       0},
      // The value keeps every byte after the first '=' (NCCL's "=" prefix, more '=').
      {"X=a=b\0EMPTY=\0"s, {{"X", "a=b"}, {"EMPTY", ""}}, 2, 0},
      // The first of a name given twice, as a shell's environment keeps it.
      {"A=1\0B=2\0A=3\0"s, {{"A", "1"}, {"B", "2"}}, 2, 0},
      // Not identifiers, no '=', an empty name: skipped and counted; empty records ignored.
      {"1A=x\0bad name=2\0NOEQ\0=x\0\0OK=1\0"s, {{"OK", "1"}, {"1A", "<null>"}}, 1, 4},
      // Cut off after the last NUL: not a record.
      {"A=1\0TAIL=cut"s, {{"A", "1"}, {"TAIL", "<null>"}}, 1, 1},
      // A NUL inside a value ends the record there.
      {"A=x\0y=1\0"s, {{"A", "x"}, {"y", "1"}}, 2, 0},
  };
  for (const auto& c : cases) {
    Table t(c.bytes);
    ASSERT_EQ(t.rc, 0);
    EXPECT_EQ(t.t.count, c.count) << c.bytes;
    EXPECT_EQ(t.skipped, c.skipped) << c.bytes;
    for (const auto& [name, value] : c.want) EXPECT_EQ(t.Get(name), value) << name;
  }
}

TEST(EnvRecords, SortedForBinarySearch) {
  std::string bytes;
  for (int i = 999; i >= 0; --i) bytes += "V" + std::to_string(i) + "=" + std::to_string(i) + '\0';
  Table t(bytes);
  ASSERT_EQ(t.rc, 0);
  ASSERT_EQ(t.t.count, 1000u);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(t.Get(("V" + std::to_string(i)).c_str()), std::to_string(i));
  }
  EXPECT_EQ(t.Get("V1000"), "<null>");
  EXPECT_EQ(fabric_env_table_get(&t.t, nullptr), nullptr);
  EXPECT_EQ(fabric_env_table_get(nullptr, "V1"), nullptr);
}

TEST(EnvRecords, RefusesWhatIsOverItsBounds) {
  Table big(std::string(FABRIC_ENV_RECORDS_MAX_BYTES + 1, 'a'));
  EXPECT_EQ(big.rc, -1);
  EXPECT_EQ(big.t.count, 0u);
  EXPECT_EQ(fabric_env_table_get(&big.t, "a"), nullptr);
  std::string many;
  for (unsigned i = 0; i <= FABRIC_ENV_RECORDS_MAX_COUNT; ++i) many += "A=1" + std::string(1, '\0');
  Table t(many);
  EXPECT_EQ(t.rc, -1);
  EXPECT_EQ(t.t.count, 0u);
}

}  // namespace
