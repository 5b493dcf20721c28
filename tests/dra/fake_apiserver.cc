#include "tests/dra/fake_apiserver.h"

#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace fabric::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

absl::StatusOr<std::unique_ptr<FakeApiServer>> FakeApiServer::Start(Options options) {
  auto s = std::unique_ptr<FakeApiServer>(new FakeApiServer());
  s->dir_ = MakeTempDir("fake-apiserver");
  s->ca_ = MakeCert(s->dir_, "ca", "fake cluster CA", nullptr);
  const Cert server =
      MakeCert(s->dir_, "server", "kube-apiserver", &s->ca_, "IP:127.0.0.1,DNS:localhost");
  s->SetServerToken("agent-token-1");
  s->SetClientToken("agent-token-1");
  std::vector<std::string> argv = {
      "/usr/bin/python3", "-E", FABRIC_SOURCE_DIR "/tests/dra/fake_apiserver.py", "--cert",
      server.cert_path, "--key", server.key_path, "--token-file", s->dir_ + "/server-token",
      // The DaemonSet's ClusterRole: a call it does not grant is 403.
      "--rbac", FABRIC_SOURCE_DIR "/deploy/kubernetes/components/dra/rbac.yaml"};
  if (options.client_ca) {
    argv.push_back("--client-ca");
    argv.push_back(s->ca_.cert_path);
  }
  for (const std::string& n : options.nodes) {
    argv.push_back("--node");
    argv.push_back(n);
  }
  auto p = Subprocess::Start(argv);
  if (!p.ok()) return p.status();
  s->process_ = *std::move(p);
  // The interpreter and jsonschema load in well under a second; 30 s for a loaded CI machine.
  for (int i = 0; i < 3000 && s->server_.empty(); ++i) {
    const std::string out = s->process_->Stdout();
    if (auto at = out.find("listening on "); at != std::string::npos) {
      auto end = out.find('\n', at);
      if (end != std::string::npos) {
        s->server_ = absl::StrCat("https://", out.substr(at + 13, end - at - 13));
      }
    }
    if (!s->process_->running()) {
      return absl::InternalError(absl::StrCat("fake API server exited: ", s->process_->Stderr()));
    }
    if (s->server_.empty()) usleep(10000);
  }
  if (s->server_.empty()) return absl::DeadlineExceededError("fake API server did not start");
  auto control = kubeapi::KubeApiImpl::Create(s->Config());
  if (!control.ok()) return control.status();
  s->control_ = *std::move(control);
  return s;
}

kubeapi::KubeConfig FakeApiServer::Config() const {
  kubeapi::KubeConfig c;
  c.server = server_;
  c.ca_pem = ReadAll(ca_.cert_path);
  c.token_file = dir_ + "/client-token";
  return c;
}

void FakeApiServer::SetServerToken(const std::string& token) const {
  std::ofstream(dir_ + "/server-token") << token << "\n";
}
void FakeApiServer::SetClientToken(const std::string& token) const {
  std::ofstream(dir_ + "/client-token.new") << token << "\n";
  std::rename((dir_ + "/client-token.new").c_str(), (dir_ + "/client-token").c_str());
}

std::string FakeApiServer::WriteKubeconfig() const {
  const std::string path = dir_ + "/kubeconfig";
  std::ofstream(path) << "apiVersion: v1\nkind: Config\ncurrent-context: agent\n"
                      << "clusters:\n- name: fake\n  cluster:\n    server: " << server_
                      << "\n    certificate-authority-data: "
                      << absl::Base64Escape(ReadAll(ca_.cert_path))
                      << "\ncontexts:\n- name: agent\n  context: {cluster: fake, user: agent}\n"
                      << "users:\n- name: agent\n  user:\n    tokenFile: client-token\n";
  return path;
}

absl::Status FakeApiServer::Faults(const nlohmann::json& faults) const {
  auto r = control_->Call({"POST", "/fake/faults", nlohmann::json{{"faults", faults}}.dump()});
  if (!r.ok()) return r.status();
  return r->code == 200 ? absl::OkStatus() : absl::InternalError(r->body);
}

absl::Status FakeApiServer::Objects(const nlohmann::json& objects) const {
  auto r = control_->Call({"POST", "/fake/objects", nlohmann::json{{"objects", objects}}.dump()});
  if (!r.ok()) return r.status();
  return r->code == 200 ? absl::OkStatus() : absl::InternalError(r->body);
}

absl::StatusOr<nlohmann::json> FakeApiServer::State() const {
  auto r = control_->Call({"GET", "/fake/state", ""});
  if (!r.ok()) return r.status();
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return absl::InternalError("fake API server state is not JSON");
  return j;
}

}  // namespace fabric::testing
