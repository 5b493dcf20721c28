// Stock perftest's out-of-band messages (linux-rdma/perftest src/perftest_communication.c), so
// that fabric-probe and the agent's responder can face ib_write_bw & co. on either end. Pure
// encoding and decoding: every byte a peer sends is untrusted, and each decoder takes exactly
// the bytes of one message (perftest reads and writes each message whole, in one call).
//
// The order over TCP (port 18515; the client writes then reads, the server reads then writes):
// version (16 bytes) -> system data (page size, cache line) -> MTU -> parameter negotiation when
// both are >= 6.28 (6.28 itself always) -> per-QP keys, repeated as sync points -> the test ->
// bandwidth reports (bw tests) -> a last key swap. Peers older than 5.70 are refused (as perftest
// refuses them), so the forms perftest keeps for 5.1 to 5.33 peers never occur.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace fabric::perftest {

// ---- Version ------------------------------------------------------------------------------

inline constexpr size_t kVersionSize = 16;  // NUL-padded ASCII, e.g. "6.06"
// What we say we are: new enough that 6.28+ peers negotiate parameters with us (and so check
// them), and every older peer only compares thresholds below it.
inline constexpr std::string_view kOurVersion = "6.29";
inline constexpr double kOldestPeer = 5.70;  // perftest refuses older peers itself

// A peer's version as perftest reads it (atof of the text before the first NUL).
struct Version {
  std::string text;
  double value = 0;
  bool AtLeast(double v) const { return value >= v; }
};
std::array<uint8_t, kVersionSize> EncodeVersion(std::string_view text);
// Errors: no number, bytes that are not printable, or older than kOldestPeer (the message names
// both versions).
absl::StatusOr<Version> DecodeVersion(std::span<const uint8_t> bytes);

// ---- System data and MTU ------------------------------------------------------------------

// Page size and cache line, each a big-endian u32 of its own exchange. Each side keeps the
// larger of the two.
std::array<uint8_t, 4> EncodeU32(uint32_t v);
absl::StatusOr<uint32_t> DecodeU32(std::span<const uint8_t> bytes);
// The page size sizes the buffer that receives the peer's writes: a power of two from 1 KiB to
// 1 MiB, else an error (a hostile value must not make us allocate gigabytes).
absl::StatusOr<uint32_t> DecodePageSize(std::span<const uint8_t> bytes);

// The active MTU as the decimal text of enum ibv_mtu (1 = 256 ... 5 = 4096), NUL-padded to 2
// bytes. The smaller one wins.
inline constexpr size_t kMtuSize = 2;
std::array<uint8_t, kMtuSize> EncodeMtu(int mtu_enum);
absl::StatusOr<int> DecodeMtu(std::span<const uint8_t> bytes);

// ---- Per-QP keys ----------------------------------------------------------------------------

// One QP's connection key. Over TCP it is text: "lid:out_reads:qpn:psn:rkey:vaddr:srqn" (59 bytes
// with the NUL), or with the GID's 16 bytes between vaddr and srqn (108 bytes). Each side reads
// the form its own GID setting implies: both must use a GID (RoCE, or -x), or neither.
struct Key {
  uint16_t lid = 0;
  uint16_t out_reads = 0;
  uint32_t qpn = 0;  // 24 bits
  uint32_t psn = 0;  // 24 bits
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  std::array<uint8_t, 16> gid{};
  uint32_t srqn = 0;
  bool operator==(const Key&) const = default;
};
inline constexpr size_t kKeySize = 59;
inline constexpr size_t kKeySizeGid = 108;
size_t KeySize(bool gid);
std::vector<uint8_t> EncodeKey(const Key& k, bool gid);
// Strict: the exact size, each field its full width of hex digits, the separators and the NUL.
// Without `gid` the decoded GID is zero.
absl::StatusOr<Key> DecodeKey(std::span<const uint8_t> bytes, bool gid);

// With -R the keys travel as a binary struct pingpong_dest in an rdma_cm SEND: big-endian
// lid, out_reads, qpn, psn, rkey, then vaddr (u64), the GID and srqn, gid_index; 56 bytes, 64
// from 6.29 on (a tail-marker address after vaddr).
size_t CmKeySize(const Version& peer);
std::vector<uint8_t> EncodeCmKey(const Key& k, int gid_index, size_t size);
absl::StatusOr<Key> DecodeCmKey(std::span<const uint8_t> bytes);

