#include "agent/config/config.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "agent/policy/select/selection_section.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

TEST(ParseConfigTest, ReadsEveryField) {
  absl::StatusOr<v1::AgentConfig> c = ParseConfig(R"({
    "selection": {
      "deny": ["mlx5_0", "eth0"],
      "prefer_vfs": true,
      "socket_ifname": "ens9",
      "static_env": {"NCCL_IB_TIMEOUT": "22", "NCCL_IB_QPS_PER_CONNECTION": "4"}
    }
  })");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->selection().deny(), ::testing::ElementsAre("mlx5_0", "eth0"));
  EXPECT_TRUE(c->selection().prefer_vfs());
  EXPECT_EQ(c->selection().socket_ifname(), "ens9");
  EXPECT_EQ(c->selection().static_env().at("NCCL_IB_TIMEOUT"), "22");
  EXPECT_EQ(c->selection().static_env().at("NCCL_IB_QPS_PER_CONNECTION"), "4");
}

TEST(ParseConfigTest, AcceptsLowerCamelCaseNames) {
  // The proto3 JSON mapping allows both spellings; operators copy either from docs.
  absl::StatusOr<v1::AgentConfig> c =
      ParseConfig(R"({"selection": {"preferVfs": true, "staticEnv": {"A": "b"}}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->selection().prefer_vfs());
  EXPECT_EQ(c->selection().static_env().at("A"), "b");
}

TEST(ParseConfigTest, EmptyObjectGivesDefaults) {
  absl::StatusOr<v1::AgentConfig> c = ParseConfig("{}");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->selection().prefer_vfs());
  EXPECT_TRUE(c->selection().deny().empty());
}

TEST(ParseConfigTest, UnknownFieldsAreRejectedByName) {
  struct Case {
    const char* json;
    const char* field;
  };
  for (const Case& tc : {Case{R"({"selektion": {}})", "selektion"},
                         Case{R"({"selection": {"prefer_vf": true}})", "prefer_vf"}}) {
    absl::StatusOr<v1::AgentConfig> c = ParseConfig(tc.json);
    ASSERT_FALSE(c.ok()) << tc.json;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(c.status()), HasSubstr(tc.field));
  }
}

TEST(ParseConfigTest, MalformedJsonIsAnError) {
  // (A bare string for a list is accepted by protobuf's parser as a one-element list.)
  for (const char* json :
       {R"({"selection": )", "", "[]", R"({"selection": []})", R"({"selection": {"deny": [1]}})",
        R"({"selection": {"prefer_vfs": "yes please"}})"}) {
    absl::StatusOr<v1::AgentConfig> c = ParseConfig(json);
    EXPECT_FALSE(c.ok()) << json;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << json;
  }
}

TEST(ParseConfigTest, StaticEnvNamesMustBeShellNames) {
  for (const char* name : {"1ABC", "A-B", "A B", "", "NCCL.X", "A=B", "\xc3\x89T"}) {
    v1::AgentConfig cfg;
    (*cfg.mutable_selection()->mutable_static_env())[name] = "1";
    absl::Status s = ValidatePolicy(cfg.selection());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "name: " << name;
    EXPECT_THAT(Msg(s), HasSubstr("static_env"));
  }
  for (const char* name : {"_X", "a1", "NCCL_IB_TIMEOUT", "x"}) {
    v1::SelectionPolicy p;
    (*p.mutable_static_env())[name] = "1";
    EXPECT_TRUE(ValidatePolicy(p).ok()) << "name: " << name;
  }
}

TEST(ParseConfigTest, BadEnvNameThroughJsonNamesTheKey) {
  absl::StatusOr<v1::AgentConfig> c =
      ParseConfig(R"({"selection": {"static_env": {"NCCL-IB-TIMEOUT": "22"}}})");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Msg(c.status()), HasSubstr("NCCL-IB-TIMEOUT"));
}

