#include "agent/daemon/transport/h2_guard.h"

#include <algorithm>

namespace fabric {
namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr unsigned char kRstStream = 0x3;

}  // namespace

H2Guard::H2Guard(double per_second, double burst) : resets_allowed_(per_second, burst) {}

H2Guard::Verdict H2Guard::Feed(std::string_view bytes, absl::Time now) {
  while (!bytes.empty() && verdict_ == Verdict::kOk) {
    if (preface_seen_ < kPreface.size()) {
      const size_t n = std::min(bytes.size(), kPreface.size() - preface_seen_);
      if (bytes.substr(0, n) != kPreface.substr(preface_seen_, n)) {
        verdict_ = Verdict::kNotHttp2;
        break;
      }
      preface_seen_ += n;
      bytes.remove_prefix(n);
      continue;
    }
    if (skip_ > 0) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(skip_, bytes.size()));
      skip_ -= n;
      bytes.remove_prefix(n);
      continue;
    }
    const size_t n = std::min(bytes.size(), sizeof(header_) - header_len_);
    std::copy_n(bytes.data(), n, header_ + header_len_);
    header_len_ += n;
    bytes.remove_prefix(n);
    if (header_len_ < sizeof(header_)) break;
    header_len_ = 0;
    ++frames_;
    skip_ = (uint64_t{header_[0]} << 16) | (uint64_t{header_[1]} << 8) | header_[2];
    if (header_[3] != kRstStream) continue;
    ++resets_;
    if (!resets_allowed_.Take(now)) {
      verdict_ = Verdict::kResetFlood;
      break;
    }
  }
  return verdict_;
}

}  // namespace fabric