// ---- Bandwidth report ---------------------------------------------------------------------

// The figures in the sender's units (MB/s as 2^20 bytes, or Gb/s with --report_gbits). Each field
// is its own 8-byte exchange: size, iterations, then peak, average and message rate as
// big-endian IEEE-754 doubles.
struct BwReport {
  uint64_t size = 0;
  uint64_t iters = 0;
  double peak = 0;
  double average = 0;
  double msg_rate = 0;  // Mpps
  bool operator==(const BwReport&) const = default;
};
inline constexpr size_t kBwReportFields = 5;
inline constexpr size_t kBwReportFieldSize = 8;
// The fields, one buffer per exchange.
std::vector<std::array<uint8_t, kBwReportFieldSize>> EncodeBwReport(const BwReport& r);
// The fields received, concatenated; NaN, infinite or negative figures are an error.
absl::StatusOr<BwReport> DecodeBwReport(std::span<const uint8_t> bytes);

// ---- Parameter negotiation (6.28+) ----------------------------------------------------------

// struct perftest_parameters_negotiate: enums and ints big-endian, the device's raw
// ibv_device_attr (host order, 232 bytes) and, in builds with mlx5dv (the usual), a u64
// comp mask: 320 bytes, else 312.
inline constexpr size_t kNegotiateSize = 312;
inline constexpr size_t kNegotiateSizeMlx5dv = 320;
inline constexpr size_t kDeviceAttrSize = 232;
inline constexpr size_t kMaxQpRdAtomOffset = 144;  // in ibv_device_attr

// perftest's enum values, as negotiated (perftest_parameters.h).
inline constexpr int32_t kMethodRegular = 0, kMethodAll = 1;  // -a: all sizes
inline constexpr int32_t kVerbSend = 0, kVerbWrite = 2, kVerbRead = 4;
inline constexpr int32_t kTstLatency = 0, kTstBandwidth = 1;
inline constexpr int32_t kIterations = 0, kDuration = 1;  // test_type: -n or -D
inline constexpr int32_t kReportGbits = 0, kReportMbytes = 1;
inline constexpr int32_t kConnectionRc = 0;

struct Negotiate {
  int32_t test_method = kMethodRegular;
  int32_t connection_type = kConnectionRc;
  int32_t verb = kVerbWrite;
  int32_t tst = kTstBandwidth;
  int32_t atomic_type = 0;
  int32_t test_type = kIterations;
  int32_t report_fmt = kReportMbytes;
  uint64_t size = 65536;
  uint64_t iters = 5000;
  int32_t aes_xts = 0;
  int32_t num_of_qps = 1;
  int32_t duration = 5;  // sent even without -D
  int32_t use_rdma_cm = 0;
  int32_t use_write_with_imm = 0;
  int32_t no_enhanced_reorder = 0;
  int32_t sig_offload = 0;
  int32_t data_validation = 0;  // 6.29; padding in 6.28
  std::array<uint8_t, kDeviceAttrSize> device_attr{};
  uint64_t mlx5dv_comp_mask = 0;
  bool mlx5dv = true;  // the 320-byte form
  bool operator==(const Negotiate&) const = default;
  // The peer's max_qp_rd_atom (an int in host order inside device_attr): perftest lowers its
  // outstanding reads to it.
  int32_t MaxQpRdAtom() const;
};
// Whether this exchange runs: 6.28 always negotiates; 6.29+ only with a peer >= 6.28. We say
// we are 6.29, so: whenever the peer is >= 6.28.
bool Negotiates(const Version& peer);
std::vector<uint8_t> EncodeNegotiate(const Negotiate& n);
// 312 or 320 bytes; enum and switch fields outside perftest's name tables are an error (perftest
// would index its tables with them).
absl::StatusOr<Negotiate> DecodeNegotiate(std::span<const uint8_t> bytes);
// perftest's fatal message for the first field that differs, in its order and words
// (" size mismatch: local=65536, remote=2"); nullopt when they agree.
std::optional<std::string> FirstMismatch(const Negotiate& local, const Negotiate& remote);

}  // namespace fabric::perftest
