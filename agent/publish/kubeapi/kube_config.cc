#include "agent/publish/kubeapi/kube_config.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "agent/common/json_depth.h"
#include "agent/common/strings.h"
#include "agent/hostfs/host_fs.h"

namespace fabric::kubeapi {
namespace {

constexpr int kMaxFlowDepth = 64;

// The entry of `list` (a kubeconfig's clusters, contexts or users) called `name`: its `field`.
YAML::Node Named(const YAML::Node& list, const std::string& name, const char* field) {
  if (!list || !list.IsSequence()) return YAML::Node();
  for (const YAML::Node& item : list) {
    if (!item.IsMap()) continue;
    const YAML::Node n = item["name"];
    if (n && n.IsScalar() && n.Scalar() == name) return item[field];
  }
  return YAML::Node();
}

std::string Scalar(const YAML::Node& map, const char* key) {
  if (!map || !map.IsMap()) return "";
  const YAML::Node n = map[key];
  return n && n.IsScalar() ? n.Scalar() : "";
}

absl::Status Decode(const YAML::Node& map, const char* key, std::string* out) {
  const std::string b64 = Scalar(map, key);
  if (b64.empty()) return absl::OkStatus();
  if (!absl::Base64Unescape(b64, out)) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig: ", key, " is not base64"));
  }
  return absl::OkStatus();
}

std::string Resolve(std::string_view dir, const std::string& file) {
  if (file.empty() || absl::StartsWith(file, "/")) return file;
  return (std::filesystem::path(std::string(dir)) / file).lexically_normal().string();
}

absl::StatusOr<std::string> Read(const std::string& path, const char* what) {
  const HostFsImpl fs("/");
  std::error_code ec;
  auto text = fs.ReadFile(std::filesystem::absolute(path, ec).string());
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat(what, ": ", text.status().message()));
  }
  return text;
}

absl::StatusOr<ParsedKubeconfig> Parse(std::string_view text, std::string_view dir) {
  YAML::Node doc = YAML::Load(std::string(text));
  if (!doc.IsMap()) return absl::InvalidArgumentError("kubeconfig: not a map");
  const std::string current = Scalar(doc, "current-context");
  if (current.empty()) return absl::InvalidArgumentError("kubeconfig: no current-context");
  const YAML::Node context = Named(doc["contexts"], current, "context");
  if (!context || !context.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig: context ", Excerpt(current), " is not listed"));
  }
  const std::string cluster_name = Scalar(context, "cluster");
  const std::string user_name = Scalar(context, "user");
  const YAML::Node cluster = Named(doc["clusters"], cluster_name, "cluster");
  if (!cluster || !cluster.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig: cluster ", Excerpt(cluster_name), " is not listed"));
  }
  ParsedKubeconfig out;
  KubeConfig& c = out.config;
  c.server = Scalar(cluster, "server");
  if (!absl::StartsWith(c.server, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig: server ", Excerpt(c.server), " is not https://"));
  }
  if (Scalar(cluster, "insecure-skip-tls-verify") == "true") {
    return absl::InvalidArgumentError(
        "kubeconfig: insecure-skip-tls-verify is refused: the API server's certificate is always "
        "verified");
  }
  c.tls_server_name = Scalar(cluster, "tls-server-name");
  if (absl::Status s = Decode(cluster, "certificate-authority-data", &c.ca_pem); !s.ok()) return s;
  out.ca_file = Resolve(dir, Scalar(cluster, "certificate-authority"));

  const YAML::Node user = user_name.empty() ? YAML::Node() : Named(doc["users"], user_name, "user");
  if (!user_name.empty() && (!user || !user.IsMap())) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig: user ", Excerpt(user_name), " is not listed"));
  }
  if (user && user.IsMap()) {
    if (user["exec"] || user["auth-provider"]) {
      return absl::InvalidArgumentError(
          absl::StrCat("kubeconfig: user ", Excerpt(user_name),
                       " authenticates with a plugin (exec or auth-provider), which the agent "
                       "does not run: give it a token, a tokenFile or a client certificate"));
    }
    c.token = Scalar(user, "token");
    c.token_file = Resolve(dir, Scalar(user, "tokenFile"));
    if (absl::Status s = Decode(user, "client-certificate-data", &c.client_cert_pem); !s.ok()) {
      return s;
    }
    if (absl::Status s = Decode(user, "client-key-data", &c.client_key_pem); !s.ok()) return s;
    out.client_cert_file = Resolve(dir, Scalar(user, "client-certificate"));
    out.client_key_file = Resolve(dir, Scalar(user, "client-key"));
  }
  const bool cert = !c.client_cert_pem.empty() || !out.client_cert_file.empty();
  const bool key = !c.client_key_pem.empty() || !out.client_key_file.empty();
  if (cert != key) {
    return absl::InvalidArgumentError(
        "kubeconfig: a client certificate needs its key, and a key its certificate");
  }
  return out;
}

}  // namespace

absl::StatusOr<ParsedKubeconfig> ParseKubeconfig(std::string_view text, std::string_view dir) {
  if (text.size() > kMaxKubeconfigBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig of ", text.size(), " bytes, more than ", kMaxKubeconfigBytes));
  }
  // yaml-cpp recurses per nested flow collection; JSON's brackets are YAML's flow collections.
  if (JsonNestingDepth(text) > kMaxFlowDepth) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig nests deeper than ", kMaxFlowDepth));
  }
  try {
    return Parse(text, dir);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig: ", e.what()));
  }
}

absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path) {
  auto text = Read(path, "kubeconfig");
  if (!text.ok()) return text.status();
  auto parsed = ParseKubeconfig(*text, std::filesystem::path(path).parent_path().string());
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(),
                        absl::StrCat(path, ": ", parsed.status().message()));
  }
  KubeConfig c = std::move(parsed->config);
  for (auto [file, out, what] :
       {std::tuple{&parsed->ca_file, &c.ca_pem, "certificate-authority"},
        std::tuple{&parsed->client_cert_file, &c.client_cert_pem, "client-certificate"},
        std::tuple{&parsed->client_key_file, &c.client_key_pem, "client-key"}}) {
    if (file->empty()) continue;
    auto bytes = Read(*file, what);
    if (!bytes.ok()) return bytes.status();
    *out = *std::move(bytes);
  }
  return c;
}

absl::StatusOr<KubeConfig> InClusterConfig(
    const std::function<std::optional<std::string>(const char*)>& getenv, const std::string& dir) {
  const std::optional<std::string> host = getenv("KUBERNETES_SERVICE_HOST");
  const std::optional<std::string> port = getenv("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return absl::FailedPreconditionError(
        "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset (give "
        "--kubeconfig outside one)");
  }
  KubeConfig c;
  // An IPv6 service address is bracketed in the URL.
  c.server = absl::StrCat("https://", absl::StrContains(*host, ':') ? "[" : "", *host,
                          absl::StrContains(*host, ':') ? "]" : "", ":", *port);
  auto ca = Read(dir + "/ca.crt", "the service account's CA");
  if (!ca.ok()) return ca.status();
  c.ca_pem = *std::move(ca);
  c.token_file = dir + "/token";
  if (auto token = Read(c.token_file, "the service account's token"); !token.ok()) {
    return token.status();
  }
  return c;
}

}  // namespace fabric::kubeapi
