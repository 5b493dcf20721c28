// TLS on the TCP listener (--listen with --tls-cert/--tls-key), terminated by the agent's relay
// (agent/daemon/transport/relay.h) because gRPC 1.51 takes an outside connection only in plaintext.
// With
// --tls-client-ca every client must present a certificate from that CA, and only such clients
// may make control calls (narrowed by --tls-control-names to certificates with one of those CN or
// SAN names). The files are re-read when they change (cert-manager and the kubelet rotate them)
// without dropping the server: a bad new file keeps the pair in use and logs why.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/daemon/transport/listener.h"

namespace fabric {

struct TlsOptions {
  std::string cert;       // PEM: the server's certificate chain.
  std::string key;        // PEM: its private key.
  std::string client_ca;  // PEM: CA of client certificates; empty: clients present none.
  std::vector<std::string> control_names;  // Empty: any certificate from client_ca.
};

class TlsContext {
 public:
  // Reads and checks the files; an error names the flag, the file and the reason.
  static absl::StatusOr<std::unique_ptr<TlsContext>> Load(TlsOptions options);

  // The context for a new connection. The files are looked at again at most once a second and
  // read again when they changed.
  std::shared_ptr<SSL_CTX> Current();
  const TlsOptions& options() const { return opt_; }

 private:
  explicit TlsContext(TlsOptions options) : opt_(std::move(options)) {}
  // What identifies the files' contents now: inode, size and mtime of each.
  std::string Fingerprint() const;
  absl::StatusOr<std::shared_ptr<SSL_CTX>> Build() const;

  const TlsOptions opt_;
  std::mutex mu_;
  std::shared_ptr<SSL_CTX> ctx_;
  std::string loaded_;  // Fingerprint of ctx_'s files.
  std::string failed_;  // Fingerprint of files that did not load (logged once).
  absl::Time checked_ = absl::InfinitePast();
};

// The caller behind a finished TLS session on the TCP listener, from its plaintext identity.
Caller IdentifyTlsPeer(Caller tcp, SSL* ssl, const TlsOptions& options);

// The first queued OpenSSL error of this thread as text (the queue is cleared), or `if_none`.
std::string OpenSslError(std::string_view if_none);

// Every name a certificate answers to: its subject CN and its DNS, URI, email and IP SANs.
std::vector<std::string> CertificateNames(X509* cert);

}  // namespace fabric
