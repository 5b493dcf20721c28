#include "agent/publish/kubeapi/api_client.h"

#include <curl/curl.h>

#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/strings.h"
#include "agent/hostfs/host_fs.h"

namespace fabric::kubeapi {
namespace {

struct Sink {
  std::string* body;
  size_t max;
  bool over = false;
};

size_t Write(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t bytes = size * n;
  if (sink->body->size() + bytes > sink->max) {
    sink->over = true;
    return 0;  // libcurl stops the transfer.
  }
  sink->body->append(data, bytes);
  return bytes;
}

// libcurl asks this about once a second and whenever data moves: non-zero ends the transfer.
int Progress(void* cancelled, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<std::atomic<bool>*>(cancelled)->load() ? 1 : 0;
}

class Headers {
 public:
  ~Headers() { curl_slist_free_all(list_); }
  void Add(const std::string& h) { list_ = curl_slist_append(list_, h.c_str()); }
  curl_slist* get() const { return list_; }

 private:
  curl_slist* list_ = nullptr;
};

curl_blob Blob(const std::string& pem) {
  return curl_blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
}

}  // namespace

absl::StatusOr<std::unique_ptr<KubeApiImpl>> KubeApiImpl::Create(KubeConfig config,
                                                                 ApiOptions options) {
  if (config.server.empty()) return absl::InvalidArgumentError("no API server");
  if (!config.tls_server_name.empty()) {
    return absl::InvalidArgumentError(
        "tls-server-name is not supported: give the server by the name its certificate carries");
  }
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  return std::unique_ptr<KubeApiImpl>(new KubeApiImpl(std::move(config), options, curl));
}

KubeApiImpl::KubeApiImpl(KubeConfig config, ApiOptions options, void* curl)
    : config_(std::move(config)), options_(options), curl_(curl) {}

KubeApiImpl::~KubeApiImpl() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

absl::StatusOr<std::string> KubeApiImpl::Token() {
  if (config_.token_file.empty()) return config_.token;
  struct stat st {};
  if (stat(config_.token_file.c_str(), &st) != 0) {
    return absl::UnavailableError(
        absl::StrCat("token file ", config_.token_file, ": ", ErrnoText(errno)));
  }
  if (token_.empty() || st.st_mtim.tv_sec != token_mtime_.tv_sec ||
      st.st_mtim.tv_nsec != token_mtime_.tv_nsec) {
    auto text = HostFsImpl("/").ReadFile(config_.token_file);
    if (!text.ok()) return absl::UnavailableError(text.status().message());
    token_ = std::string(absl::StripAsciiWhitespace(*text));
    token_mtime_ = st.st_mtim;
  }
  return token_;
}

absl::StatusOr<ApiResponse> KubeApiImpl::Call(const ApiRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.load()) return absl::CancelledError("the API client was stopped");
  auto* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);  // Keeps the connection and its TLS session, drops every option.
  absl::StatusOr<std::string> token = Token();
  if (!token.ok()) return token.status();

  ApiResponse response;
  Sink sink{&response.body, options_.max_body};
  Headers headers;
  headers.Add("Accept: application/json");
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    headers.Add(absl::StrCat("Content-Type: ", request.content_type));
  }
  if (!token->empty()) headers.Add(absl::StrCat("Authorization: Bearer ", *token));
  headers.Add("Expect:");  // No 100-continue round trip for a body.
  const std::string url = absl::StrCat(config_.server, request.path);
  char error[CURL_ERROR_SIZE] = {};

  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  if (request.method == "GET") curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  if (!request.body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "fabric-agent");
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.connect_timeout)));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.timeout)));
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, Progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &cancelled_);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_blob ca = Blob(config_.ca_pem), cert = Blob(config_.client_cert_pem),
            key = Blob(config_.client_key_pem);
  if (!config_.ca_pem.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
  if (!config_.client_cert_pem.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  }

  const CURLcode rc = curl_easy_perform(curl);
  if (sink.over) {
    return absl::ResourceExhaustedError(absl::StrCat(
        request.method, " ", request.path, ": the answer is over ", options_.max_body, " bytes"));
  }
  if (rc == CURLE_ABORTED_BY_CALLBACK) {
    return absl::CancelledError(absl::StrCat(request.method, " ", request.path, ": stopped"));
  }
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat(request.method, " ", config_.server, request.path,
                                               ": ",
                                               error[0] != 0 ? error : curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.code);
  return response;
}

}  // namespace fabric::kubeapi