TEST(ParseConfigTest, StaticEnvValuesHoldNoLineBreakOrNul) {
  for (const char* json : {R"({"selection": {"static_env": {"A": "x\ny"}}})",
                           R"({"selection": {"static_env": {"A": "x\u0000y"}}})",
                           R"({"selection": {"static_env": {"A": "x\ry"}}})"}) {
    absl::StatusOr<v1::AgentConfig> c = ParseConfig(json);
    ASSERT_FALSE(c.ok()) << json;
    EXPECT_THAT(Msg(c.status()), HasSubstr("static_env[A]"));
  }
  // Quotes, spaces and '$' are fine: the formatters quote them.
  EXPECT_TRUE(ParseConfig(R"({"selection": {"static_env": {"A": "it's $HOME \"x\""}}})").ok());
}

TEST(ParseConfigTest, DenyEntriesMustBeNonEmpty) {
  absl::StatusOr<v1::AgentConfig> c = ParseConfig(R"({"selection": {"deny": ["mlx5_0", ""]}})");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Msg(c.status()), HasSubstr("deny[1]"));
}

TEST(ParseConfigTest, SocketIfnameMustBeAnInterfaceName) {
  for (const char* name :
       {"eth0 ", "a/b", "eth0:1", "abcdefghijklmnop", "..", "net1,", "net1,,net2", "net1,a:1"}) {
    v1::SelectionPolicy p;
    p.set_socket_ifname(name);
    EXPECT_EQ(ValidatePolicy(p).code(), absl::StatusCode::kInvalidArgument) << name;
  }
  v1::SelectionPolicy p;
  p.set_socket_ifname("abcdefghijklmno");  // 15 bytes: the kernel's limit.
  EXPECT_TRUE(ValidatePolicy(p).ok());
  p.set_socket_ifname("net1,net2,abcdefghijklmno");  // NCCL takes a list: each name is checked.
  EXPECT_TRUE(ValidatePolicy(p).ok());
}

TEST(ParseConfigTest, RailsNeedALabelNameAndAPattern) {
  auto c = ParseConfig(
      R"({"selection": {"rails": [{"name": "r0", "switchPattern": "leaf-r0-*", "ports": ["mlx5_0"]},
                                  {"name": "r1", "switchPattern": "leaf-r1-*"}]}})");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->selection().rails_size(), 2);
  EXPECT_EQ(c->selection().rails(0).ports(0), "mlx5_0");
  const struct {
    const char* json;
    const char* says;
  } kBad[] = {
      {R"({"name": "", "switchPattern": "x"})", "rails[0].name"},
      {R"({"name": "Rail0", "switchPattern": "x"})", "want 1-40 of [a-z0-9-]"},
      {R"({"name": "r.0", "switchPattern": "x"})", "rails[0].name"},
      {R"({"name": "r0"})", "has no switchPattern"},
  };
  for (const auto& b : kBad) {
    auto bad = ParseConfig(absl::StrCat(R"({"selection": {"rails": [)", b.json, "]}}"));
    ASSERT_FALSE(bad.ok()) << b.json;
    EXPECT_THAT(Msg(bad.status()), HasSubstr(b.says)) << b.json;
  }
  auto twice = ParseConfig(
      R"({"selection": {"rails": [{"name": "r0", "switchPattern": "a"},
                                  {"name": "r0", "switchPattern": "b"}]}})");
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(Msg(twice.status()), HasSubstr("used twice"));
}

class LoadConfigTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::string path = ::testing::TempDir() + "select_config_test_" + std::to_string(getpid()) +
                       "_" + std::to_string(counter_++) + ".json";
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& p : paths_) std::remove(p.c_str());
  }

 private:
  int counter_ = 0;
  std::vector<std::string> paths_;
};

TEST_F(LoadConfigTest, ReadsAFile) {
  std::string path = Write(R"({"selection": {"deny": ["mlx5_0"]}})");
  absl::StatusOr<v1::AgentConfig> c = LoadConfig(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->selection().deny(), UnorderedElementsAre("mlx5_0"));
}

