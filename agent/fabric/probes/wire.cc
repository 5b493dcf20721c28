#include "agent/fabric/probes/wire.h"

#include "absl/strings/str_cat.h"
#include "agent/common/strings.h"

namespace fabric::probes::wire {
namespace {

constexpr size_t kHelloBody = 48;
constexpr size_t kQpEndpointBytes = 46;
constexpr size_t kQpInfoFixed = 4;

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(v); }
  void U16(uint16_t v) { Be(v, 2); }
  void U32(uint32_t v) { Be(v, 4); }
  void U64(uint64_t v) { Be(v, 8); }
  void Bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void Text(const std::string& s) {
    const size_t n = std::min(s.size(), kMaxText);
    U16(static_cast<uint16_t>(n));
    out_.insert(out_.end(), s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
  }
  std::vector<uint8_t>& out() { return out_; }

 private:
  void Be(uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

// Reads fields off a body; any read past the end sets a sticky failure.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  uint8_t U8() { return static_cast<uint8_t>(Be(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Be(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Be(4)); }
  uint64_t U64() { return Be(8); }
  void Bytes(std::span<uint8_t> out) {
    if (!Have(out.size())) return;
    for (size_t i = 0; i < out.size(); ++i) out[i] = in_[pos_ + i];
    pos_ += out.size();
  }
  // Length-prefixed text; control characters become '?' so a peer cannot forge log lines.
  std::string Text() {
    const uint16_t n = U16();
    if (n > kMaxText) {
      bad_ = true;
      return {};
    }
    if (!Have(n)) return {};
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    for (char& c : s) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f) c = '?';
    }
    return s;
  }
  // OK only when nothing was read past the end and nothing is left over.
  absl::Status Finish(std::string_view what) const {
    if (bad_) return absl::InvalidArgumentError(absl::StrCat(Av(what), ": truncated or oversized"));
    if (pos_ != in_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Av(what), ": ", in_.size() - pos_, " trailing bytes"));
    }
    return absl::OkStatus();
  }

 private:
  bool Have(size_t n) {
    if (bad_ || in_.size() - pos_ < n) {
      bad_ = true;
      return false;
    }
    return true;
  }
  uint64_t Be(int bytes) {
    if (!Have(static_cast<size_t>(bytes))) return 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | in_[pos_++];
    return v;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool bad_ = false;
};

void EncodeBody(Writer& w, const Hello& m) {
  const ProbeParams& p = m.params;
  w.U8(static_cast<uint8_t>(p.test));
  w.U8(static_cast<uint8_t>(p.transport));
  w.U8(static_cast<uint8_t>((p.rdma_cm ? 1 : 0) | (m.auth ? 2 : 0)));
  w.U8(0);
  w.U64(p.size);
  w.U64(p.iterations);
  w.U32(static_cast<uint32_t>(absl::ToInt64Milliseconds(p.duration)));
  w.U32(static_cast<uint32_t>(absl::ToInt64Milliseconds(p.margin)));
  w.U32(p.tx_depth);
  w.U32(p.cq_mod);
  w.U32(p.inline_size);
  w.U32(p.post_list);
  w.U32(p.num_qps);
  // Only with a secret, so that a hello without one keeps the bytes older peers know.
  if (m.auth) w.Bytes(m.nonce);
  // Only when named, so that a hello without one keeps the fixed 48-byte body.
  if (!m.device.empty()) w.Text(m.device);
}
void EncodeBody(Writer& w, const Accept& m) { w.U16(m.cm_port); }
void EncodeBody(Writer& w, const Reject& m) { w.Text(m.reason); }
void EncodeBody(Writer& w, const QpInfo& m) {
  w.U8(m.mtu);
  w.U8(m.global ? 1 : 0);
  w.U16(static_cast<uint16_t>(m.qps.size()));
  for (const QpEndpoint& q : m.qps) {
    w.U32(q.qpn);
    w.U32(q.psn);
    w.Bytes(q.gid);
    w.U16(q.lid);
    w.U32(q.rkey);
    w.U64(q.addr);
    w.U64(q.size);
  }
}
void EncodeBody(Writer& w, const Sync& m) { w.U32(m.phase); }
void EncodeBody(Writer& w, const Challenge& m) {
  w.Bytes(m.nonce);
  w.Bytes(m.mac);
}
void EncodeBody(Writer& w, const Proof& m) { w.Bytes(m.mac); }
void EncodeBody(Writer& w, const Done& m) {
  w.U8(m.ok ? 1 : 0);
  w.U64(m.count);
  w.Text(m.message);
}

