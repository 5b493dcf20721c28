#include "agent/publish/podrecord/pod_record.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/common/excerpt.h"
#include "agent/common/json_depth.h"
#include "agent/common/strings.h"
#include "nlohmann/json.hpp"

namespace fabric::podrecord {
namespace {

using Json = nlohmann::ordered_json;

// A record nests object > ports array > port > other_ipv4_gids array > entry.
constexpr int kMaxDepth = 6;

absl::Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("pod record: ", Av(what)));
}

// Strict typed reads: a missing key keeps the default, a wrong type is an error naming the key.
absl::Status Str(const Json& o, const char* key, std::string* out) {
  auto it = o.find(key);
  if (it == o.end()) return absl::OkStatus();
  if (!it->is_string()) return Bad(absl::StrCat("\"", key, "\" is not a string"));
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status Uint(const Json& o, const char* key, uint64_t max, std::optional<uint64_t>* out) {
  auto it = o.find(key);
  if (it == o.end()) return absl::OkStatus();
  if (!it->is_number_unsigned() || it->get<uint64_t>() > max) {
    return Bad(absl::StrCat("\"", key, "\" is not a number from 0 to ", max));
  }
  *out = it->get<uint64_t>();
  return absl::OkStatus();
}

absl::Status Array(const Json& o, const char* key, const Json** out) {
  static const Json kEmpty = Json::array();
  auto it = o.find(key);
  *out = &kEmpty;
  if (it == o.end()) return absl::OkStatus();
  if (!it->is_array()) return Bad(absl::StrCat("\"", key, "\" is not an array"));
  *out = &*it;
  return absl::OkStatus();
}

absl::StatusOr<jobenv::Pick> ParsePort(const Json& j) {
  if (!j.is_object()) return Bad("a port is not an object");
  jobenv::Pick p;
  for (auto [key, out] : {std::pair{"device", &p.device},
                          {"netdev", &p.netdev},
                          {"ipv4", &p.ipv4},
                          {"ipv4_subnet", &p.ipv4_subnet},
                          {"ipv6", &p.ipv6}}) {
    if (absl::Status s = Str(j, key, out); !s.ok()) return s;
  }
  if (p.device.empty()) return Bad("a port names no device");
  std::optional<uint64_t> port, gid;
  if (absl::Status s = Uint(j, "port", 255, &port); !s.ok()) return s;
  if (absl::Status s = Uint(j, "gid_index", 65535, &gid); !s.ok()) return s;
  p.port = static_cast<uint32_t>(port.value_or(1));
  if (gid) p.gid_index = static_cast<uint32_t>(*gid);
  p.roce = true;  // A pod interface is Ethernet: a VF or macvlan of a RoCE port.
  const Json* others = nullptr;
  if (absl::Status s = Array(j, "other_ipv4_gids", &others); !s.ok()) return s;
  for (const Json& o : *others) {
    if (!o.is_object()) return Bad("an entry of \"other_ipv4_gids\" is not an object");
    jobenv::OtherGid g;
    std::optional<uint64_t> index;
    if (absl::Status s = Uint(o, "index", 65535, &index); !s.ok()) return s;
    if (!index) return Bad("an entry of \"other_ipv4_gids\" has no index");
    g.index = static_cast<uint32_t>(*index);
    if (absl::Status s = Str(o, "ipv4", &g.ipv4); !s.ok()) return s;
    if (absl::Status s = Str(o, "what", &g.what); !s.ok()) return s;
    auto v2 = o.find("roce_v2_or_unknown");
    if (v2 != o.end() && !v2->is_boolean()) return Bad("\"roce_v2_or_unknown\" is not a boolean");
    g.roce_v2_or_unknown = v2 != o.end() && v2->get<bool>();
    p.other_ipv4_gids.push_back(std::move(g));
  }
  return p;
}

}  // namespace

std::string FilePrefix(uint64_t netns_inode) { return absl::StrCat(netns_inode, "-"); }

std::string FileName(uint64_t netns_inode, std::string_view container_id, std::string_view ifname) {
  return absl::StrCat(netns_inode, "-", Av(container_id), "-", Av(ifname), ".json");
}

bool IsRecordOf(std::string_view name, std::string_view container_id, std::string_view ifname) {
  const std::optional<uint64_t> inode = InodeOfName(name);
  return inode && name == FileName(*inode, container_id, ifname);
}

std::optional<uint64_t> InodeOfName(std::string_view name) {
  const size_t dash = name.find('-');
  uint64_t inode = 0;
  if (dash == std::string_view::npos || !absl::EndsWith(Av(name), ".json") ||
      !absl::SimpleAtoi(Av(name.substr(0, dash)), &inode)) {
    return std::nullopt;
  }
  return inode;
}

