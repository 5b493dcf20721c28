// Where the Kubernetes API server is and who the agent is to it: in a cluster, the pod's service
// account (KUBERNETES_SERVICE_HOST/PORT, its token file re-read as the kubelet rotates it, the
// cluster CA); outside, a kubeconfig file. Parsing apart from reading: ParseKubeconfig takes the
// file's bytes (a fuzz target), LoadKubeconfig and InClusterConfig read the files.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace fabric::kubeapi {

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";
inline constexpr size_t kMaxKubeconfigBytes = 256 << 10;

struct KubeConfig {
  std::string server;  // "https://10.96.0.1:443".
  // The CA bundle the server's certificate must chain to, PEM; empty: the system's CAs.
  std::string ca_pem;
  std::string token;       // A bearer token as given.
  std::string token_file;  // A bearer token's file, read again before each request when it changed.
  std::string client_cert_pem;  // A client certificate and its key, PEM (both or neither).
  std::string client_key_pem;
  std::string tls_server_name;  // The name the server's certificate must carry; empty: the host's.
};

// The current context's cluster and user of a kubeconfig (YAML or JSON). Files it names
// (certificate-authority, client-certificate, client-key, tokenFile) are relative to `dir`; their
// contents are read by LoadKubeconfig, so ParseKubeconfig sets `*_file` fields: ca_pem etc. hold
// the "-data" values (base64 decoded). InvalidArgument naming the field for a file that is not a
// kubeconfig, no current context, a context, cluster or user it does not list, a server that is
// not https, insecure-skip-tls-verify (TLS is always verified), an exec or auth-provider user
// (not supported: give a token or a client certificate), bad base64, a file over
// kMaxKubeconfigBytes.
struct ParsedKubeconfig {
  KubeConfig config;
  std::string ca_file;  // Absolute, or empty.
  std::string client_cert_file;
  std::string client_key_file;
};
absl::StatusOr<ParsedKubeconfig> ParseKubeconfig(std::string_view text, std::string_view dir);

// ParseKubeconfig of the file at `path`, with the files it names read.
absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path);

// The pod's service account: FailedPrecondition when KUBERNETES_SERVICE_HOST is unset (not in a
// cluster), NotFound naming a missing file. `getenv` reads the environment (tests give theirs).
absl::StatusOr<KubeConfig> InClusterConfig(
    const std::function<std::optional<std::string>(const char*)>& getenv,
    const std::string& dir = kServiceAccountDir);

}  // namespace fabric::kubeapi