absl::StatusOr<Message> DecodeHello(Reader& r, size_t body_size) {
  Hello h;
  ProbeParams& p = h.params;
  const uint8_t test = r.U8();
  const uint8_t transport = r.U8();
  const uint8_t flags = r.U8();
  const uint8_t reserved = r.U8();
  p.size = r.U64();
  p.iterations = r.U64();
  p.duration = absl::Milliseconds(r.U32());
  p.margin = absl::Milliseconds(r.U32());
  p.tx_depth = r.U32();
  p.cq_mod = r.U32();
  p.inline_size = r.U32();
  p.post_list = r.U32();
  p.num_qps = r.U32();
  h.auth = (flags & 2) != 0;
  if (h.auth) r.Bytes(h.nonce);
  if (body_size > kHelloBody + (h.auth ? kNonceSize : 0)) {
    h.device = r.Text();
    // An empty name would not encode again; a bad one must not reach the device lookup or logs.
    if (!IsValidDeviceName(h.device)) return absl::InvalidArgumentError("hello: bad device name");
  }
  if (absl::Status s = r.Finish("hello"); !s.ok()) return s;
  if (test < 1 || test > 6) return absl::InvalidArgumentError(absl::StrCat("hello: test ", test));
  if (transport < 1 || transport > 2) {
    return absl::InvalidArgumentError(absl::StrCat("hello: transport ", transport));
  }
  if ((flags & ~3u) != 0 || reserved != 0) {
    return absl::InvalidArgumentError("hello: unknown flags");
  }
  p.test = static_cast<TestKind>(test);
  p.transport = static_cast<Transport>(transport);
  p.rdma_cm = (flags & 1) != 0;
  if (absl::Status s = ValidateParams(p); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("hello: ", s.message()));
  }
  return h;
}

absl::StatusOr<Message> DecodeQpInfo(Reader& r, size_t body_size) {
  QpInfo m;
  m.mtu = r.U8();
  const uint8_t flags = r.U8();
  const uint16_t count = r.U16();
  // Check the count against the body before reserving anything for it.
  if (count < 1 || count > kMaxQps || body_size != kQpInfoFixed + count * kQpEndpointBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("qp info: ", count, " QPs in a body of ", body_size, " bytes"));
  }
  if (m.mtu < 1 || m.mtu > 5) return absl::InvalidArgumentError("qp info: bad mtu");
  if ((flags & ~1u) != 0) return absl::InvalidArgumentError("qp info: unknown flags");
  m.global = (flags & 1) != 0;
  m.qps.resize(count);
  for (QpEndpoint& q : m.qps) {
    q.qpn = r.U32();
    q.psn = r.U32();
    r.Bytes(q.gid);
    q.lid = r.U16();
    q.rkey = r.U32();
    q.addr = r.U64();
    q.size = r.U64();
    if (q.qpn > 0xffffff || q.psn > 0xffffff) {
      return absl::InvalidArgumentError("qp info: QP number or PSN above 24 bits");
    }
    if (q.size > kMaxSize * 2) return absl::InvalidArgumentError("qp info: absurd buffer size");
  }
  if (absl::Status s = r.Finish("qp info"); !s.ok()) return s;
  return m;
}

}  // namespace

bool IsValidDeviceName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Type TypeOf(const Message& m) {
  return std::visit(
      [](const auto& v) -> Type {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Hello>) return Type::kHello;
        if constexpr (std::is_same_v<T, Accept>) return Type::kAccept;
        if constexpr (std::is_same_v<T, Reject>) return Type::kReject;
        if constexpr (std::is_same_v<T, QpInfo>) return Type::kQpInfo;
        if constexpr (std::is_same_v<T, Sync>) return Type::kSync;
        if constexpr (std::is_same_v<T, Challenge>) return Type::kChallenge;
        if constexpr (std::is_same_v<T, Proof>) return Type::kProof;
        return Type::kDone;
      },
      m);
}

