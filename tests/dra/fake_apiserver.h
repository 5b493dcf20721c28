// The tests' Kubernetes API server (fake_apiserver.py) from C++: started on a free port with its
// own CA and server certificate, a token file, and the nodes it knows; its control calls (faults,
// objects, what it holds and saw) through the agent's own client.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/publish/kubeapi/api_client.h"
#include "tests/testing/certs.h"
#include "tests/testing/subprocess.h"

namespace fabric::testing {

class FakeApiServer {
 public:
  struct Options {
    std::vector<std::string> nodes = {"node-a"};
    bool client_ca = false;  // Also take client certificates signed by the CA.
  };
  static absl::StatusOr<std::unique_ptr<FakeApiServer>> Start(Options options);
  static absl::StatusOr<std::unique_ptr<FakeApiServer>> Start() { return Start(Options{}); }

  // What the agent is given: the server, the CA, the token file (the agent's copy).
  kubeapi::KubeConfig Config() const;
  const std::string& dir() const { return dir_; }
  const Cert& ca() const { return ca_; }
  const std::string& server() const { return server_; }
  // The server's token (what it accepts from now on) and the agent's copy.
  void SetServerToken(const std::string& token) const;
  void SetClientToken(const std::string& token) const;
  // A kubeconfig file for Config(), written in dir().
  std::string WriteKubeconfig() const;

  // POST /fake/faults: `faults` is the JSON array.
  absl::Status Faults(const nlohmann::json& faults) const;
  absl::Status Objects(const nlohmann::json& objects) const;
  absl::StatusOr<nlohmann::json> State() const;

 private:
  std::string dir_, server_;
  Cert ca_;
  std::unique_ptr<Subprocess> process_;
  std::unique_ptr<kubeapi::KubeApi> control_;
};

}  // namespace fabric::testing
