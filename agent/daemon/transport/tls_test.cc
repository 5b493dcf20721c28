// TLS and mutual TLS on the TCP listener: the real agent, real gRPC clients and fabricctl, and
// certificates made at test time with OpenSSL (CAs, server and client certificates, an expired
// one). The rapid-reset guard over TCP is here too: it sits in the same relay.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fabric/v1/agent.grpc.pb.h"
#include "tests/hosts/hosts.h"
#include "tests/testing/binaries.h"
#include "tests/testing/certs.h"
#include "tests/testing/hostile.h"
#include "tests/testing/scrape.h"
#include "tests/testing/subprocess.h"

namespace fabric {
namespace {

namespace fs = std::filesystem;
using testing::Subprocess;

const std::string kAgent = testing::kAgentBinary;
const std::string kCtl = testing::kFabricctlBinary;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("tls_test");
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(testing::WriteExampleHost("roce-9port", dir_ + "/host").ok());
    ca_ = testing::MakeCert(dir_, "ca", "fabric test CA", nullptr);
    other_ca_ = testing::MakeCert(dir_, "other-ca", "another CA", nullptr);
    server_ = testing::MakeCert(dir_, "server", "agent", &ca_, "IP:127.0.0.1,DNS:localhost");
    ops_ = testing::MakeCert(dir_, "ops", "ops", &ca_);
    reader_ = testing::MakeCert(dir_, "reader", "reader", &ca_, "DNS:reader.example");
    stranger_ = testing::MakeCert(dir_, "stranger", "ops", &other_ca_);
  }
  void TearDown() override {
    agent_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Starts the agent with TCP on a free port; returns that port.
  std::string Start(std::vector<std::string> extra) {
    std::vector<std::string> argv = {kAgent, "--socket=" + dir_ + "/agent.sock",
                                     "--sysfs=" + dir_ + "/host/sys",
                                     "--procfs=" + dir_ + "/host/proc", "--listen=127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = Subprocess::Start(argv);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return "";
    agent_ = *std::move(p);
    auto port = testing::WaitForLogged(*agent_, "(port ", absl::Seconds(20));
    EXPECT_TRUE(port.has_value()) << agent_->Stderr();
    return port ? port->substr(0, port->find_first_not_of("0123456789")) : "";
  }

  // A stub over TLS trusting `ca`, presenting `client` when given; a connection of its own.
  std::unique_ptr<v1::FabricAgent::Stub> Tls(const std::string& port, const testing::Cert& ca,
                                             const testing::Cert* client) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = Slurp(ca.cert_path);
    if (client != nullptr) {
      o.pem_cert_chain = Slurp(client->cert_path);
      o.pem_private_key = Slurp(client->key_path);
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::FabricAgent::NewStub(
        grpc::CreateCustomChannel("127.0.0.1:" + port, grpc::SslCredentials(o), args));
  }
  std::unique_ptr<v1::FabricAgent::Stub> Plain(const std::string& target) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::FabricAgent::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }

  static grpc::Status Inventory(v1::FabricAgent::Stub* stub, v1::Inventory* inv = nullptr) {
    v1::Inventory local;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return stub->GetInventory(&ctx, {}, inv != nullptr ? inv : &local);
  }
  // A control call that passes authorization fails on its empty request (INVALID_ARGUMENT).
  static grpc::Status Announce(v1::FabricAgent::Stub* stub) {
    v1::AnnounceResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return stub->Announce(&ctx, {}, &resp);
  }
  bool StillServing() {
    return agent_->running() && Inventory(Plain("unix:" + dir_ + "/agent.sock").get()).ok();
  }

  std::string dir_;
  testing::Cert ca_, other_ca_, server_, ops_, reader_, stranger_;
  std::unique_ptr<Subprocess> agent_;
};

TEST_F(TlsTest, MutualTlsGivesControlCallsToNamedCertificatesOnly) {
  const std::string port =
      Start({"--tls-cert=" + server_.cert_path, "--tls-key=" + server_.key_path,
             "--tls-client-ca=" + ca_.cert_path, "--tls-control-names=ops,ops.example"});
  ASSERT_FALSE(port.empty());
  EXPECT_TRUE(absl::StrContains(agent_->Stderr(), "mTLS")) << agent_->Stderr();

  auto ops = Tls(port, ca_, &ops_);
  v1::Inventory inv;
  grpc::Status s = Inventory(ops.get(), &inv);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(inv.host().rdma_devices_size(), 9);
  s = Announce(ops.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();

  auto reader = Tls(port, ca_, &reader_);
  EXPECT_TRUE(Inventory(reader.get()).ok()) << "reads are open to every verified client";
  s = Announce(reader.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "CN=reader")) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "--tls-control-names")) << s.error_message();

  // Refused at the handshake: another CA's certificate (even with an allowed name), none at all,
  // and a plaintext client. The agent keeps serving everyone else.
  std::vector<std::unique_ptr<v1::FabricAgent::Stub>> refused;
  refused.push_back(Tls(port, ca_, &stranger_));
  refused.push_back(Tls(port, ca_, nullptr));
  for (auto& stub : refused) {
    s = Inventory(stub.get());
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
  s = Inventory(Plain("127.0.0.1:" + port).get());
  EXPECT_FALSE(s.ok());
  // The client trusting another CA does not accept the agent.
  EXPECT_FALSE(Inventory(Tls(port, other_ca_, &ops_).get()).ok());
  EXPECT_TRUE(StillServing()) << agent_->Stderr();
  EXPECT_TRUE(Inventory(ops.get()).ok());

  // fabricctl, the same way.
  auto r = testing::Run({kCtl, "health", "--target=127.0.0.1:" + port, "--tls-ca=" + ca_.cert_path,
                         "--tls-cert=" + ops_.cert_path, "--tls-key=" + ops_.key_path});
  ASSERT_TRUE(r.ok());
  EXPECT_LT(r->status, 3) << r->err;  // A health verdict, not "cannot reach the agent".
  r = testing::Run({kCtl, "health", "--target=127.0.0.1:" + port, "--tls-ca=" + dir_ + "/none"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 2);
  EXPECT_TRUE(absl::StrContains(r->out + r->err, "--tls-ca=" + dir_ + "/none: No such file"))
      << r->out << r->err;
}

TEST_F(TlsTest, TlsWithoutClientCertificatesServesReadsOnly) {
  const std::string port =
      Start({"--tls-cert=" + server_.cert_path, "--tls-key=" + server_.key_path});
  ASSERT_FALSE(port.empty());
  auto client = Tls(port, ca_, nullptr);
  EXPECT_TRUE(Inventory(client.get()).ok());
  grpc::Status s = Announce(client.get());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
}

TEST_F(TlsTest, TlsClientOnThePlaintextPortFailsAndTheAgentServesOn) {
  const std::string port = Start({});
  ASSERT_FALSE(port.empty());
  EXPECT_FALSE(Inventory(Tls(port, ca_, &ops_).get()).ok());
  EXPECT_TRUE(Inventory(Plain("127.0.0.1:" + port).get()).ok());
  EXPECT_TRUE(StillServing());
}

TEST_F(TlsTest, CertificatesAreReadAgainWhenTheyChangeAndABadFileKeepsThePairInUse) {
  // The files the agent reads are replaced the way the kubelet updates a Secret: renamed in.
  const std::string cert = dir_ + "/tls.crt", key = dir_ + "/tls.key";
  fs::copy_file(server_.cert_path, cert);
  fs::copy_file(server_.key_path, key);
  const std::string port = Start({"--tls-cert=" + cert, "--tls-key=" + key});
  ASSERT_FALSE(port.empty());
  ASSERT_TRUE(Inventory(Tls(port, ca_, nullptr).get()).ok());
  const testing::Cert rotated =
      testing::MakeCert(dir_, "rotated", "agent", &other_ca_, "IP:127.0.0.1");
  fs::copy_file(rotated.key_path, key + ".new");
  fs::copy_file(rotated.cert_path, cert + ".new");
  fs::rename(key + ".new", key);
  fs::rename(cert + ".new", cert);
  EXPECT_TRUE(testing::WaitFor([&] { return Inventory(Tls(port, other_ca_, nullptr).get()).ok(); },
                               absl::Seconds(10)))
      << agent_->Stderr();
  EXPECT_FALSE(Inventory(Tls(port, ca_, nullptr).get()).ok()) << "the old certificate is gone";
  { std::ofstream(cert + ".new") << "not a certificate\n"; }
  fs::rename(cert + ".new", cert);
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        (void)Inventory(
            Tls(port, other_ca_, nullptr).get());  // Files are looked at per connection.
        return absl::StrContains(agent_->Stderr(), "keeping the certificate in use");
      },
      absl::Seconds(10)))
      << agent_->Stderr();
  EXPECT_TRUE(Inventory(Tls(port, other_ca_, nullptr).get()).ok());
}

