#include "agent/fabric/announce/handoff.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/common/errno.h"
#include "agent/common/fd.h"
#include "agent/common/ip.h"
#include "agent/common/json_depth.h"
#include "agent/common/strings.h"

namespace fabric::announce {
namespace {

using nlohmann::json;

constexpr int kVersion = 1;
constexpr size_t kMaxAddresses = 64;
constexpr size_t kMaxNameBytes = 512;

bool ParseMac(const std::string& s, Mac* m) {
  if (s.size() != 17) return false;
  for (size_t i = 0; i < 6; ++i) {
    if (i > 0 && s[i * 3 - 1] != ':') return false;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = hex(s[i * 3]), lo = hex(s[i * 3 + 1]);
    if (hi < 0 || lo < 0) return false;
    (*m)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

bool ParseIp(const std::string& s, int* family, in6_addr* out) {
  absl::StatusOr<IpAddress> a = ::fabric::ParseIp(s);
  if (!a.ok()) return false;
  *family = a->family;
  *out = a->addr;
  return true;
}

int64_t Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

// Strict field readers: a missing optional field keeps the default, a present one of the wrong
// type or range is an error naming it.
absl::Status ReadInt(const json& obj, const char* key, int64_t lo, int64_t hi, int64_t* out,
                     bool required = false) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    return required ? absl::InvalidArgumentError(absl::StrCat(key, ": missing")) : absl::OkStatus();
  }
  if (!it->is_number_integer())
    return absl::InvalidArgumentError(absl::StrCat(key, ": not an integer"));
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": ", v, " outside ", lo, "..", hi));
  }
  *out = v;
  return absl::OkStatus();
}

absl::Status ReadBool(const json& obj, const char* key, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return absl::OkStatus();
  if (!it->is_boolean()) return absl::InvalidArgumentError(absl::StrCat(key, ": not a boolean"));
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status ReadString(const json& obj, const char* key, bool required, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    return required ? absl::InvalidArgumentError(absl::StrCat(key, ": missing")) : absl::OkStatus();
  }
  if (!it->is_string()) return absl::InvalidArgumentError(absl::StrCat(key, ": not a string"));
  *out = it->get<std::string>();
  if (out->size() > kMaxNameBytes)
    return absl::InvalidArgumentError(absl::StrCat(key, ": too long"));
  return absl::OkStatus();
}

#define HANDOFF_TRY(expr)                     \
  do {                                        \
    if (absl::Status s_ = (expr); !s_.ok()) { \
      return s_;                              \
    }                                         \
  } while (0)

