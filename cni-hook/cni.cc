#include "cni-hook/cni.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/common/excerpt.h"
#include "agent/common/ip.h"
#include "agent/common/json_depth.h"
#include "agent/common/status.h"
#include "agent/common/strings.h"
#include "agent/fabric/announce/handoff.h"
#include "agent/fabric/announce/validate.h"

namespace fabric::cni {
namespace {

constexpr char kCodeUrl[] = "type.fabric.io/cni.code";
constexpr char kDetailsUrl[] = "type.fabric.io/cni.details";

bool Supported(std::string_view v) {
  for (const char* s : kSupportedVersions) {
    if (v == s) return true;
  }
  return false;
}

absl::Status Invalid(std::string_view msg) { return Error(kInvalidConfig, msg); }

// Strict typed reads of optional keys: absent is fine (the default stays), a wrong type or an
// out-of-range value is code 7 naming the key by its path.
absl::Status ReadBool(const Json& obj, const char* key, std::string_view path, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return absl::OkStatus();
  if (!it->is_boolean()) return Invalid(absl::StrCat(Av(path), ": must be true or false"));
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status ReadInt(const Json& v, std::string_view path, int64_t lo, int64_t hi, int64_t* out) {
  if (!v.is_number_integer()) {  // includes unsigned; floats and strings are wrong
    return Invalid(absl::StrCat(Av(path), ": must be an integer"));
  }
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Invalid(absl::StrCat(Av(path), ": out of range [", lo, ", ", hi, "]"));
  }
  const int64_t n = v.get<int64_t>();
  if (n < lo || n > hi) {
    return Invalid(absl::StrCat(Av(path), ": ", n, " is out of range [", lo, ", ", hi, "]"));
  }
  *out = n;
  return absl::OkStatus();
}

absl::Status ReadMs(const Json& obj, const char* key, std::string_view path, int64_t lo, int64_t hi,
                    absl::Duration* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return absl::OkStatus();
  int64_t n = 0;
  FABRIC_RETURN_IF_ERROR(ReadInt(*it, path, lo, hi, &n));
  *out = absl::Milliseconds(n);
  return absl::OkStatus();
}

absl::Status ReadString(const Json& obj, const char* key, std::string_view path, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return absl::OkStatus();
  if (!it->is_string()) return Invalid(absl::StrCat(Av(path), ": must be a string"));
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadPath(const Json& obj, const char* key, std::string* out) {
  std::string v = *out;
  FABRIC_RETURN_IF_ERROR(ReadString(obj, key, key, &v));
  if (obj.contains(key) && (v.empty() || v[0] != '/' || v.find('\0') != std::string::npos)) {
    return Invalid(absl::StrCat(key, ": must be an absolute path"));
  }
  *out = v;
  return absl::OkStatus();
}

// A sub-object of ours (announce, gateway, conflictProbe): absent is fine, anything but an object
// is wrong.
absl::StatusOr<const Json*> ReadObject(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  if (!it->is_object()) return Invalid(absl::StrCat(key, ": must be an object"));
  return &*it;
}

absl::Status ParseRouting(const Json& root, announce::RoutingConfig* r) {
  auto obj = ReadObject(root, "podRouting");
  if (!obj.ok()) return obj.status();
  const Json* o = *obj;
  if (o == nullptr) return absl::OkStatus();
  std::string mode = "auto";
  FABRIC_RETURN_IF_ERROR(ReadString(*o, "mode", "podRouting.mode", &mode));
  using Mode = announce::RoutingConfig::Mode;
  if (mode == "auto") {
    r->mode = Mode::kAuto;
  } else if (mode == "on") {
    r->mode = Mode::kOn;
  } else if (mode == "off") {
    r->mode = Mode::kOff;
  } else {
    return Invalid("podRouting.mode: must be one of auto, on, off");
  }
  // 1..252: not unspec (0) and not default/main/local (253-255); up to 2^31-1.
  constexpr int64_t kMaxTable = std::numeric_limits<int32_t>::max();
  if (auto it = o->find("tableRange"); it != o->end()) {
    if (!it->is_array() || it->size() != 2) {
      return Invalid("podRouting.tableRange: must be [first, last]");
    }
    int64_t first = 0, last = 0;
    FABRIC_RETURN_IF_ERROR(ReadInt((*it)[0], "podRouting.tableRange[0]", 1, kMaxTable, &first));
    FABRIC_RETURN_IF_ERROR(ReadInt((*it)[1], "podRouting.tableRange[1]", first, kMaxTable, &last));
    if (first <= 255 && last >= 253) {
      return Invalid("podRouting.tableRange: must not include 253-255 (default, main, local)");
    }
    r->table_first = static_cast<uint32_t>(first);
    r->table_last = static_cast<uint32_t>(last);
  }
  if (auto it = o->find("rulePriority"); it != o->end()) {
    int64_t n = 0;
    // Above the local table's rule (0), below main's (32766).
    FABRIC_RETURN_IF_ERROR(ReadInt(*it, "podRouting.rulePriority", 1, 32765, &n));
    r->rule_priority = static_cast<uint32_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ParseOurKeys(const Json& root, Config* c) {
  announce::Plan& p = c->plan;
  auto announce_obj = ReadObject(root, "announce");
  if (!announce_obj.ok()) return announce_obj.status();
  if (const Json* a = *announce_obj) {
    if (auto it = a->find("count"); it != a->end()) {
      int64_t n = 0;
      FABRIC_RETURN_IF_ERROR(ReadInt(*it, "announce.count", 0, 100, &n));
      p.schedule.fast_count = static_cast<int>(n);
    }
    FABRIC_RETURN_IF_ERROR(
        ReadMs(*a, "intervalMs", "announce.intervalMs", 1, 60000, &p.schedule.fast_interval));
    if (auto it = a->find("tailMs"); it != a->end()) {
      if (!it->is_array()) return Invalid("announce.tailMs: must be an array of integers");
      if (it->size() > 100) return Invalid("announce.tailMs: more than 100 entries");
      p.schedule.tail.clear();
      for (size_t i = 0; i < it->size(); ++i) {
        int64_t n = 0;
        FABRIC_RETURN_IF_ERROR(
            ReadInt((*it)[i], absl::StrCat("announce.tailMs[", i, "]"), 0, 600000, &n));
        p.schedule.tail.push_back(absl::Milliseconds(n));
      }
    }
    FABRIC_RETURN_IF_ERROR(ReadBool(*a, "arpReply", "announce.arpReply", &p.arp_reply_form));
    FABRIC_RETURN_IF_ERROR(ReadBool(*a, "ipv6", "announce.ipv6", &p.ipv6));
  }
  auto gateway_obj = ReadObject(root, "gateway");
  if (!gateway_obj.ok()) return gateway_obj.status();
  if (const Json* g = *gateway_obj) {
    FABRIC_RETURN_IF_ERROR(ReadBool(*g, "prime", "gateway.prime", &p.prime_gateway));
    FABRIC_RETURN_IF_ERROR(
        ReadMs(*g, "timeoutMs", "gateway.timeoutMs", 1, 60000, &p.gateway_timeout));
  }
  auto probe_obj = ReadObject(root, "conflictProbe");
  if (!probe_obj.ok()) return probe_obj.status();
  if (const Json* cp = *probe_obj) {
    FABRIC_RETURN_IF_ERROR(ReadBool(*cp, "enabled", "conflictProbe.enabled", &p.conflict_probe));
    // Bounded: the probe runs inside ADD.
    FABRIC_RETURN_IF_ERROR(
        ReadMs(*cp, "timeoutMs", "conflictProbe.timeoutMs", 1, 5000, &p.conflict_timeout));
  }
  FABRIC_RETURN_IF_ERROR(ReadString(root, "agentSocket", "agentSocket", &c->agent_socket));
  if (c->agent_socket.empty() || c->agent_socket.size() >= 108 ||
      c->agent_socket.find('\0') != std::string::npos) {
    return Invalid("agentSocket: must be a socket path of 1 to 107 bytes");
  }
  FABRIC_RETURN_IF_ERROR(ReadBool(root, "requireAgent", "requireAgent", &c->require_agent));
  FABRIC_RETURN_IF_ERROR(ReadPath(root, "envDir", &c->env_dir));
  FABRIC_RETURN_IF_ERROR(ReadPath(root, "stateDir", &c->state_dir));
  FABRIC_RETURN_IF_ERROR(ReadPath(root, "sysfsRoot", &c->sysfs_root));
  if (auto it = root.find("logLevel"); it != root.end()) {
    LogLevel level;
    if (!it->is_string() || !ParseLogLevel(it->get_ref<const std::string&>(), &level)) {
      return Invalid("logLevel: must be one of debug, info, warning, error");
    }
    c->log_level = level;
  }
  FABRIC_RETURN_IF_ERROR(ParseRouting(root, &c->routing));
  if (absl::Status s = p.schedule.Validate(); !s.ok()) {
    return Invalid(absl::StrCat("announce: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Attachment>> ParseAttachments(const Json& v) {
  constexpr char kKey[] = "cni.dev/valid-attachments";
  if (!v.is_array()) return Invalid(absl::StrCat(kKey, ": must be an array"));
  std::vector<Attachment> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& a = v[i];
    const std::string where = absl::StrCat(kKey, "[", i, "]");
    if (!a.is_object()) return Invalid(absl::StrCat(where, ": must be an object"));
    Attachment att;
    FABRIC_RETURN_IF_ERROR(
        ReadString(a, "containerID", absl::StrCat(where, ".containerID"), &att.container_id));
    FABRIC_RETURN_IF_ERROR(ReadString(a, "ifname", absl::StrCat(where, ".ifname"), &att.ifname));
    if (att.container_id.empty()) return Invalid(absl::StrCat(where, ".containerID: missing"));
    if (!att.ifname.empty()) {
      if (absl::Status s = announce::CheckIfname(att.ifname, absl::StrCat(where, ".ifname"));
          !s.ok()) {
        return Invalid(Sv(s.message()));
      }
    }
    out.push_back(std::move(att));
  }
  return out;
}

bool ValidContainerId(std::string_view id) {
  // The spec's ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$, bounded so file names built from it stay short.
  if (id.empty() || id.size() > 200 || !std::isalnum(static_cast<unsigned char>(id[0]))) {
    return false;
  }
  for (char ch : id) {
    const auto u = static_cast<unsigned char>(ch);
    if (!std::isalnum(u) && ch != '_' && ch != '.' && ch != '-') return false;
  }
  return true;
}

constexpr int kMaxDepth = 64;

}  // namespace

absl::Status Error(int code, std::string_view msg, std::string_view details) {
  absl::Status s(absl::StatusCode::kUnknown, Av(msg));
  s.SetPayload(kCodeUrl, absl::Cord(absl::StrCat(code)));
  if (!details.empty()) s.SetPayload(kDetailsUrl, absl::Cord(Av(details)));
  return s;
}

int CodeOf(const absl::Status& s) {
  if (auto p = s.GetPayload(kCodeUrl)) {
    int code = 0;
    if (absl::SimpleAtoi(std::string(*p), &code)) return code;
  }
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      return kInvalidConfig;
    case absl::StatusCode::kUnavailable:
      return kTryAgain;
    default:
      return kInternal;
  }
}

std::string DetailsOf(const absl::Status& s) {
  if (auto p = s.GetPayload(kDetailsUrl)) return std::string(*p);
  return "";
}

std::string_view CommandName(Command c) {
  switch (c) {
    case Command::kAdd:
      return "ADD";
    case Command::kDel:
      return "DEL";
    case Command::kCheck:
      return "CHECK";
    case Command::kVersion:
      return "VERSION";
    case Command::kStatus:
      return "STATUS";
    case Command::kGc:
      return "GC";
  }
  return "?";
}

absl::StatusOr<Env> ParseEnv(const EnvMap& env) {
  auto get = [&](std::string_view key) -> const std::string* {
    auto it = env.find(key);
    return it == env.end() ? nullptr : &it->second;
  };
  Env out;
  const std::string* cmd = get("CNI_COMMAND");
  if (cmd == nullptr || cmd->empty()) return Error(kInvalidEnv, "CNI_COMMAND is not set");
  static constexpr Command kAll[] = {Command::kAdd,     Command::kDel,    Command::kCheck,
                                     Command::kVersion, Command::kStatus, Command::kGc};
  bool known = false;
  for (Command c : kAll) {
    if (CommandName(c) == *cmd) {
      out.command = c;
      known = true;
    }
  }
  if (!known)
    return Error(kInvalidEnv, absl::StrCat("CNI_COMMAND: unknown command ", Excerpt(*cmd)));
  if (out.command == Command::kVersion) return out;

  const bool per_container = out.command == Command::kAdd || out.command == Command::kDel ||
                             out.command == Command::kCheck;
  auto required = [&](const char* key, std::string* field) -> absl::Status {
    const std::string* v = get(key);
    if (v == nullptr || v->empty()) {
      return Error(kInvalidEnv, absl::StrCat(key, " is not set (required for ",
                                             Av(CommandName(out.command)), ")"));
    }
    *field = *v;
    return absl::OkStatus();
  };
  if (per_container) {
    FABRIC_RETURN_IF_ERROR(required("CNI_CONTAINERID", &out.container_id));
    if (!ValidContainerId(out.container_id)) {
      return Error(kInvalidEnv, "CNI_CONTAINERID: invalid characters",
                   "must match ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$ and be at most 200 characters");
    }
    FABRIC_RETURN_IF_ERROR(required("CNI_IFNAME", &out.ifname));
    if (absl::Status s = announce::CheckIfname(out.ifname, "CNI_IFNAME"); !s.ok()) {
      return Error(kInvalidEnv, Sv(s.message()));
    }
    FABRIC_RETURN_IF_ERROR(required("CNI_PATH", &out.path));
    // DEL may come after the namespace is gone, with CNI_NETNS empty.
    if (out.command == Command::kDel) {
      if (const std::string* ns = get("CNI_NETNS")) out.netns = *ns;
    } else {
      FABRIC_RETURN_IF_ERROR(required("CNI_NETNS", &out.netns));
    }
  } else if (const std::string* p = get("CNI_PATH")) {
    out.path = *p;
  }
  if (const std::string* args = get("CNI_ARGS"); args != nullptr && !args->empty()) {
    for (absl::string_view kv : absl::StrSplit(*args, ';', absl::SkipEmpty())) {
      const size_t eq = kv.find('=');
      if (eq == absl::string_view::npos || eq == 0) {
        return Error(kInvalidEnv, absl::StrCat("CNI_ARGS: ", Excerpt(Sv(kv)), " is not KEY=VALUE"));
      }
      out.args.emplace_back(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    }
  }
  return out;
}

std::string PodUid(const Env& env) {
  for (const auto& [key, value] : env.args) {
    if (key != "K8S_POD_UID") continue;
    const bool uid = !value.empty() && value.size() <= 64 &&
                     std::all_of(value.begin(), value.end(),
                                 [](char ch) { return absl::ascii_isalnum(ch) || ch == '-'; });
    return uid ? value : "";
  }
  return "";
}

std::string PeekVersion(std::string_view stdin_bytes) {
  if (stdin_bytes.size() > kMaxStdinBytes) return "";
  if (JsonNestingDepth(stdin_bytes) > kMaxDepth) return "";
  Json j = Json::parse(stdin_bytes.begin(), stdin_bytes.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "";
  auto it = j.find("cniVersion");
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

absl::StatusOr<Config> ParseConfig(std::string_view stdin_bytes, Command command) {
  if (stdin_bytes.size() > kMaxStdinBytes) {
    // Named as such: "not valid JSON" would send the operator looking at a config's syntax.
    return Error(kDecodeFailure, "stdin larger than 4 MiB");
  }
  if (JsonNestingDepth(stdin_bytes) > kMaxDepth) {
    return Error(kDecodeFailure, absl::StrCat("stdin nests deeper than ", kMaxDepth, " levels"));
  }
  Json root = Json::parse(stdin_bytes.begin(), stdin_bytes.end(), nullptr, false);
  if (root.is_discarded()) {
    return Error(kDecodeFailure, "stdin is not valid JSON",
                 stdin_bytes.empty() ? "empty input" : "");
  }
  if (!root.is_object()) return Error(kDecodeFailure, "stdin is not a JSON object");
  Config c;
  c.agent_socket = announce::kDefaultHandoffSocket;
  auto version = root.find("cniVersion");
  if (version == root.end()) return Error(kIncompatibleVersion, "cniVersion is missing");
  if (!version->is_string()) return Invalid("cniVersion: must be a string");
  c.cni_version = version->get<std::string>();
  if (!Supported(c.cni_version)) {
    return Error(kIncompatibleVersion,
                 absl::StrCat("cniVersion ", Excerpt(c.cni_version), " is not supported"),
                 absl::StrCat("supported: ", absl::StrJoin(kSupportedVersions, ", ")));
  }
  if ((command == Command::kStatus || command == Command::kGc) && c.cni_version != "1.1.0") {
    return Error(kIncompatibleVersion,
                 absl::StrCat(Av(CommandName(command)), " needs cniVersion 1.1.0, not ",
                              Excerpt(c.cni_version)));
  }
  FABRIC_RETURN_IF_ERROR(ReadString(root, "name", "name", &c.name));
  FABRIC_RETURN_IF_ERROR(ReadString(root, "type", "type", &c.type));
  if (auto it = root.find("prevResult"); it != root.end() && !it->is_null()) {
    if (!it->is_object()) return Invalid("prevResult: must be an object");
    c.prev_result = *it;
  }
  if (auto it = root.find("runtimeConfig"); it != root.end() && !it->is_null()) {
    if (!it->is_object()) return Invalid("runtimeConfig: must be an object");
    c.runtime_config = *it;
  }
  if (!c.prev_result && (command == Command::kAdd || command == Command::kCheck)) {
    return Invalid(absl::StrCat(
        "prevResult is missing: fabric-cni is a chained plugin (list it after the plugin that "
        "creates the interface)"));
  }
  FABRIC_RETURN_IF_ERROR(ParseOurKeys(root, &c));
  if (command == Command::kGc) {
    if (auto it = root.find("cni.dev/valid-attachments"); it != root.end()) {
      auto atts = ParseAttachments(*it);
      if (!atts.ok()) return atts.status();
      c.valid_attachments = std::move(*atts);
    }
  }
  return c;
}

absl::StatusOr<announce::Address> ParseCidr(std::string_view cidr) {
  const size_t slash = cidr.find('/');
  if (slash == std::string_view::npos) return Invalid("no prefix length");
  absl::StatusOr<IpAddress> ip = ParseIp(cidr.substr(0, slash));
  if (!ip.ok()) return Invalid("not an IP address");
  announce::Address a;
  a.family = ip->family;
  a.addr = ip->addr;
  int len = 0;
  const std::string_view prefix = cidr.substr(slash + 1);
  if (prefix.empty() || prefix.size() > 3 || !absl::SimpleAtoi(Av(prefix), &len) || len < 0 ||
      len > (a.family == AF_INET ? 32 : 128) || prefix[0] == '+' || prefix[0] == '-') {
    return Invalid("bad prefix length");
  }
  a.prefix_len = len;
  return a;
}

namespace {

// prevResult.routes[]: a route goes to the interface whose subnet holds its gateway; without a
// gateway (the interface's default gateway is meant) to the only container interface.
absl::Status AttributeRoutes(const Json& prev, std::vector<PodInterface>* ifaces) {
  auto routes = prev.find("routes");
  if (routes == prev.end() || routes->is_null()) return absl::OkStatus();
  if (!routes->is_array()) return Invalid("prevResult.routes: must be an array");
  for (size_t i = 0; i < routes->size(); ++i) {
    const Json& r = (*routes)[i];
    const std::string where = absl::StrCat("prevResult.routes[", i, "]");
    if (!r.is_object()) return Invalid(absl::StrCat(where, ": must be an object"));
    std::string dst, gw;
    FABRIC_RETURN_IF_ERROR(ReadString(r, "dst", absl::StrCat(where, ".dst"), &dst));
    FABRIC_RETURN_IF_ERROR(ReadString(r, "gw", absl::StrCat(where, ".gw"), &gw));
    auto d = ParseCidr(dst);
    if (!d.ok()) {
      return Invalid(absl::StrCat(where, ".dst: ", Excerpt(dst), ": ", d.status().message()));
    }
    announce::Route route;
    route.family = d->family;
    route.dst = d->addr;
    route.dst_len = d->prefix_len;
    if (!gw.empty()) {
      absl::StatusOr<IpAddress> g = ParseIp(gw);
      if (!g.ok() || g->family != d->family) {
        return Invalid(absl::StrCat(where, ".gw: ", Excerpt(gw), " is not an IPv",
                                    d->family == AF_INET ? "4" : "6", " address"));
      }
      route.has_gateway = true;
      route.gateway = g->addr;
    }
    for (PodInterface& pi : *ifaces) {
      bool mine = !route.has_gateway && ifaces->size() == 1;
      for (const announce::Address& a : pi.addresses) {
        announce::Address g = a;
        g.addr = route.gateway;
        mine |= route.has_gateway && announce::SameSubnet(a, g);
      }
      if (mine) {
        pi.routes.push_back(route);
        break;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<PodInterface>> PodInterfaces(const Json& prev,
                                                        std::string_view cni_version) {
  if (!prev.is_object()) return Invalid("prevResult: must be an object");
  std::vector<PodInterface> ifaces;
  std::vector<int> pod_index;  // interfaces[i] -> index in `ifaces`, or -1 for host side
  if (auto it = prev.find("interfaces"); it != prev.end() && !it->is_null()) {
    if (!it->is_array()) return Invalid("prevResult.interfaces: must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& in = (*it)[i];
      const std::string where = absl::StrCat("prevResult.interfaces[", i, "]");
      if (!in.is_object()) return Invalid(absl::StrCat(where, ": must be an object"));
      PodInterface pi;
      FABRIC_RETURN_IF_ERROR(ReadString(in, "name", absl::StrCat(where, ".name"), &pi.name));
      FABRIC_RETURN_IF_ERROR(ReadString(in, "mac", absl::StrCat(where, ".mac"), &pi.mac));
      FABRIC_RETURN_IF_ERROR(
          ReadString(in, "sandbox", absl::StrCat(where, ".sandbox"), &pi.sandbox));
      if (pi.sandbox.empty()) {
        pod_index.push_back(-1);
        continue;
      }
      if (absl::Status s = announce::CheckIfname(pi.name, absl::StrCat(where, ".name")); !s.ok()) {
        return Invalid(Sv(s.message()));
      }
      pod_index.push_back(static_cast<int>(ifaces.size()));
      ifaces.push_back(std::move(pi));
    }
  }
  auto ips = prev.find("ips");
  if (ips == prev.end() || ips->is_null()) {
    FABRIC_RETURN_IF_ERROR(AttributeRoutes(prev, &ifaces));
    return ifaces;
  }
  if (!ips->is_array()) return Invalid("prevResult.ips: must be an array");
  for (size_t i = 0; i < ips->size(); ++i) {
    const Json& ip = (*ips)[i];
    const std::string where = absl::StrCat("prevResult.ips[", i, "]");
    if (!ip.is_object()) return Invalid(absl::StrCat(where, ": must be an object"));
    std::string address, gateway;
    FABRIC_RETURN_IF_ERROR(ReadString(ip, "address", absl::StrCat(where, ".address"), &address));
    auto a = ParseCidr(address);
    if (!a.ok()) {
      return Invalid(
          absl::StrCat(where, ".address: ", Excerpt(address), ": ", a.status().message()));
    }
    FABRIC_RETURN_IF_ERROR(ReadString(ip, "gateway", absl::StrCat(where, ".gateway"), &gateway));
    if (!gateway.empty()) {
      absl::StatusOr<IpAddress> gw = ParseIp(gateway);
      if (!gw.ok() || gw->family != a->family) {
        return Invalid(absl::StrCat(where, ".gateway: ", Excerpt(gateway), " is not an IPv",
                                    a->family == AF_INET ? "4" : "6", " address"));
      }
      a->gateway = gw->addr;
      a->has_gateway = true;
    }
    // 0.4.0 names the family; it must agree with the address.
    if (cni_version == "0.4.0") {
      if (auto v = ip.find("version"); v != ip.end()) {
        const std::string want = a->family == AF_INET ? "4" : "6";
        if (!v->is_string() || v->get<std::string>() != want) {
          return Invalid(
              absl::StrCat(where, ".version: must be \"", want, "\" for ", Excerpt(address)));
        }
      }
    }
    int target = -1;
    if (auto idx = ip.find("interface"); idx != ip.end() && !idx->is_null()) {
      int64_t n = 0;
      FABRIC_RETURN_IF_ERROR(ReadInt(*idx, absl::StrCat(where, ".interface"), 0,
                                     static_cast<int64_t>(pod_index.size()) - 1, &n));
      target = pod_index[static_cast<size_t>(n)];
    } else if (ifaces.size() == 1) {
      target = 0;
    }
    if (target >= 0) ifaces[static_cast<size_t>(target)].addresses.push_back(*a);
  }
  FABRIC_RETURN_IF_ERROR(AttributeRoutes(prev, &ifaces));
  return ifaces;
}

std::string StateFileName(std::string_view container_id, std::string_view ifname) {
  return absl::StrCat(Av(container_id), "-", Av(ifname), ".pid");
}

std::string RoutingFileName(std::string_view container_id, std::string_view ifname) {
  return absl::StrCat(Av(container_id), "-", Av(ifname), ".routes");
}

std::string ResultJson(const Config& config) {
  Json out = config.prev_result ? *config.prev_result : Json::object();
  if (!out.contains("cniVersion")) out["cniVersion"] = config.cni_version;
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string ErrorJson(std::string_view cni_version, const absl::Status& status) {
  Json out = Json::object();
  out["cniVersion"] = Supported(cni_version) ? std::string(cni_version) : kLatestVersion;
  out["code"] = CodeOf(status);
  out["msg"] = std::string(Sv(status.message()));
  if (std::string d = DetailsOf(status); !d.empty()) out["details"] = d;
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string VersionJson() {
  Json out = Json::object();
  out["cniVersion"] = kLatestVersion;
  out["supportedVersions"] = Json::array();
  for (const char* v : kSupportedVersions) out["supportedVersions"].push_back(v);
  return out.dump();
}

}  // namespace fabric::cni
