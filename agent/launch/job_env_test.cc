#include "agent/launch/job_env.h"

#include <gtest/gtest.h>

#include <string>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace fabric::launch {
namespace {

JobEnvAnswer Answer() {
  JobEnvAnswer a;
  a.env = {{"NCCL_IB_HCA", "=mlx5_1:1"}, {"NCCL_SOCKET_IFNAME", "=eth1"}};
  a.asked.notes = {"skipped CUDA_VISIBLE_DEVICES"};
  v1::Selection& s = a.selection;
  (*s.mutable_job_env())["NCCL_IB_HCA"] = "=mlx5_1:1,mlx5_2:1";
  s.set_rank_gpu("0000:3b:00.0");
  s.add_assignments()->set_gpu("0000:3b:00.0");
  s.add_assignments()->set_gpu("0000:5e:00.0");
  s.set_consumers("nccl");
  s.add_notes("from the agent");
  return a;
}

TEST(FormatEnvJson, KeysInOrderMapsSortedTwoSpaces) {
  EXPECT_EQ(FormatEnvJson(Answer()),
            "{\n"
            "  \"env\": {\n"
            "    \"NCCL_IB_HCA\": \"=mlx5_1:1\",\n"
            "    \"NCCL_SOCKET_IFNAME\": \"=eth1\"\n"
            "  },\n"
            "  \"job_env\": {\n"
            "    \"NCCL_IB_HCA\": \"=mlx5_1:1,mlx5_2:1\"\n"
            "  },\n"
            "  \"pins\": {},\n"
            "  \"rank_gpu\": \"0000:3b:00.0\",\n"
            "  \"scope\": [\n"
            "    \"0000:3b:00.0\",\n"
            "    \"0000:5e:00.0\"\n"
            "  ],\n"
            "  \"consumers\": \"nccl\",\n"
            "  \"notes\": [\n"
            "    \"skipped CUDA_VISIBLE_DEVICES\",\n"
            "    \"from the agent\"\n"
            "  ]\n"
            "}\n");
  EXPECT_EQ(FormatEnvJson(JobEnvAnswer()),
            "{\n  \"env\": {},\n  \"job_env\": {},\n  \"pins\": {},\n  \"rank_gpu\": \"\",\n"
            "  \"scope\": [],\n  \"consumers\": \"\",\n  \"notes\": []\n}\n");
}

// JSON forbids raw control characters in strings (RFC 8259 section 7) and is UTF-8: a value's
// odd bytes are escaped or replaced, and what parses back is the value where it was valid.
TEST(FormatEnvJson, OddBytesAreEscapedOrReplacedAndParseBack) {
  JobEnvAnswer a;
  a.env = {{"QUOTE", "say \"hi\""},
           {"BACKSLASH", "a\\b"},
           {"CONTROL", std::string("\x01\x1f\n\t\r\b\f", 7)},
           {"UTF8", "caf\xc3\xa9"},
           {"NOT_UTF8", "a\xff"},
           {"EMPTY", ""}};
  const std::string json = FormatEnvJson(a);
  for (char c : json) {
    if (c != '\n') {
      EXPECT_GE(static_cast<unsigned char>(c), 0x20) << json;
    }
  }
  EXPECT_NE(json.find(R"("CONTROL": "\u0001\u001f\n\t\r\b\f")"), std::string::npos) << json;
  google::protobuf::Struct parsed;
  auto st = google::protobuf::util::JsonStringToMessage(json, &parsed);
  ASSERT_TRUE(st.ok()) << st.message() << "\n" << json;
  const auto& env = parsed.fields().at("env").struct_value().fields();
  ASSERT_EQ(env.size(), a.env.size());
  for (const auto& [k, v] : a.env) {
    if (k != "NOT_UTF8") {
      EXPECT_EQ(env.at(k).string_value(), v) << k;
    }
  }
  EXPECT_EQ(env.at("NOT_UTF8").string_value(), "a\xef\xbf\xbd");  // U+FFFD
}

}  // namespace
}  // namespace fabric::launch
