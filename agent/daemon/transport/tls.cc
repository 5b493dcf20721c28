#include "agent/daemon/transport/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"

namespace fabric {
namespace {

// gRPC clients only talk HTTP/2 and insist that the server selects it.
int SelectH2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
             unsigned int inlen, void*) {
  static const unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kH2, sizeof(kH2), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

absl::Status Readable(const char* flag, const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", path, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

std::string Subject(X509* cert) {
  std::vector<std::string> names = CertificateNames(cert);
  X509_NAME* subject = X509_get_subject_name(cert);
  char cn[256] = {};
  if (subject != nullptr &&
      X509_NAME_get_text_by_NID(subject, NID_commonName, cn, sizeof(cn)) > 0) {
    return absl::StrCat("CN=", cn);
  }
  return names.empty() ? "a certificate without names" : absl::StrCat("SAN=", names.front());
}

}  // namespace

std::string OpenSslError(std::string_view if_none) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return std::string(if_none);
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

std::vector<std::string> CertificateNames(X509* cert) {
  std::vector<std::string> out;
  X509_NAME* subject = X509_get_subject_name(cert);
  char cn[256] = {};
  if (subject != nullptr &&
      X509_NAME_get_text_by_NID(subject, NID_commonName, cn, sizeof(cn)) > 0) {
    out.emplace_back(cn);
  }
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans, i);
    if (n->type == GEN_DNS || n->type == GEN_URI || n->type == GEN_EMAIL) {
      const ASN1_IA5STRING* s = n->d.ia5;
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (n->type == GEN_IPADD) {
      const int len = ASN1_STRING_length(n->d.ip);
      char text[INET6_ADDRSTRLEN] = {};
      if ((len == 4 || len == 16) &&
          inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(n->d.ip), text,
                    sizeof(text)) != nullptr) {
        out.emplace_back(text);
      }
    }
  }
  GENERAL_NAMES_free(sans);
  return out;
}

absl::StatusOr<std::unique_ptr<TlsContext>> TlsContext::Load(TlsOptions options) {
  if (options.cert.empty() != options.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!options.control_names.empty() && options.client_ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls-control-names needs --tls-client-ca (the names are those of client certificates)");
  }
  std::unique_ptr<TlsContext> t(new TlsContext(std::move(options)));
  auto ctx = t->Build();
  if (!ctx.ok()) return ctx.status();
  t->ctx_ = *std::move(ctx);
  t->loaded_ = t->Fingerprint();
  t->checked_ = absl::Now();
  return t;
}

std::string TlsContext::Fingerprint() const {
  std::string f;
  for (const std::string* p : {&opt_.cert, &opt_.key, &opt_.client_ca}) {
    struct stat st {};
    if (p->empty() || stat(p->c_str(), &st) != 0) {
      f += "-;";
      continue;
    }
    absl::StrAppend(&f, st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".",
                    st.st_mtim.tv_nsec, ";");
  }
  return f;
}

absl::StatusOr<std::shared_ptr<SSL_CTX>> TlsContext::Build() const {
  ERR_clear_error();
  for (auto [flag, path] : {std::pair{"--tls-cert", &opt_.cert}, std::pair{"--tls-key", &opt_.key},
                            std::pair{"--tls-client-ca", &opt_.client_ca}}) {
    if (path->empty()) continue;
    if (absl::Status s = Readable(flag, *path); !s.ok()) return s;
  }
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (ctx == nullptr)
    return absl::InternalError(absl::StrCat("TLS: ", OpenSslError("unknown error")));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // The relay writes from a buffer that may move between a short write and its retry.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), opt_.cert.c_str()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-cert=", opt_.cert, ": not a PEM certificate: ", OpenSslError("unknown error")));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), opt_.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-key=", opt_.key, " is not the key of --tls-cert=", opt_.cert));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key=", opt_.key, ": not a PEM private key: ", OpenSslError("unknown error")));
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key=", opt_.key, " is not the key of --tls-cert=", opt_.cert));
  }
  X509* cert = SSL_CTX_get0_certificate(ctx.get());
  if (cert != nullptr && X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert=", opt_.cert, " has expired"));
  }
  if (cert != nullptr && X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert=", opt_.cert, " is not valid yet"));
  }
  if (!opt_.client_ca.empty()) {
    if (SSL_CTX_load_verify_locations(ctx.get(), opt_.client_ca.c_str(), nullptr) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-client-ca=", opt_.client_ca,
                       ": not a PEM certificate: ", OpenSslError("unknown error")));
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(opt_.client_ca.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(ctx.get(), names);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectH2, nullptr);
  return ctx;
}

std::shared_ptr<SSL_CTX> TlsContext::Current() {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  if (now - checked_ < absl::Seconds(1)) return ctx_;
  checked_ = now;
  const std::string f = Fingerprint();
  if (f == loaded_ || f == failed_) return ctx_;
  auto fresh = Build();
  if (!fresh.ok()) {
    // Often a rotation caught half-written: the next change is tried again.
    Log(LogLevel::kWarning, "TLS: keeping the certificate in use: ", fresh.status().message());
    failed_ = f;
    return ctx_;
  }
  Log(LogLevel::kInfo, "TLS: certificate files changed; new connections use them");
  ctx_ = *std::move(fresh);
  loaded_ = f;
  failed_.clear();
  return ctx_;
}

Caller IdentifyTlsPeer(Caller tcp, SSL* ssl, const TlsOptions& options) {
  Caller c = std::move(tcp);
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr || options.client_ca.empty() || SSL_get_verify_result(ssl) != X509_V_OK) {
    c.denied = options.client_ca.empty()
                   ? "this TLS listener takes no client certificates (no --tls-client-ca) and "
                     "serves reads only"
                   : "the TLS client presented no verified certificate";
    X509_free(cert);
    return c;
  }
  c.anonymous = false;
  c.certificate = Subject(cert);
  const std::vector<std::string> names = CertificateNames(cert);
  X509_free(cert);
  if (options.control_names.empty()) {
    c.control = true;
    return c;
  }
  for (const std::string& n : names) {
    if (std::find(options.control_names.begin(), options.control_names.end(), n) !=
        options.control_names.end()) {
      c.control = true;
      return c;
    }
  }
  c.denied = absl::StrCat("certificate ", c.certificate, " (names: ", absl::StrJoin(names, ", "),
                          ") is not one of --tls-control-names");
  return c;
}

}  // namespace fabric
