#include "agent/fabric/probes/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fabric::probes {
namespace {

constexpr size_t kMaxSecret = 4096;
constexpr char kServerLabel[] = "fabric-probe responder";
constexpr char kClientLabel[] = "fabric-probe client";

wire::Mac Hmac(std::string_view secret, std::string_view label, const wire::Nonce& server_nonce,
               const wire::Hello& hello) {
  std::vector<uint8_t> data(label.begin(), label.end());
  data.push_back(0);  // ends the label
  data.insert(data.end(), server_nonce.begin(), server_nonce.end());
  const std::vector<uint8_t> frame = wire::Encode(hello);
  data.insert(data.end(), frame.begin(), frame.end());
  wire::Mac mac{};
  unsigned int len = 0;
  // HMAC over in-memory buffers with a valid digest cannot fail short of memory exhaustion; a
  // zero MAC then matches nothing the peer computed, so the exchange fails closed.
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), data.data(), data.size(),
           mac.data(), &len) == nullptr ||
      len != mac.size()) {
    mac.fill(0);
  }
  return mac;
}

}  // namespace

absl::StatusOr<std::string> LoadSecret(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::FailedPreconditionError(absl::StrCat("cannot read secret file ", path));
  std::string s;
  s.resize(kMaxSecret + 1);
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  if (in.bad())
    return absl::FailedPreconditionError(absl::StrCat("cannot read secret file ", path));
  s.resize(static_cast<size_t>(in.gcount()));
  if (s.size() > kMaxSecret) {
    return absl::FailedPreconditionError(
        absl::StrCat("secret file ", path, " is over ", kMaxSecret, " bytes"));
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.empty())
    return absl::FailedPreconditionError(absl::StrCat("secret file ", path, " is empty"));
  return s;
}

absl::StatusOr<wire::Nonce> RandomNonce() {
  wire::Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    return absl::InternalError("no random bytes for a nonce (RAND_bytes failed)");
  }
  return n;
}

wire::Mac ServerMac(std::string_view secret, const wire::Nonce& server_nonce,
                    const wire::Hello& hello) {
  return Hmac(secret, kServerLabel, server_nonce, hello);
}

wire::Mac ClientMac(std::string_view secret, const wire::Nonce& server_nonce,
                    const wire::Hello& hello) {
  return Hmac(secret, kClientLabel, server_nonce, hello);
}

bool MacEqual(const wire::Mac& a, const wire::Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace fabric::probes
