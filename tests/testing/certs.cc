#include "tests/testing/certs.h"

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>

namespace fabric::testing {

Cert MakeCert(const std::string& dir, const std::string& name, const std::string& cn,
              const Cert* issuer, const std::string& san, long from, long to) {
  Cert c;
  c.key.reset(EVP_EC_gen("P-256"), EVP_PKEY_free);
  c.cert.reset(X509_new(), X509_free);
  X509* x = c.cert.get();
  X509_set_version(x, 2);
  static long serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x), from);
  X509_gmtime_adj(X509_getm_notAfter(x), to);
  X509_set_pubkey(x, c.key.get());
  X509_NAME* subject = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer->cert.get() : x;
  X509_set_issuer_name(x, X509_get_subject_name(signer));
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, signer, x, nullptr, nullptr, 0);
  auto add = [&](int nid, const std::string& value) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (ext == nullptr) std::abort();  // A test's own typo: stop at once.
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  };
  add(NID_basic_constraints, issuer == nullptr ? "critical,CA:TRUE" : "CA:FALSE");
  if (!san.empty()) add(NID_subject_alt_name, san);
  X509_sign(x, issuer != nullptr ? issuer->key.get() : c.key.get(), EVP_sha256());
  c.cert_path = dir + "/" + name + ".crt";
  c.key_path = dir + "/" + name + ".key";
  FILE* f = std::fopen(c.cert_path.c_str(), "w");
  PEM_write_X509(f, x);
  std::fclose(f);
  f = std::fopen(c.key_path.c_str(), "w");
  PEM_write_PrivateKey(f, c.key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  return c;
}

}  // namespace fabric::testing
