// The API client against a real TLS server (the tests' API server): tokens and their rotation,
// client certificates, a CA or a name that does not match, and the faults of a real cluster:
// 500s, slow answers, closed connections, a body of gigabytes, nobody listening.
#include "agent/publish/kubeapi/api_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "tests/dra/fake_apiserver.h"

namespace fabric::kubeapi {
namespace {

using testing::FakeApiServer;
using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ApiClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = FakeApiServer::Start();
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  std::unique_ptr<KubeApiImpl> Client(KubeConfig c, ApiOptions o = {}) {
    auto api = KubeApiImpl::Create(std::move(c), o);
    EXPECT_TRUE(api.ok()) << api.status();
    return api.ok() ? *std::move(api) : nullptr;
  }
  std::unique_ptr<FakeApiServer> server_;
};

TEST_F(ApiClientTest, ReadsWithTheTokenAndRereadsItWhenRotated) {
  auto api = Client(server_->Config());
  auto r = api->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_THAT(r->body, HasSubstr("\"uid\""));
  server_->SetServerToken("agent-token-2");  // The kubelet rotated it; the agent's file is old.
  r = api->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 401);
  server_->SetClientToken("agent-token-2");
  r = api->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  r = api->Call({"GET", "/api/v1/nodes/nobody", ""});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 404);
}

TEST_F(ApiClientTest, KubeconfigFileWorksAsInCluster) {
  auto c = LoadKubeconfig(server_->WriteKubeconfig());
  ASSERT_TRUE(c.ok()) << c.status();
  auto r = Client(*c)->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
}

TEST_F(ApiClientTest, ACertificateFromAnotherCaIsRefused) {
  const testing::Cert other = testing::MakeCert(server_->dir(), "other-ca", "other CA", nullptr);
  KubeConfig c = server_->Config();
  c.ca_pem = ReadAll(other.cert_path);
  auto r = Client(c)->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("certificate"));
  // No CA given: the system's CAs do not know the cluster's either.
  c.ca_pem.clear();
  EXPECT_FALSE(Client(c)->Call({"GET", "/api/v1/nodes/node-a", ""}).ok());
}

TEST_F(ApiClientTest, FaultsAreErrorsOrStatusesNeverHangs) {
  ApiOptions o;
  o.timeout = absl::Seconds(2);
  o.max_body = 1 << 20;
  auto api = Client(server_->Config(), o);
  ASSERT_TRUE(
      server_
          ->Faults(
              {{{"method", "GET"}, {"path", "/api/v1/nodes/"}, {"mode", "500"}},
               {{"method", "GET"}, {"path", "/api/v1/nodes/"}, {"mode", "slow"}, {"seconds", 5}},
               {{"method", "GET"}, {"path", "/api/v1/nodes/"}, {"mode", "close"}},
               {{"method", "GET"}, {"path", "/api/v1/nodes/"}, {"mode", "huge"}}})
          .ok());
  auto r = api->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 500);
  const absl::Time start = absl::Now();
  r = api->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  r = api->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  r = api->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("over 1048576 bytes"));
  // Every fault used up: the next call is served again.
  r = api->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
}

TEST_F(ApiClientTest, CancelEndsACallInFlightAtOnce) {
  auto api = Client(server_->Config());
  ASSERT_TRUE(
      server_
          ->Faults(
              {{{"method", "GET"}, {"path", "/api/v1/nodes/"}, {"mode", "slow"}, {"seconds", 20}}})
          .ok());
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(300));
    api->Cancel();
  });
  const absl::Time start = absl::Now();
  auto r = api->Call({"GET", "/api/v1/nodes/node-a", ""});
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(api->Call({"GET", "/api/v1/nodes/node-a", ""}).status().code(),
            absl::StatusCode::kCancelled);
}

TEST_F(ApiClientTest, NobodyListeningIsUnavailable) {
  KubeConfig c = server_->Config();
  c.server = "https://127.0.0.1:1";
  auto r = Client(c)->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("127.0.0.1:1"));
}

TEST(ApiClient, ClientCertificatesAuthenticate) {
  auto s = FakeApiServer::Start({.nodes = {"node-a"}, .client_ca = true});
  ASSERT_TRUE(s.ok()) << s.status();
  const testing::Cert agent =
      testing::MakeCert((*s)->dir(), "agent", "system:node:node-a", &(*s)->ca());
  KubeConfig c = (*s)->Config();
  c.token_file.clear();
  c.client_cert_pem = ReadAll(agent.cert_path);
  c.client_key_pem = ReadAll(agent.key_path);
  auto api = KubeApiImpl::Create(c);
  ASSERT_TRUE(api.ok());
  auto r = (*api)->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  c.client_cert_pem.clear();
  c.client_key_pem.clear();
  r = (*KubeApiImpl::Create(c))->Call({"GET", "/api/v1/nodes/node-a", ""});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 401);
}

TEST(ApiClient, ConfigsItCannotHonourAreRefused) {
  EXPECT_FALSE(KubeApiImpl::Create(KubeConfig{}).ok());
  KubeConfig c;
  c.server = "https://h";
  c.tls_server_name = "other";
  EXPECT_FALSE(KubeApiImpl::Create(c).ok());
}

}  // namespace
}  // namespace fabric::kubeapi
