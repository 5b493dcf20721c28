// Certificates made at test time with OpenSSL: CAs, server and client certificates, expired ones.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

namespace fabric::testing {

// A key and a certificate, as OpenSSL objects and as PEM files.
struct Cert {
  std::shared_ptr<EVP_PKEY> key;
  std::shared_ptr<X509> cert;
  std::string cert_path, key_path;
};

// A P-256 certificate for `cn`, written to DIR/NAME.crt and DIR/NAME.key, signed by `issuer`
// (null: self-signed, a CA), valid from `from` to `to` seconds around now, with the subject
// alternative names `san` ("IP:127.0.0.1,DNS:localhost") when given.
Cert MakeCert(const std::string& dir, const std::string& name, const std::string& cn,
              const Cert* issuer, const std::string& san = "", long from = -3600, long to = 86400);

}  // namespace fabric::testing
