#include "agent/launch/doctor_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>

namespace fabric::launch {
namespace {

using ::testing::HasSubstr;
using Env = std::map<std::string, std::string>;

struct EnvFileCase {
  std::string text;
  Env want;
};

class EnvFileTest : public ::testing::TestWithParam<EnvFileCase> {};

TEST_P(EnvFileTest, Parses) {
  auto env = ParseEnvFile(GetParam().text);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(*env, GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, EnvFileTest,
    ::testing::Values(EnvFileCase{"", {}}, EnvFileCase{"# comment\n\n  \n", {}},
                      EnvFileCase{"NCCL_IB_HCA==mlx5_1:1\n", {{"NCCL_IB_HCA", "=mlx5_1:1"}}},
                      EnvFileCase{"export NCCL_IB_HCA='=mlx5_1:1,mlx5_2:1'\nexport UCX_TLS=rc,sm\n",
                                  {{"NCCL_IB_HCA", "=mlx5_1:1,mlx5_2:1"}, {"UCX_TLS", "rc,sm"}}},
                      EnvFileCase{"A='it'\\''s'\n",
                                  {{"A", "it's"}}},  // ShellQuote's form of a quote.
                      EnvFileCase{"A=\"x \\\"y\\\" \\$z\"\n", {{"A", "x \"y\" $z"}}},
                      EnvFileCase{"A=\r\n", {{"A", ""}}}, EnvFileCase{"A=1\nA=2\n", {{"A", "2"}}},
                      EnvFileCase{"A==b=c", {{"A", "=b=c"}}}));

TEST(EnvFileTest, RefusesWhatIsNotAnAssignment) {
  for (const char* bad : {"NOEQUALS\n", "1A=x\n", "A B=x\n", "A='open\n", "A=\"open\n",
                          "exportA=x\n", "=x\n", "export\n"}) {
    auto env = ParseEnvFile(bad);
    EXPECT_FALSE(env.ok()) << bad;
    EXPECT_THAT(env.status().message(), HasSubstr("line 1")) << bad;
  }
  auto env = ParseEnvFile("A=1\nB='x\n");
  ASSERT_FALSE(env.ok());
  EXPECT_THAT(env.status().message(), HasSubstr("line 2: B: unterminated '"));
}

TEST(EnvFileTest, BoundsTheNumberOfVariables) {
  std::string text;
  for (int i = 0; i < 10001; ++i) text += "V" + std::to_string(i) + "=1\n";
  auto env = ParseEnvFile(text);
  ASSERT_FALSE(env.ok());
  EXPECT_THAT(env.status().message(), HasSubstr("more than 10000"));
}

TEST(FormatDoctorTest, AreasEvidenceFixAndVerdictLine) {
  v1::DoctorReport r;
  r.set_context("container");
  r.set_env_source("this process");
  r.set_verdict(v1::SEVERITY_CRITICAL);
  r.set_summary("NCCL will fall back to sockets: no /dev/infiniband in this container");
  v1::DoctorCheck* k = r.add_checks();
  k->set_area("devices");
  k->set_severity(v1::SEVERITY_CRITICAL);
  k->set_subject("/dev/infiniband");
  k->set_verdict("no /dev/infiniband here");
  k->add_evidence("ls: none");
  k->set_fix("give the container the RDMA devices");
  const std::string text = FormatDoctor(r);
  EXPECT_THAT(text, HasSubstr("Doctor (container, variables of this process)"));
  EXPECT_THAT(text, HasSubstr("\nDEVICES\n  CRITICAL  /dev/infiniband: no /dev/infiniband here\n"));
  EXPECT_THAT(text, HasSubstr("            - ls: none\n"));
  EXPECT_THAT(text, HasSubstr("            fix: give the container the RDMA devices\n"));
  EXPECT_THAT(text, ::testing::EndsWith("\nDOCTOR CRITICAL - NCCL will fall back to sockets: no "
                                        "/dev/infiniband in this container\n"));
}

// The env file is read where it is, as a regular file, bounded: a FIFO never blocks the doctor, a
// directory or device is refused by name (UNKNOWN, exit 3, for the caller), not judged as an empty
// environment.
TEST(ReadEnvFileTest, RegularFilesOnlyBoundedNeverBlocking) {
  const std::string dir = ::testing::TempDir() + "/read_env_file_test";
  ::mkdir(dir.c_str(), 0700);
  const std::string fifo = dir + "/fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string file = dir + "/env";
  const std::string big = dir + "/big";
  {
    std::ofstream(file) << "NCCL_IB_HCA==mlx5_0:1\n";
    std::ofstream(big) << std::string((1 << 20) + 1, '#');
  }
  auto ok = ReadEnvFile(file);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->at("NCCL_IB_HCA"), "=mlx5_0:1");
  struct Case {
    std::string path;
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {fifo, absl::StatusCode::kInvalidArgument, "not a regular file (a FIFO)"},
      {dir, absl::StatusCode::kInvalidArgument, "not a regular file (a directory)"},
      {"/dev/null", absl::StatusCode::kInvalidArgument, "not a regular file (a device)"},
      {big, absl::StatusCode::kInvalidArgument, "larger than 1048576"},
      {dir + "/missing", absl::StatusCode::kNotFound, "cannot be read"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    auto env = ReadEnvFile(c.path);
    ASSERT_FALSE(env.ok());
    EXPECT_EQ(env.status().code(), c.code);
    EXPECT_THAT(std::string(env.status().message()), HasSubstr(c.message));
    EXPECT_THAT(std::string(env.status().message()), HasSubstr(c.path));
  }
}

// Every field of a check may carry outside bytes (a value, a name): none reaches the terminal raw.
TEST(FormatDoctorTest, EscapesOutsideBytes) {
  const std::string evil = "x\x1b]0;owned\x07\x1b[2J\r";
  v1::DoctorReport r;
  r.set_context(evil);
  r.set_env_source(evil);
  r.set_summary(evil);
  v1::DoctorCheck* k = r.add_checks();
  k->set_area("devices");
  k->set_subject(evil);
  k->set_verdict(evil);
  k->add_evidence(evil);
  k->set_fix(evil);
  const std::string text = FormatDoctor(r);
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_TRUE(c == '\n' || (u >= 0x20 && u < 0x7f)) << "byte " << static_cast<int>(u);
  }
  EXPECT_THAT(text, HasSubstr("x\\x1b]0;owned\\x07\\x1b[2J\\x0d"));
}

}  // namespace
}  // namespace fabric::launch