absl::StatusOr<Handoff> DecodeJson(const json& doc) {
  if (!doc.is_object()) return absl::InvalidArgumentError("hand-off: not a JSON object");
  int64_t version = 0;
  HANDOFF_TRY(ReadInt(doc, "v", 0, 1000, &version));
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("hand-off: version ", version, ", want ", kVersion));
  }
  Handoff h;
  std::string kind;
  HANDOFF_TRY(ReadString(doc, "kind", true, &kind));
  if (kind == "announce") {
    h.kind = Handoff::Kind::kAnnounce;
  } else if (kind == "cancel") {
    h.kind = Handoff::Kind::kCancel;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("hand-off: unknown kind \"", kind, "\""));
  }
  HANDOFF_TRY(ReadString(doc, "containerId", true, &h.container_id));
  if (h.container_id.empty()) return absl::InvalidArgumentError("containerId: empty");
  HANDOFF_TRY(ReadString(doc, "netns", false, &h.netns));
  if (h.kind == Handoff::Kind::kCancel) {
    // Optional: only this interface of the container (CNI_IFNAME of one attachment).
    HANDOFF_TRY(ReadString(doc, "ifname", false, &h.target.ifname));
    return h;
  }

  auto target = doc.find("target");
  if (target == doc.end() || !target->is_object()) {
    return absl::InvalidArgumentError("target: missing or not an object");
  }
  HANDOFF_TRY(ReadString(*target, "ifname", true, &h.target.ifname));
  if (h.target.ifname.empty() || h.target.ifname.size() >= 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("target.ifname: bad name \"", h.target.ifname, "\""));
  }
  int64_t ifindex = 0;
  HANDOFF_TRY(ReadInt(*target, "ifindex", 1, INT32_MAX, &ifindex, /*required=*/true));
  h.target.ifindex = static_cast<int>(ifindex);
  std::string mac;
  HANDOFF_TRY(ReadString(*target, "mac", true, &mac));
  if (!ParseMac(mac, &h.target.mac))
    return absl::InvalidArgumentError(absl::StrCat("target.mac: bad MAC \"", mac, "\""));
  auto addrs = target->find("addresses");
  if (addrs == target->end() || !addrs->is_array()) {
    return absl::InvalidArgumentError("target.addresses: missing or not an array");
  }
  if (addrs->size() > kMaxAddresses)
    return absl::InvalidArgumentError("target.addresses: too many");
  for (const json& a : *addrs) {
    if (!a.is_object()) return absl::InvalidArgumentError("target.addresses[]: not an object");
    Address addr;
    std::string ip;
    HANDOFF_TRY(ReadString(a, "ip", true, &ip));
    if (!ParseIp(ip, &addr.family, &addr.addr)) {
      return absl::InvalidArgumentError(absl::StrCat("address \"", ip, "\": not an IP address"));
    }
    int64_t prefix = 0;
    HANDOFF_TRY(
        ReadInt(a, "prefix", 0, addr.family == AF_INET ? 32 : 128, &prefix, /*required=*/true));
    addr.prefix_len = static_cast<int>(prefix);
    std::string gw;
    HANDOFF_TRY(ReadString(a, "gateway", false, &gw));
    if (!gw.empty()) {
      int gw_family = 0;
      if (!ParseIp(gw, &gw_family, &addr.gateway) || gw_family != addr.family) {
        return absl::InvalidArgumentError(
            absl::StrCat("gateway \"", gw, "\": not an address of ", ip, "'s family"));
      }
      addr.has_gateway = true;
    }
    h.target.addresses.push_back(addr);
  }

  auto plan = doc.find("plan");
  if (plan == doc.end() || !plan->is_object()) {
    return absl::InvalidArgumentError("plan: missing or not an object");
  }
  Plan& p = h.plan;
  int64_t v = p.schedule.fast_count;
  HANDOFF_TRY(ReadInt(*plan, "fastCount", 0, 100, &v));
  p.schedule.fast_count = static_cast<int>(v);
  v = Millis(p.schedule.fast_interval);
  HANDOFF_TRY(ReadInt(*plan, "fastIntervalMs", 1, 60'000, &v));
  p.schedule.fast_interval = absl::Milliseconds(v);
  if (auto tail = plan->find("tailMs"); tail != plan->end()) {
    if (!tail->is_array() || tail->size() > 100)
      return absl::InvalidArgumentError("plan.tailMs: not a short array");
    p.schedule.tail.clear();
    for (const json& t : *tail) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > 600'000) {
        return absl::InvalidArgumentError("plan.tailMs: entries must be 0..600000");
      }
      p.schedule.tail.push_back(absl::Milliseconds(t.get<int64_t>()));
    }
  }
  HANDOFF_TRY(p.schedule.Validate());
  HANDOFF_TRY(ReadBool(*plan, "arpReply", &p.arp_reply_form));
  HANDOFF_TRY(ReadBool(*plan, "ipv6", &p.ipv6));
  HANDOFF_TRY(ReadBool(*plan, "primeGateway", &p.prime_gateway));
  v = Millis(p.gateway_timeout);
  HANDOFF_TRY(ReadInt(*plan, "gatewayTimeoutMs", 1, 60'000, &v));
  p.gateway_timeout = absl::Milliseconds(v);
  HANDOFF_TRY(ReadBool(*plan, "conflictProbe", &p.conflict_probe));
  v = Millis(p.conflict_timeout);
  HANDOFF_TRY(ReadInt(*plan, "conflictTimeoutMs", 1, 60'000, &v));
  p.conflict_timeout = absl::Milliseconds(v);

  int64_t start_ns = 0;
  HANDOFF_TRY(ReadInt(doc, "startNs", 0, INT64_MAX, &start_ns));
  h.start = absl::FromUnixNanos(start_ns);
  HANDOFF_TRY(ReadBool(doc, "firstDone", &h.first_done));
  return h;
}

absl::Status WaitFd(int fd, short events, absl::Time deadline, const char* what) {
  for (;;) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("agent hand-off: timed out ", what));
    }
    pollfd p{fd, events, 0};
    int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)));
    int n = poll(&p, 1, static_cast<int>(ms));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("agent hand-off: poll: ", ErrnoText(errno)));
    }
  }
}

}  // namespace

