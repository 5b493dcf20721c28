#include "agent/fabric/perftest/wire.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/strings.h"

namespace fabric::perftest {
namespace {

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}

void PutBe(uint64_t v, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(v >> (8 * (n - 1 - i)));
}

uint64_t GetBe(const uint8_t* in, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | in[i];
  return v;
}

// Host order, as perftest copies struct ibv_device_attr (x86_64, aarch64: little-endian).
int32_t GetHostI32(const uint8_t* in) {
  uint32_t v;
  std::memcpy(&v, in, sizeof v);
  return static_cast<int32_t>(v);
}

// The text before the first NUL of a fixed-size field.
std::string_view Text(std::span<const uint8_t> bytes) {
  const auto* p = reinterpret_cast<const char*>(bytes.data());
  return std::string_view(p, strnlen(p, bytes.size()));
}

bool Printable(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// Reads `width` hex digits and the separator after them (if any) at `*pos`.
absl::StatusOr<uint64_t> Hex(std::span<const uint8_t> b, size_t* pos, size_t width, char sep,
                             const char* field) {
  if (*pos + width + (sep ? 1 : 0) > b.size()) return Invalid(absl::StrCat("key: short ", field));
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) {
    const int d = HexDigit(static_cast<char>(b[*pos + i]));
    if (d < 0) return Invalid(absl::StrCat("key: ", field, " is not ", width, " hex digits"));
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *pos += width;
  if (sep) {
    if (b[*pos] != static_cast<uint8_t>(sep)) {
      return Invalid(absl::StrCat("key: no '", std::string(1, sep), "' after ", field));
    }
    ++*pos;
  }
  return v;
}

}  // namespace

// ---- Version ------------------------------------------------------------------------------

std::array<uint8_t, kVersionSize> EncodeVersion(std::string_view text) {
  std::array<uint8_t, kVersionSize> out{};
  std::memcpy(out.data(), text.data(), std::min(text.size(), kVersionSize - 1));
  return out;
}

absl::StatusOr<Version> DecodeVersion(std::span<const uint8_t> bytes) {
  if (bytes.size() != kVersionSize) {
    return Invalid(absl::StrCat("perftest version: ", bytes.size(), " bytes, not ", kVersionSize));
  }
  Version v;
  v.text = std::string(Text(bytes));
  if (v.text.empty() || !Printable(v.text)) {
    return Invalid("perftest version: not a version string (is the peer perftest?)");
  }
  char* end = nullptr;
  v.value = std::strtod(v.text.c_str(), &end);  // atof, as perftest reads it
  if (end == v.text.c_str() || !std::isfinite(v.value)) {
    return Invalid(absl::StrCat("perftest version '", v.text, "' is not a number"));
  }
  if (v.value < kOldestPeer) {
    return absl::FailedPreconditionError(
        absl::StrCat("perftest ", v.text, " is older than 5.70, the oldest that speaks with this ",
                     "side (perftest ", std::string(kOurVersion), ")"));
  }
  return v;
}

// ---- System data and MTU ------------------------------------------------------------------

std::array<uint8_t, 4> EncodeU32(uint32_t v) {
  std::array<uint8_t, 4> out;
  PutBe(v, 4, out.data());
  return out;
}

absl::StatusOr<uint32_t> DecodeU32(std::span<const uint8_t> bytes) {
  if (bytes.size() != 4) return Invalid("system data: not 4 bytes");
  return static_cast<uint32_t>(GetBe(bytes.data(), 4));
}

absl::StatusOr<uint32_t> DecodePageSize(std::span<const uint8_t> bytes) {
  absl::StatusOr<uint32_t> v = DecodeU32(bytes);
  if (!v.ok()) return v.status();
  if (*v < 1024 || *v > (1u << 20) || (*v & (*v - 1)) != 0) {
    return Invalid(absl::StrCat("perftest page size ", *v,
                                " is not a page size (a power of two, 1 KiB to 1 MiB)"));
  }
  return *v;
}

std::array<uint8_t, kMtuSize> EncodeMtu(int mtu_enum) {
  std::array<uint8_t, kMtuSize> out{};
  out[0] = static_cast<uint8_t>('0' + std::clamp(mtu_enum, 1, 5));
  return out;
}

absl::StatusOr<int> DecodeMtu(std::span<const uint8_t> bytes) {
  const std::string_view t = Text(bytes);
  if (t.size() != 1 || t[0] < '1' || t[0] > '5') {
    return Invalid(absl::StrCat("perftest MTU '", Printable(t) ? std::string(t) : "?",
                                "' is not an ibv_mtu value (1..5)"));
  }
  return t[0] - '0';
}

// ---- Per-QP keys ----------------------------------------------------------------------------

size_t KeySize(bool gid) { return gid ? kKeySizeGid : kKeySize; }

std::vector<uint8_t> EncodeKey(const Key& k, bool gid) {
  std::string text = absl::StrFormat("%04x:%04x:%06x:%06x:%08x:%016x", k.lid, k.out_reads,
                                     k.qpn & 0xffffff, k.psn & 0xffffff, k.rkey, k.vaddr);
  if (gid) {
    for (uint8_t g : k.gid) absl::StrAppendFormat(&text, ":%02x", g);
    absl::StrAppendFormat(&text, ":%08x:", k.srqn);
  } else {
    absl::StrAppendFormat(&text, ":%08x", k.srqn);
  }
  std::vector<uint8_t> out(text.begin(), text.end());
  out.push_back(0);
  return out;
}

absl::StatusOr<Key> DecodeKey(std::span<const uint8_t> b, bool gid) {
  const size_t want = KeySize(gid);
  if (b.size() != want) {
    return Invalid(absl::StrCat("key: ", b.size(), " bytes, not ", want,
                                gid ? " (the peer sends no GID: both sides need -x, or neither)"
                                    : " (the peer sends a GID: both sides need -x, or neither)"));
  }
  if (b.back() != 0) return Invalid("key: not NUL-terminated");
  Key k;
  size_t pos = 0;
  auto field = [&](size_t width, char sep, const char* name) {
    return Hex(b, &pos, width, sep, name);
  };
  absl::StatusOr<uint64_t> v;
  if (!(v = field(4, ':', "lid")).ok()) return v.status();
  k.lid = static_cast<uint16_t>(*v);
  if (!(v = field(4, ':', "out_reads")).ok()) return v.status();
  k.out_reads = static_cast<uint16_t>(*v);
  if (!(v = field(6, ':', "qpn")).ok()) return v.status();
  k.qpn = static_cast<uint32_t>(*v);
  if (!(v = field(6, ':', "psn")).ok()) return v.status();
  k.psn = static_cast<uint32_t>(*v);
  if (!(v = field(8, ':', "rkey")).ok()) return v.status();
  k.rkey = static_cast<uint32_t>(*v);
  if (!(v = field(16, ':', "vaddr")).ok()) return v.status();
  k.vaddr = *v;
  if (gid) {
    for (size_t i = 0; i < k.gid.size(); ++i) {
      if (!(v = field(2, ':', "gid")).ok()) return v.status();
      k.gid[i] = static_cast<uint8_t>(*v);
    }
    if (!(v = field(8, ':', "srqn")).ok()) return v.status();
  } else {
    if (!(v = field(8, 0, "srqn")).ok()) return v.status();
  }
  k.srqn = static_cast<uint32_t>(*v);
  if (pos != want - 1) return Invalid("key: trailing bytes before the NUL");
  return k;
}

size_t CmKeySize(const Version& peer) { return peer.AtLeast(6.29) ? 64 : 56; }

std::vector<uint8_t> EncodeCmKey(const Key& k, int gid_index, size_t size) {
  std::vector<uint8_t> out(size == 64 ? 64 : 56, 0);
  const size_t shift = out.size() == 64 ? 8 : 0;  // 6.29: tail_markers_vaddr after vaddr
  PutBe(k.lid, 4, &out[0]);
  PutBe(k.out_reads, 4, &out[4]);
  PutBe(k.qpn, 4, &out[8]);
  PutBe(k.psn, 4, &out[12]);
  PutBe(k.rkey, 4, &out[16]);
  PutBe(k.vaddr, 8, &out[24]);
  std::memcpy(&out[32 + shift], k.gid.data(), 16);
  PutBe(k.srqn, 4, &out[48 + shift]);
  PutBe(static_cast<uint32_t>(gid_index), 4, &out[52 + shift]);
  return out;
}

absl::StatusOr<Key> DecodeCmKey(std::span<const uint8_t> b) {
  if (b.size() != 56 && b.size() != 64) {
    return Invalid(absl::StrCat("rdma_cm key: ", b.size(), " bytes, not 56 or 64"));
  }
  const size_t shift = b.size() == 64 ? 8 : 0;
  Key k;
  const uint64_t lid = GetBe(&b[0], 4), out_reads = GetBe(&b[4], 4), qpn = GetBe(&b[8], 4),
                 psn = GetBe(&b[12], 4);
  if (lid > 0xffff || out_reads > 0xffff || qpn > 0xffffff || psn > 0xffffff) {
    return Invalid("rdma_cm key: a field out of range");
  }
  k.lid = static_cast<uint16_t>(lid);
  k.out_reads = static_cast<uint16_t>(out_reads);
  k.qpn = static_cast<uint32_t>(qpn);
  k.psn = static_cast<uint32_t>(psn);
  k.rkey = static_cast<uint32_t>(GetBe(&b[16], 4));
  k.vaddr = GetBe(&b[24], 8);
  std::memcpy(k.gid.data(), &b[32 + shift], 16);
  k.srqn = static_cast<uint32_t>(GetBe(&b[48 + shift], 4));
  return k;
}

// ---- Bandwidth report ---------------------------------------------------------------------

std::vector<std::array<uint8_t, kBwReportFieldSize>> EncodeBwReport(const BwReport& r) {
  const uint64_t values[kBwReportFields] = {r.size, r.iters, std::bit_cast<uint64_t>(r.peak),
                                            std::bit_cast<uint64_t>(r.average),
                                            std::bit_cast<uint64_t>(r.msg_rate)};
  std::vector<std::array<uint8_t, kBwReportFieldSize>> out(kBwReportFields);
  for (size_t i = 0; i < kBwReportFields; ++i) PutBe(values[i], kBwReportFieldSize, out[i].data());
  return out;
}

absl::StatusOr<BwReport> DecodeBwReport(std::span<const uint8_t> b) {
  constexpr size_t kTotal = kBwReportFields * kBwReportFieldSize;
  if (b.size() != kTotal)
    return Invalid(absl::StrCat("report: ", b.size(), " bytes, not ", kTotal));
  uint64_t v[kBwReportFields];
  for (size_t i = 0; i < kBwReportFields; ++i) {
    v[i] = GetBe(&b[i * kBwReportFieldSize], kBwReportFieldSize);
  }
  BwReport r;
  r.size = v[0];
  r.iters = v[1];
  r.peak = std::bit_cast<double>(v[2]);
  r.average = std::bit_cast<double>(v[3]);
  r.msg_rate = std::bit_cast<double>(v[4]);
  for (double d : {r.peak, r.average, r.msg_rate}) {
    if (!std::isfinite(d) || d < 0) return Invalid("report: a figure that is not a finite rate");
  }
  return r;
}

// ---- Parameter negotiation ------------------------------------------------------------------

namespace {

// The negotiated fields in perftest's order: name, offset, the member (a 4-byte int or an 8-byte
// u64), the names of its values (empty: a number).
struct Field {
  const char* name;
  size_t offset;
  int32_t Negotiate::*i32;
  uint64_t Negotiate::*u64;
  std::vector<const char*> values;
  size_t width() const { return u64 ? 8 : 4; }
  uint64_t Get(const Negotiate& n) const {
    return u64 ? n.*u64 : static_cast<uint64_t>(static_cast<uint32_t>(n.*i32));
  }
  void Set(Negotiate& n, uint64_t v) const {
    if (u64) {
      n.*u64 = v;
    } else {
      n.*i32 = static_cast<int32_t>(static_cast<uint32_t>(v));
    }
  }
};

const std::vector<Field>& Fields() {
  using N = Negotiate;
  static const std::vector<const char*> kSwitch = {"OFF", "ON"};
  static const std::vector<Field> kFields = {
      {"test_method", 0, &N::test_method, nullptr, {"RUN_REGULAR", "RUN_ALL", "RUN_INFINITELY"}},
      {"connection_type",
       4,
       &N::connection_type,
       nullptr,
       {"RC", "UC", "UD", "RawEth", "XRC", "DC", "SRD"}},
      {"verb", 8, &N::verb, nullptr, {"SEND", "SEND_IMM", "WRITE", "WRITE_IMM", "READ", "ATOMIC"}},
      {"tst", 12, &N::tst, nullptr, {"LAT", "BW", "LAT_BY_BW", "FS_RATE"}},
      {"atomicType", 16, &N::atomic_type, nullptr, {"CMP_AND_SWAP", "FETCH_AND_ADD"}},
      {"test_type", 20, &N::test_type, nullptr, {"ITERATIONS", "DURATION"}},
      {"report_fmt", 24, &N::report_fmt, nullptr, {"GBS", "MBS"}},
      {"size", 32, nullptr, &N::size, {}},
      {"iters", 40, nullptr, &N::iters, {}},
      {"aes_xts", 48, &N::aes_xts, nullptr, kSwitch},
      {"num_of_qps", 52, &N::num_of_qps, nullptr, {}},
      {"duration", 56, &N::duration, nullptr, {}},
      {"use_rdma_cm", 60, &N::use_rdma_cm, nullptr, kSwitch},
      {"use_write_with_imm", 64, &N::use_write_with_imm, nullptr, kSwitch},
      {"no_enhanced_reorder", 68, &N::no_enhanced_reorder, nullptr, kSwitch},
      {"sig_offload", 72, &N::sig_offload, nullptr, kSwitch},
      {"data_validation", 76, &N::data_validation, nullptr, kSwitch},
  };
  return kFields;
}

constexpr size_t kAttrOffset = 80;

}  // namespace

int32_t Negotiate::MaxQpRdAtom() const { return GetHostI32(&device_attr[kMaxQpRdAtomOffset]); }

bool Negotiates(const Version& peer) { return peer.AtLeast(6.28); }

std::vector<uint8_t> EncodeNegotiate(const Negotiate& n) {
  std::vector<uint8_t> out(n.mlx5dv ? kNegotiateSizeMlx5dv : kNegotiateSize, 0);
  for (const Field& f : Fields()) PutBe(f.Get(n), f.width(), &out[f.offset]);
  std::memcpy(&out[kAttrOffset], n.device_attr.data(), kDeviceAttrSize);
  if (n.mlx5dv) PutBe(n.mlx5dv_comp_mask, 8, &out[kNegotiateSize]);
  return out;
}

absl::StatusOr<Negotiate> DecodeNegotiate(std::span<const uint8_t> b) {
  if (b.size() != kNegotiateSize && b.size() != kNegotiateSizeMlx5dv) {
    return Invalid(absl::StrCat("parameter negotiation: ", b.size(), " bytes, not ", kNegotiateSize,
                                " or ", kNegotiateSizeMlx5dv));
  }
  Negotiate n;
  for (const Field& f : Fields()) {
    const uint64_t x = GetBe(&b[f.offset], f.width());
    if (!f.values.empty() && x >= f.values.size()) {
      return Invalid(absl::StrCat("parameter negotiation: ", f.name, " = ", x,
                                  " is none of perftest's values"));
    }
    f.Set(n, x);
  }
  std::memcpy(n.device_attr.data(), &b[kAttrOffset], kDeviceAttrSize);
  n.mlx5dv = b.size() == kNegotiateSizeMlx5dv;
  n.mlx5dv_comp_mask = n.mlx5dv ? GetBe(&b[kNegotiateSize], 8) : 0;
  return n;
}

std::optional<std::string> FirstMismatch(const Negotiate& local, const Negotiate& remote) {
  for (const Field& f : Fields()) {
    const uint64_t a = f.Get(local), b = f.Get(remote);
    if (a == b) continue;
    if (!f.values.empty() && a < f.values.size() && b < f.values.size()) {
      return absl::StrCat(" ", f.name, " mismatch: local=", f.values[a], ", remote=", f.values[b]);
    }
    return absl::StrCat(" ", f.name, " mismatch: local=", a, ", remote=", b);
  }
  return std::nullopt;
}

}  // namespace fabric::perftest
