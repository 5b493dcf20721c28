// The published host file: written and read back on every example host, deterministic bytes,
// and each bad file refused with a message naming it.
#include "agent/publish/hostfile/host_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "google/protobuf/util/message_differencer.h"
#include "tests/hosts/discovered.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric::hostfile {
namespace {

using ::testing::HasSubstr;

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

class HostFileOnHosts : public ::testing::TestWithParam<std::string> {};

TEST_P(HostFileOnHosts, ReadsBackWhatWasWritten) {
  const v1::Host& host = testing::DiscoveredExampleHost(GetParam());
  v1::SelectionPolicy policy;
  policy.add_deny("mlx5_0");
  (*policy.mutable_static_env())["NCCL_DEBUG"] = "INFO";
  const std::string bytes = HostFileBytes(host, policy);
  EXPECT_EQ(bytes, HostFileBytes(host, policy)) << "not deterministic";

  const std::string dir = testing::MakeTempDir("hostfile");
  WriteBytes(dir + "/" + kFileName, bytes);
  absl::StatusOr<HostFile> read = ReadHostFile(dir + "/" + kFileName);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->published.format(), kFormat);
  EXPECT_FALSE(read->published.agent_version().empty());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(read->published.host(), host));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(read->published.policy(), policy));
  EXPECT_GT(read->modified, absl::Now() - absl::Minutes(5));
}

INSTANTIATE_TEST_SUITE_P(Examples, HostFileOnHosts,
                         ::testing::ValuesIn(testing::ExampleHostNames()));

TEST(HostFile, RefusesWhatIsNotAPublishedHost) {
  struct Case {
    std::string bytes;
    absl::StatusCode code;
    std::string says;
  };
  v1::PublishedHost newer;
  newer.set_format(kFormat + 1);
  newer.mutable_host()->set_hostname("h");
  v1::PublishedHost hostless;
  hostless.set_format(kFormat);
  v1::PublishedHost unformatted;
  unformatted.mutable_host()->set_hostname("h");
  const Case cases[] = {
      {"\xff\xff\xff", absl::StatusCode::kInvalidArgument, "does not parse"},
      {"\x12\x05\x0a", absl::StatusCode::kInvalidArgument, "does not parse"},  // Truncated.
      {newer.SerializeAsString(), absl::StatusCode::kFailedPrecondition, "newer agent"},
      {hostless.SerializeAsString(), absl::StatusCode::kFailedPrecondition, "no host"},
      {unformatted.SerializeAsString(), absl::StatusCode::kFailedPrecondition, "format 0"},
      {"", absl::StatusCode::kFailedPrecondition, "format 0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<v1::PublishedHost> p = ParseHostFile(c.bytes);
    ASSERT_FALSE(p.ok()) << c.says;
    EXPECT_EQ(p.status().code(), c.code) << p.status();
    EXPECT_THAT(p.status().message(), HasSubstr(c.says));
  }
  v1::PublishedHost good;
  good.set_format(kFormat);
  good.mutable_host()->set_hostname("h");
  EXPECT_TRUE(ParseHostFile(good.SerializeAsString()).ok());
}

TEST(HostFile, MissingAndUnreadableFilesNameThePath) {
  const std::string dir = testing::MakeTempDir("hostfile-bad");
  absl::StatusOr<HostFile> missing = ReadHostFile(dir + "/none.pb");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir + "/none.pb"));
  EXPECT_THAT(missing.status().message(), HasSubstr("--host-file-dir"));

  WriteBytes(dir + "/junk.pb", "not a protobuf at all \xff\xff");
  absl::StatusOr<HostFile> junk = ReadHostFile(dir + "/junk.pb");
  ASSERT_FALSE(junk.ok());
  EXPECT_THAT(junk.status().message(), HasSubstr(dir + "/junk.pb"));

  absl::StatusOr<HostFile> directory = ReadHostFile(dir);
  EXPECT_FALSE(directory.ok());
}

}  // namespace
}  // namespace fabric::hostfile
