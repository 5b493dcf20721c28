// Feeds a perftest peer's arbitrary bytes to every decoder: what decodes must re-encode to the
// same bytes (keys, reports, negotiation) or to a message that decodes the same.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "agent/fabric/perftest/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fabric::perftest;
  const std::span<const uint8_t> in(data, size);
  (void)DecodeVersion(in);
  (void)DecodeMtu(in);
  (void)DecodePageSize(in);
  for (bool gid : {false, true}) {
    if (auto k = DecodeKey(in, gid); k.ok()) {
      auto again = DecodeKey(EncodeKey(*k, gid), gid);
      if (!again.ok() || !(*again == *k)) std::abort();
    }
  }
  if (auto k = DecodeCmKey(in); k.ok()) {
    auto again = DecodeCmKey(EncodeCmKey(*k, 0, size));
    if (!again.ok() || !(*again == *k)) std::abort();
  }
  if (auto r = DecodeBwReport(in); r.ok()) {
    std::vector<uint8_t> all;
    for (const auto& f : EncodeBwReport(*r)) all.insert(all.end(), f.begin(), f.end());
    auto again = DecodeBwReport(all);
    if (!again.ok() || !(*again == *r)) std::abort();
  }
  if (auto n = DecodeNegotiate(in); n.ok()) {
    auto again = DecodeNegotiate(EncodeNegotiate(*n));
    if (!again.ok() || !(*again == *n)) std::abort();
    (void)FirstMismatch(*n, Negotiate{});
  }
  return 0;
}
