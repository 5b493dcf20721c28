// The Kubernetes API server, as the agent calls it: one narrow interface (KubeApi) and its libcurl
// implementation. TLS is always verified against the config's CA; a bearer token file is read
// again when it changes (the kubelet rotates projected tokens); every call is bounded in time and
// in the bytes it reads back. HTTP status codes are the caller's to judge; a call that got no
// status (connect, TLS, a time-out, a body over the bound) is an error status here, once.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/publish/kubeapi/kube_config.h"

namespace fabric::kubeapi {

struct ApiRequest {
  std::string method;  // "GET", "POST", "PUT", "PATCH", "DELETE".
  std::string path;    // "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=...".
  std::string body;
  std::string content_type = "application/json";
};

struct ApiResponse {
  long code = 0;  // The HTTP status.
  std::string body;
};

class KubeApi {
 public:
  virtual ~KubeApi() = default;
  // Unavailable when the server could not be reached or answered nothing in time (the message
  // says which), ResourceExhausted for a body over the bound; otherwise the status and body.
  virtual absl::StatusOr<ApiResponse> Call(const ApiRequest& request) = 0;
  // Ends a call in flight (Cancelled) and every later one, at once: a stopping agent does not wait
  // out a slow server's bound. Any thread.
  virtual void Cancel() {}
};

struct ApiOptions {
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration timeout = absl::Seconds(30);  // The whole call.
  size_t max_body = 32 << 20;                  // What a response may bring back.
};

class KubeApiImpl final : public KubeApi {
 public:
  // InvalidArgument for a config it cannot honour (no server, tls-server-name).
  static absl::StatusOr<std::unique_ptr<KubeApiImpl>> Create(KubeConfig config,
                                                             ApiOptions options = {});
  ~KubeApiImpl() override;
  absl::StatusOr<ApiResponse> Call(const ApiRequest& request) override;
  void Cancel() override { cancelled_.store(true); }

 private:
  KubeApiImpl(KubeConfig config, ApiOptions options, void* curl);
  absl::StatusOr<std::string> Token();

  const KubeConfig config_;
  const ApiOptions options_;
  std::mutex mu_;  // One call at a time on the one connection.
  void* curl_;     // CURL*, kept between calls so the connection is reused.
  std::string token_;
  struct timespec token_mtime_ {};
  std::atomic<bool> cancelled_{false};
};

}  // namespace fabric::kubeapi
