// The fixture the fabricctl process tests share: example hosts written under a temporary
// directory, and fabricctl run through /bin/sh with its exit code and both streams.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/hosts/builder.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/subprocess.h"

namespace fabric {

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::MakeTempDir("cli");
    ASSERT_FALSE(tmpl.empty());
    tmp_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(tmp_); }

  // Writes an example host under tmp_/<name> and returns its --sysfs/--procfs flags.
  std::string Host(const std::string& name) {
    auto spec = testing::ExampleHost(name);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return HostFrom(*spec, name);
  }
  std::string HostFrom(const testing::HostSpec& spec, const std::string& name) {
    const std::filesystem::path root = tmp_ / name;
    absl::Status s = testing::WriteHost(spec, root);
    EXPECT_TRUE(s.ok()) << s;
    return absl::StrCat("--sysfs=", (root / "sys").string(),
                        " --procfs=", (root / "proc").string());
  }

  // Runs `env_prefix fabricctl args` through /bin/sh.
  Result Run(const std::string& args, const std::string& env_prefix = "") {
    const std::filesystem::path out = tmp_ / "stdout", err = tmp_ / "stderr";
    const std::string cmd = absl::StrCat(env_prefix, " ", FABRICCTL, " ", args, " >", out.string(),
                                         " 2>", err.string());
    int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = Slurp(out);
    r.err = Slurp(err);
    return r;
  }

  std::filesystem::path tmp_;
};

}  // namespace fabric
