// Kubeconfig files as operators write them, and the service account as the kubelet mounts it.
#include "agent/publish/kubeapi/kube_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/escaping.h"
#include "tests/testing/subprocess.h"

namespace fabric::kubeapi {
namespace {

using ::testing::HasSubstr;

std::string Config(const std::string& cluster, const std::string& user) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: agent\n"
         "clusters:\n- name: other\n  cluster:\n    server: https://wrong:1\n"
         "- name: c1\n  cluster:\n" +
         cluster +
         "contexts:\n- name: agent\n  context:\n    cluster: c1\n    user: u1\n"
         "users:\n- name: u1\n  user:\n" +
         user;
}

TEST(Kubeconfig, TokenAndInlineCa) {
  const std::string ca = absl::Base64Escape("-----BEGIN CERTIFICATE-----\nabc\n");
  auto p = ParseKubeconfig(Config("    server: https://10.0.0.1:6443\n"
                                  "    certificate-authority-data: " +
                                      ca + "\n",
                                  "    token: s3cret\n"),
                           "/etc/fabric");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->config.server, "https://10.0.0.1:6443");
  EXPECT_EQ(p->config.ca_pem, "-----BEGIN CERTIFICATE-----\nabc\n");
  EXPECT_EQ(p->config.token, "s3cret");
  EXPECT_TRUE(p->ca_file.empty());
}

TEST(Kubeconfig, FilesAreRelativeToTheConfig) {
  auto p = ParseKubeconfig(Config("    server: https://api.example:443\n"
                                  "    certificate-authority: pki/ca.crt\n",
                                  "    client-certificate: /abs/agent.crt\n"
                                  "    client-key: agent.key\n    tokenFile: ../token\n"),
                           "/etc/fabric");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ca_file, "/etc/fabric/pki/ca.crt");
  EXPECT_EQ(p->client_cert_file, "/abs/agent.crt");
  EXPECT_EQ(p->client_key_file, "/etc/fabric/agent.key");
  EXPECT_EQ(p->config.token_file, "/etc/token");
}

TEST(Kubeconfig, JsonIsYamlToo) {
  auto p = ParseKubeconfig(
      R"({"current-context":"a","contexts":[{"name":"a","context":{"cluster":"c"}}],)"
      R"("clusters":[{"name":"c","cluster":{"server":"https://h:1"}}]})",
      "/");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->config.server, "https://h:1");
}

TEST(Kubeconfig, RefusedWithTheReason) {
  const std::map<std::string, std::string> cases = {
      {"", "not a map"},
      {"- a\n- b\n", "not a map"},
      {"kind: Config\n", "no current-context"},
      {"current-context: x\ncontexts: []\n", "context \"x\" is not listed"},
      {Config("    server: http://10.0.0.1\n", "    token: t\n"), "is not https://"},
      {Config("    server: https://h\n    insecure-skip-tls-verify: true\n", "    token: t\n"),
       "insecure-skip-tls-verify is refused"},
      {Config("    server: https://h\n", "    exec:\n      command: aws\n"), "plugin"},
      {Config("    server: https://h\n    certificate-authority-data: '!!'\n", "    token: t\n"),
       "certificate-authority-data is not base64"},
      {Config("    server: https://h\n", "    client-certificate: a.crt\n"), "needs its key"},
      {"current-context: a\ncontexts: [[[[", "kubeconfig:"},
      {std::string(80, '[') + std::string(80, ']'), "deeper"},
      {std::string(kMaxKubeconfigBytes + 1, ' '), "more than"},
  };
  for (const auto& [text, why] : cases) {
    auto p = ParseKubeconfig(text, "/");
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_THAT(p.status().message(), HasSubstr(why)) << text;
  }
}

TEST(Kubeconfig, LoadReadsTheFilesItNames) {
  const std::string dir = testing::MakeTempDir("kubeconfig");
  std::ofstream(dir + "/ca.crt") << "CA PEM";
  std::ofstream(dir + "/agent.crt") << "CERT PEM";
  std::ofstream(dir + "/agent.key") << "KEY PEM";
  std::ofstream(dir + "/config") << Config(
      "    server: https://h:6443\n    certificate-authority: ca.crt\n",
      "    client-certificate: agent.crt\n    client-key: agent.key\n");
  auto c = LoadKubeconfig(dir + "/config");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ca_pem, "CA PEM");
  EXPECT_EQ(c->client_cert_pem, "CERT PEM");
  EXPECT_EQ(c->client_key_pem, "KEY PEM");
  std::filesystem::remove(dir + "/agent.key");
  auto missing = LoadKubeconfig(dir + "/config");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("client-key"));
  EXPECT_FALSE(LoadKubeconfig(dir + "/nope").ok());
}

TEST(Kubeconfig, InClusterFromTheServiceAccount) {
  const std::string dir = testing::MakeTempDir("serviceaccount");
  std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "fd00::1"},
                                            {"KUBERNETES_SERVICE_PORT", "443"}};
  auto getenv = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  auto no_files = InClusterConfig(getenv, dir);
  ASSERT_FALSE(no_files.ok());
  EXPECT_THAT(no_files.status().message(), HasSubstr("CA"));
  std::ofstream(dir + "/ca.crt") << "CLUSTER CA";
  std::ofstream(dir + "/token") << "tok\n";
  auto c = InClusterConfig(getenv, dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://[fd00::1]:443");
  EXPECT_EQ(c->ca_pem, "CLUSTER CA");
  EXPECT_EQ(c->token_file, dir + "/token");
  env.clear();
  auto outside = InClusterConfig(getenv, dir);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fabric::kubeapi