std::string_view TypeName(Type t) {
  switch (t) {
    case Type::kHello:
      return "hello";
    case Type::kAccept:
      return "accept";
    case Type::kReject:
      return "reject";
    case Type::kQpInfo:
      return "qp info";
    case Type::kSync:
      return "sync";
    case Type::kDone:
      return "done";
    case Type::kChallenge:
      return "challenge";
    case Type::kProof:
      return "proof";
  }
  return "unknown";
}

std::vector<uint8_t> Encode(const Message& m) {
  Writer body;
  std::visit([&](const auto& v) { EncodeBody(body, v); }, m);
  Writer w;
  w.U32(kMagic);
  w.U16(kVersion);
  w.U16(static_cast<uint16_t>(TypeOf(m)));
  w.U32(static_cast<uint32_t>(body.out().size()));
  w.Bytes(body.out());
  return std::move(w.out());
}

absl::StatusOr<Header> DecodeHeader(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderSize) return absl::InvalidArgumentError("truncated header");
  Reader r(bytes.first(kHeaderSize));
  const uint32_t magic = r.U32();
  const uint16_t version = r.U16();
  const uint16_t type = r.U16();
  const uint32_t length = r.U32();
  if (magic != kMagic) {
    return absl::InvalidArgumentError("bad magic: the peer is not fabric-probe (perftest?)");
  }
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("protocol version ", version, ", this side speaks ", kVersion));
  }
  if (type < 1 || type > 8) return absl::InvalidArgumentError(absl::StrCat("message type ", type));
  if (length > kMaxBody) {
    return absl::InvalidArgumentError(absl::StrCat("message body of ", length, " bytes"));
  }
  return Header{static_cast<Type>(type), length};
}

absl::StatusOr<Message> DecodeBody(Type type, std::span<const uint8_t> body) {
  if (body.size() > kMaxBody) return absl::InvalidArgumentError("message body too long");
  Reader r(body);
  switch (type) {
    case Type::kHello:
      if (body.size() < kHelloBody) {
        return absl::InvalidArgumentError(absl::StrCat("hello of ", body.size(), " bytes"));
      }
      return DecodeHello(r, body.size());
    case Type::kAccept: {
      Accept m;
      m.cm_port = r.U16();
      if (absl::Status s = r.Finish("accept"); !s.ok()) return s;
      return m;
    }
    case Type::kReject: {
      Reject m;
      m.reason = r.Text();
      if (absl::Status s = r.Finish("reject"); !s.ok()) return s;
      return m;
    }
    case Type::kQpInfo:
      return DecodeQpInfo(r, body.size());
    case Type::kSync: {
      Sync m;
      m.phase = r.U32();
      if (absl::Status s = r.Finish("sync"); !s.ok()) return s;
      return m;
    }
    case Type::kDone: {
      Done m;
      const uint8_t ok = r.U8();
      m.count = r.U64();
      m.message = r.Text();
      if (absl::Status s = r.Finish("done"); !s.ok()) return s;
      if (ok > 1) return absl::InvalidArgumentError("done: bad flag");
      m.ok = ok == 1;
      return m;
    }
    case Type::kChallenge: {
      Challenge m;
      r.Bytes(m.nonce);
      r.Bytes(m.mac);
      if (absl::Status s = r.Finish("challenge"); !s.ok()) return s;
      return m;
    }
    case Type::kProof: {
      Proof m;
      r.Bytes(m.mac);
      if (absl::Status s = r.Finish("proof"); !s.ok()) return s;
      return m;
    }
  }
  return absl::InvalidArgumentError("unknown message type");
}

absl::StatusOr<Message> Decode(std::span<const uint8_t> frame) {
  absl::StatusOr<Header> h = DecodeHeader(frame);
  if (!h.ok()) return h.status();
  if (frame.size() - kHeaderSize != h->length) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame of ", frame.size(), " bytes, header says ", kHeaderSize + h->length));
  }
  return DecodeBody(h->type, frame.subspan(kHeaderSize));
}

}  // namespace fabric::probes::wire
