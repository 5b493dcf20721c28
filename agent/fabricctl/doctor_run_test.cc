#include "agent/fabricctl/doctor_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace fabric::ctl {
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

}  // namespace
}  // namespace fabric::ctl