TEST_F(TlsTest, BadCertificatesAtStartAreExitTwoWithTheReason) {
  const testing::Cert expired =
      testing::MakeCert(dir_, "expired", "agent", &ca_, "IP:127.0.0.1", -7200, -3600);
  { std::ofstream(dir_ + "/garbage.pem") << "-----BEGIN CERTIFICATE-----\nxx\n"; }
  struct Case {
    std::vector<std::string> flags;
    std::string says;
  } cases[] = {
      {{"--tls-cert=" + dir_ + "/none.crt", "--tls-key=" + server_.key_path}, "No such file"},
      {{"--tls-cert=" + dir_ + "/garbage.pem", "--tls-key=" + server_.key_path}, "not a PEM"},
      {{"--tls-cert=" + server_.cert_path, "--tls-key=" + ops_.key_path}, "is not the key of"},
      {{"--tls-cert=" + expired.cert_path, "--tls-key=" + expired.key_path}, "has expired"},
      {{"--tls-cert=" + server_.cert_path, "--tls-key=" + server_.key_path,
        "--tls-client-ca=" + dir_ + "/garbage.pem"},
       "--tls-client-ca="},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {kAgent, "--socket=" + dir_ + "/bad.sock",
                                     "--sysfs=" + dir_ + "/host/sys",
                                     "--procfs=" + dir_ + "/host/proc", "--listen=127.0.0.1:0"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    auto r = testing::Run(argv, absl::Seconds(20));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 2) << c.says << ": " << r->err;
    EXPECT_TRUE(absl::StrContains(r->err, c.says)) << r->err;
  }
  // Usage: TLS without --listen, a key without a certificate.
  auto r = testing::Run({kAgent, "--socket=" + dir_ + "/bad.sock",
                         "--tls-cert=" + server_.cert_path, "--tls-key=" + server_.key_path});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 2) << r->err;
}