TEST(ParseConfigTest, DevicePluginResourcesInJson) {
  absl::StatusOr<v1::AgentConfig> c = ParseConfig(R"({"devicePlugin": {"resources": [
      {"name": "rdma/hca", "mode": "SHARED", "sharedCount": 100,
       "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}},
      {"name": "fabric.io/rdma-vf", "mode": "EXCLUSIVE", "envAtAllocate": true,
       "selectors": {"function": "vf", "deviceIds": ["101e"]}}]}})");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->device_plugin().resources_size(), 2);
  EXPECT_EQ(c->device_plugin().resources(0).shared_count(), 100u);
  EXPECT_EQ(c->device_plugin().resources(1).mode(), v1::RdmaResource::EXCLUSIVE);
  EXPECT_TRUE(c->device_plugin().resources(1).env_at_allocate());
}

TEST(ParseConfigTest, DevicePluginSectionIsChecked) {
  for (const char* json : {
           R"({"devicePlugin": {"resources": [{"name": "hca", "mode": "SHARED",
               "selectors": {"vendors": ["15b3"]}}]}})",
           R"({"devicePlugin": {"resources": [{"name": "rdma/hca", "mode": "SHARD",
               "selectors": {"vendors": ["15b3"]}}]}})",
           R"({"devicePlugin": {"resources": [{"name": "rdma/hca", "mode": "SHARED"}]}})",
           R"({"devicePlugin": {"resources": [{"name": "rdma/hca", "mode": "SHARED",
               "selectors": {"rails": ["rail9"]}}]}})",
       }) {
    absl::StatusOr<v1::AgentConfig> c = ParseConfig(json);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << json;
  }
}

TEST(ParseConfigTest, HealthSectionInJsonAndChecked) {
  absl::StatusOr<v1::AgentConfig> c = ParseConfig(R"({"health": {
      "pollIntervalS": 1, "stickyS": 900, "flapMax": 3,
      "counterRules": [{"counter": "symbol_error", "maxIncrease": 50, "windowS": 3600,
                        "severity": "SEVERITY_CRITICAL", "repair": "REPAIR_ACTION_RESEAT_CABLE"},
                       {"counter": "link_downed", "disabled": true}],
      "counterExclude": ["mlx5_4:1"], "dryRunCodes": ["counter.symbol_error.1h"],
      "hostClasses": [{"name": "gb200-4x800", "gpuModels": ["GB200"], "gpus": 4, "ports": 4,
                       "rateGbps": 800}]}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->health().poll_interval_s(), 1);
  ASSERT_EQ(c->health().counter_rules_size(), 2);
  EXPECT_EQ(c->health().counter_rules(0).repair(), v1::REPAIR_ACTION_RESEAT_CABLE);
  EXPECT_EQ(c->health().host_classes(0).ports(), 4u);
  for (const char* json : {
           R"({"health": {"pollIntervalS": 0.001}})",
           R"({"health": {"counterRules": [{"counter": "Symbol Error", "windowS": 1}]}})",
           R"({"health": {"counterRules": [{"counter": "x", "windowS": -1}]}})",
           R"({"health": {"counterExclude": ["mlx5_0:one"]}})",
           R"({"health": {"hostClasses": [{"name": "x", "gpus": 8, "ports": 8}]}})",
           R"({"health": {"stickS": 5}})",
       }) {
    EXPECT_EQ(ParseConfig(json).status().code(), absl::StatusCode::kInvalidArgument) << json;
  }
}

TEST_F(LoadConfigTest, MissingFileNamesThePath) {
  std::string path = ::testing::TempDir() + "no_such_dir_for_select/agent.json";
  absl::StatusOr<v1::AgentConfig> c = LoadConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(c.status()), HasSubstr(path));
  EXPECT_THAT(Msg(c.status()), HasSubstr("No such file"));
}

TEST_F(LoadConfigTest, DirectoryIsAnErrorNamingThePath) {
  std::string dir = ::testing::TempDir();
  absl::StatusOr<v1::AgentConfig> c = LoadConfig(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Msg(c.status()), HasSubstr(dir));
}

TEST_F(LoadConfigTest, ParseErrorNamesThePathAndTheField) {
  std::string path = Write(R"({"selection": {"denny": []}})");
  absl::StatusOr<v1::AgentConfig> c = LoadConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(c.status()), HasSubstr(path));
  EXPECT_THAT(Msg(c.status()), HasSubstr("denny"));
}

}  // namespace
}  // namespace fabric