std::string RecordJson(const PodRecord& r) {
  Json j = Json::object();
  j["format"] = kFormat;
  if (!r.pod_uid.empty()) j["pod_uid"] = r.pod_uid;
  j["container_id"] = r.container_id;
  j["ifname"] = r.ifname;
  j["netns"] = r.netns;
  j["netns_inode"] = r.netns_inode;
  j["interfaces"] = Json::array();
  for (const Interface& i : r.interfaces) {
    Json iface = {{"name", i.name}, {"addresses", i.addresses}};
    if (!i.mac.empty()) iface["mac"] = i.mac;
    j["interfaces"].push_back(std::move(iface));
  }
  j["ports"] = Json::array();
  for (const jobenv::Pick& p : r.ports) {
    Json port = {{"device", p.device}, {"port", p.port}, {"netdev", p.netdev}};
    if (p.gid_index) port["gid_index"] = *p.gid_index;
    port["ipv4"] = p.ipv4;
    port["ipv4_subnet"] = p.ipv4_subnet;
    port["ipv6"] = p.ipv6;
    port["other_ipv4_gids"] = Json::array();
    for (const jobenv::OtherGid& g : p.other_ipv4_gids) {
      port["other_ipv4_gids"].push_back({{"index", g.index},
                                         {"ipv4", g.ipv4},
                                         {"roce_v2_or_unknown", g.roce_v2_or_unknown},
                                         {"what", g.what}});
    }
    j["ports"].push_back(std::move(port));
  }
  // Replacement characters for bytes that are not UTF-8 (an odd interface name): a record must
  // always be written, and its reader only compares names.
  return j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

absl::StatusOr<PodRecord> ParseRecord(std::string_view bytes) {
  if (bytes.size() > kMaxBytes) return Bad(absl::StrCat("over ", kMaxBytes, " bytes"));
  if (JsonNestingDepth(bytes) > kMaxDepth) return Bad("nested deeper than a record");
  const Json j = Json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Bad(absl::StrCat("not JSON: \"", Excerpt(bytes, 40), "\""));
  }
  if (!j.is_object()) return Bad("not a JSON object");
  std::optional<uint64_t> format, inode;
  if (absl::Status s = Uint(j, "format", 1u << 20, &format); !s.ok()) return s;
  if (!format) return Bad("no \"format\"");
  if (*format > static_cast<uint64_t>(kFormat)) {
    return Bad(absl::StrCat("format ", *format, " is newer than this reader's ", kFormat));
  }
  PodRecord r;
  for (auto [key, out] : {std::pair{"pod_uid", &r.pod_uid},
                          {"container_id", &r.container_id},
                          {"ifname", &r.ifname},
                          {"netns", &r.netns}}) {
    if (absl::Status s = Str(j, key, out); !s.ok()) return s;
  }
  if (absl::Status s = Uint(j, "netns_inode", UINT64_MAX, &inode); !s.ok()) return s;
  r.netns_inode = inode.value_or(0);
  const Json* ifaces = nullptr;
  if (absl::Status s = Array(j, "interfaces", &ifaces); !s.ok()) return s;
  for (const Json& i : *ifaces) {
    if (!i.is_object()) return Bad("an interface is not an object");
    Interface in;
    if (absl::Status s = Str(i, "name", &in.name); !s.ok()) return s;
    if (in.name.empty()) return Bad("an interface has no name");
    if (absl::Status s = Str(i, "mac", &in.mac); !s.ok()) return s;
    const Json* addrs = nullptr;
    if (absl::Status s = Array(i, "addresses", &addrs); !s.ok()) return s;
    for (const Json& a : *addrs) {
      if (!a.is_string()) return Bad("an address is not a string");
      in.addresses.push_back(a.get<std::string>());
    }
    r.interfaces.push_back(std::move(in));
  }
  const Json* ports = nullptr;
  if (absl::Status s = Array(j, "ports", &ports); !s.ok()) return s;
  for (const Json& p : *ports) {
    absl::StatusOr<jobenv::Pick> pick = ParsePort(p);
    if (!pick.ok()) return pick.status();
    r.ports.push_back(*std::move(pick));
  }
  return r;
}

absl::Status CheckRecord(const PodRecord& r, const OwnInterfaces& own) {
  for (const Interface& i : r.interfaces) {
    auto it = own.find(i.name);
    if (it == own.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("interface ", i.name, " of the record is not in this network namespace"));
    }
    if (i.addresses.empty()) continue;
    bool held = false;
    for (const std::string& a : i.addresses) {
      held = held || it->second.contains(a.substr(0, a.find('/')));
    }
    if (!held) {
      return absl::FailedPreconditionError(absl::StrCat("interface ", i.name,
                                                        " holds none of the record's addresses (",
                                                        absl::StrJoin(i.addresses, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace fabric::podrecord