std::string EncodeHandoff(const Handoff& h) {
  json doc = json::object();
  doc["v"] = kVersion;
  doc["kind"] = h.kind == Handoff::Kind::kCancel ? "cancel" : "announce";
  doc["containerId"] = h.container_id;
  if (!h.netns.empty()) doc["netns"] = h.netns;
  if (h.kind == Handoff::Kind::kCancel) {
    if (!h.target.ifname.empty()) doc["ifname"] = h.target.ifname;
    return doc.dump();
  }
  json addrs = json::array();
  for (const Address& a : h.target.addresses) {
    json j = {{"ip", IpToString(a.family, a.addr)}, {"prefix", a.prefix_len}};
    if (a.has_gateway) j["gateway"] = IpToString(a.family, a.gateway);
    addrs.push_back(std::move(j));
  }
  doc["target"] = {{"ifname", h.target.ifname},
                   {"ifindex", h.target.ifindex},
                   {"mac", MacString(h.target.mac)},
                   {"addresses", std::move(addrs)}};
  json tail = json::array();
  for (absl::Duration d : h.plan.schedule.tail) tail.push_back(Millis(d));
  doc["plan"] = {{"fastCount", h.plan.schedule.fast_count},
                 {"fastIntervalMs", Millis(h.plan.schedule.fast_interval)},
                 {"tailMs", std::move(tail)},
                 {"arpReply", h.plan.arp_reply_form},
                 {"ipv6", h.plan.ipv6},
                 {"primeGateway", h.plan.prime_gateway},
                 {"gatewayTimeoutMs", Millis(h.plan.gateway_timeout)},
                 {"conflictProbe", h.plan.conflict_probe},
                 {"conflictTimeoutMs", Millis(h.plan.conflict_timeout)}};
  doc["startNs"] = absl::ToUnixNanos(h.start);
  doc["firstDone"] = h.first_done;
  return doc.dump();
}

// A hand-off is two levels deep; deeper input is refused before nlohmann builds (and later
// destroys) a tree whose depth is the sender's choice.
absl::StatusOr<Handoff> DecodeHandoff(std::string_view bytes) {
  if (JsonNestingDepth(bytes) > 8) return absl::InvalidArgumentError("hand-off: nested too deeply");
  json doc = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("hand-off: not valid JSON");
  try {
    return DecodeJson(doc);
  } catch (const json::exception& e) {  // Should not happen: every access is type-checked.
    return absl::InvalidArgumentError(absl::StrCat("hand-off: ", e.what()));
  }
}

std::string HandoffSocketBeside(std::string_view agent_socket) {
  const size_t slash = agent_socket.rfind('/');
  const std::string_view dir =
      slash == std::string_view::npos ? std::string_view() : agent_socket.substr(0, slash + 1);
  std::string_view name = agent_socket.substr(dir.size());
  if (name == "agent.sock") return absl::StrCat(Av(dir), "announce.sock");
  if (name.size() > 5 && name.substr(name.size() - 5) == ".sock") name.remove_suffix(5);
  return absl::StrCat(Av(dir), Av(name), ".announce.sock");
}

absl::Status SendHandoff(const std::string& socket_path, const Handoff& h,
                         const std::vector<int>& fds, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("agent socket path \"", socket_path, "\": bad length"));
  }
  if (fds.size() > 4) return absl::InvalidArgumentError("hand-off: at most 4 fds");
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());

  UniqueFd sock(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock.valid())
    return absl::InternalError(absl::StrCat("agent hand-off: socket: ", ErrnoText(errno)));
  const int fd = sock.get();

  // A Unix socket connects at once or fails; EAGAIN means the agent's backlog is full: retry
  // briefly until the deadline.
  while (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EINTR) continue;
    if (errno != EAGAIN || absl::Now() >= deadline) {
      return absl::UnavailableError(
          absl::StrCat("agent hand-off: connect ", socket_path, ": ", ErrnoText(errno)));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }

  std::string msg = EncodeHandoff(h);
  iovec iov{msg.data(), msg.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  if (!fds.empty()) {
    mh.msg_control = control;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    if (sendmsg(fd, &mh, MSG_NOSIGNAL) >= 0) break;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      return absl::UnavailableError(absl::StrCat("agent hand-off: send: ", ErrnoText(errno)));
    }
    if (absl::Status s = WaitFd(fd, POLLOUT, deadline, "sending"); !s.ok()) return s;
  }

  if (absl::Status s = WaitFd(fd, POLLIN, deadline, "waiting for the agent's answer"); !s.ok()) {
    return s;
  }
  char reply[1024];
  ssize_t n = recv(fd, reply, sizeof(reply), 0);
  if (n <= 0) {
    return absl::UnavailableError(
        absl::StrCat("agent hand-off: no answer: ", n == 0 ? "closed" : ErrnoText(errno)));
  }
  json ans = json::parse(reply, reply + n, nullptr, false);
  if (ans.is_discarded() || !ans.is_object() || !ans.contains("ok") || !ans["ok"].is_boolean()) {
    return absl::InternalError("agent hand-off: malformed answer");
  }
  if (!ans["ok"].get<bool>()) {
    std::string why = ans.contains("error") && ans["error"].is_string()
                          ? ans["error"].get<std::string>()
                          : "refused";
    return absl::FailedPreconditionError(absl::StrCat("agent refused the hand-off: ", why));
  }
  return absl::OkStatus();
}

std::string EncodeHandoffAnswer(const absl::Status& status) {
  json ans = {{"ok", status.ok()}};
  if (!status.ok()) ans["error"] = std::string(status.message());
  return ans.dump();
}

}  // namespace fabric::announce