TEST_F(TlsTest, RapidResetOverTcpIsCutShortByTheRelay) {
  const std::string port = Start({"--metrics=127.0.0.1:0"});
  ASSERT_FALSE(port.empty());
  const auto r = testing::RapidResetAgainst(agent_->pid(), "127.0.0.1:" + port, 100000);
  ASSERT_TRUE(r.sent.ok()) << r.sent.status();
  EXPECT_LT(*r.sent, 100000) << "the connection was not closed";
  EXPECT_TRUE(testing::WaitFor(
      [&] { return absl::StrContains(agent_->Stderr(), "rapid-reset budget"); }, absl::Seconds(5)))
      << agent_->Stderr();
  std::printf("rapid reset over TCP: %d of 100000 streams sent; peak RSS %lld kB\n", *r.sent,
              static_cast<long long>(r.after.hwm_kb));
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(r.after.hwm_kb, r.before.rss_kb + 64 * 1024);
#endif
  EXPECT_TRUE(Inventory(Plain("127.0.0.1:" + port).get()).ok());
  // Counted, by reason; a TLS client on this plaintext port is another.
  EXPECT_FALSE(Inventory(Tls(port, ca_, nullptr).get()).ok());
  auto logged = testing::WaitForLogged(*agent_, "metrics on http://127.0.0.1:", absl::Seconds(5));
  ASSERT_TRUE(logged.has_value()) << agent_->Stderr();
  auto [status, text] = testing::HttpGet(std::stoi(*logged), "/metrics");
  ASSERT_EQ(status, "200 OK");
  EXPECT_EQ(testing::Sample(text, R"(fabric_api_connections_closed_total{reason="reset_flood"})"),
            1);
  EXPECT_GE(testing::Sample(text, R"(fabric_api_connections_closed_total{reason="not_http2"})"), 1);
}

}  // namespace
}  // namespace fabric
