#include "agent/publish/dra/claim.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "agent/common/ip.h"
#include "agent/common/json_depth.h"
#include "agent/common/strings.h"
#include "agent/policy/select/env.h"
#include "agent/publish/cdi/cdi_spec.h"
#include "agent/publish/dra/json_at.h"

namespace fabric::dra {
namespace {

using nlohmann::json;

constexpr int kMaxClaimDepth = 64;

// The claim's JSON object: bounded in size and depth before nlohmann sees it.
absl::StatusOr<json> ClaimJson(std::string_view body) {
  if (body.size() > kMaxClaimBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResourceClaim of ", body.size(), " bytes, more than ", kMaxClaimBytes));
  }
  if (JsonNestingDepth(body) > kMaxClaimDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResourceClaim nests deeper than ", kMaxClaimDepth));
  }
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResourceClaim is not a JSON object: ", Excerpt(body)));
  }
  return doc;
}

// "10.50.0.11/24" -> the same in inet_ntop's form; nullopt for anything else.
std::optional<std::string> InterfaceAddress(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  absl::StatusOr<IpAddress> ip = ParseIp(text.substr(0, slash));
  int prefix = -1;
  if (!ip.ok() || !absl::SimpleAtoi(Av(text.substr(slash + 1)), &prefix) || prefix < 0 ||
      prefix > (ip->family == AF_INET ? 32 : 128)) {
    return std::nullopt;
  }
  return absl::StrCat(IpToString(ip->family, ip->addr), "/", prefix);
}

// The API's bounds on networkData's strings (k8s.io/api resource/v1).
constexpr size_t kMaxInterfaceName = 256;
constexpr size_t kMaxHardwareAddress = 128;

}  // namespace

absl::StatusOr<ParsedClaim> ParseClaim(std::string_view body) {
  absl::StatusOr<json> parsed = ClaimJson(body);
  if (!parsed.ok()) return parsed.status();
  const json& doc = *parsed;
  ParsedClaim c;
  c.uid = JsonString(doc, {"metadata", "uid"});
  c.namespace_ = JsonString(doc, {"metadata", "namespace"});
  c.name = JsonString(doc, {"metadata", "name"});
  c.resource_version = JsonString(doc, {"metadata", "resourceVersion"});
  if (c.uid.empty()) return absl::InvalidArgumentError("ResourceClaim without metadata.uid");
  const json* allocation = JsonAt(doc, {"status", "allocation"});
  c.allocated = allocation != nullptr && allocation->is_object();
  const json* results = c.allocated ? JsonAt(*allocation, {"devices", "results"}) : nullptr;
  if (results != nullptr && !results->is_null()) {
    if (!results->is_array()) {
      return absl::InvalidArgumentError("ResourceClaim: allocation results are not a list");
    }
    for (const json& r : *results) {
      if (!r.is_object()) {
        return absl::InvalidArgumentError("ResourceClaim: an allocation result is not an object");
      }
      if (JsonString(r, {"driver"}) != kDriver) continue;
      c.results.push_back(
          {JsonString(r, {"request"}), JsonString(r, {"pool"}), JsonString(r, {"device"})});
    }
  }
  const json* reserved = JsonAt(doc, {"status", "reservedFor"});
  if (reserved != nullptr && reserved->is_array()) {
    for (const json& ref : *reserved) {
      if (JsonString(ref, {"resource"}) != "pods" || !JsonString(ref, {"apiGroup"}).empty())
        continue;
      if (std::string uid = JsonString(ref, {"uid"}); !uid.empty())
        c.pods.push_back(std::move(uid));
    }
  }
  return c;
}

std::string ClaimApiPath(std::string_view namespace_, std::string_view name) {
  return absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", Av(namespace_), "/resourceclaims/",
                      Av(name));
}

std::string ClaimCdiDevice(std::string_view uid) { return absl::StrCat("claim-", Av(uid)); }

std::string ClaimSpecFile(std::string_view uid) {
  return absl::StrCat(cdi::kVendor, "-", cdi::kClass, "-", ClaimCdiDevice(uid), ".json");
}

absl::StatusOr<Prepared> PrepareClaim(const ParsedClaim& claim, std::string_view node,
                                      const std::vector<Device>& published, const v1::Host& host,
                                      const v1::SelectionPolicy& policy) {
  const std::string claim_ref = absl::StrCat(claim.namespace_, "/", claim.name);
  if (!claim.allocated) {
    return absl::FailedPreconditionError(
        absl::StrCat("ResourceClaim ", claim_ref, " is not allocated"));
  }
  if (!cdi::ValidDeviceName(ClaimCdiDevice(claim.uid))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ResourceClaim ", claim_ref, ": UID ", Excerpt(claim.uid), " cannot name a CDI device"));
  }
  std::map<std::string, const Device*> by_name;
  for (const Device& d : published) by_name[d.name] = &d;
  std::map<std::string, const v1::RdmaDevice*> nics;
  for (const v1::RdmaDevice& d : host.rdma_devices()) nics[d.name()] = &d;

  Prepared out;
  std::vector<std::string> ports;
  cdi::Device spec_device{ClaimCdiDevice(claim.uid), {}, {}};
  for (const ClaimResult& r : claim.results) {
    if (r.pool != node) {
      return absl::FailedPreconditionError(
          absl::StrCat("ResourceClaim ", claim_ref, ": device ", Excerpt(r.device), " of pool ",
                       Excerpt(r.pool), " is another node's (this is ", Av(node), ")"));
    }
    auto it = by_name.find(r.device);
    if (it == by_name.end()) {
      return absl::FailedPreconditionError(absl::StrCat("ResourceClaim ", claim_ref, ": device ",
                                                        Excerpt(r.device),
                                                        " is not one this node published"));
    }
    const Device& d = *it->second;
    auto nic = nics.find(d.rdma_device);
    if (nic == nics.end() || nic->second->uverbs_device().empty() ||
        !cdi::ValidDeviceName(d.rdma_device)) {
      return absl::FailedPreconditionError(
          absl::StrCat("ResourceClaim ", claim_ref, ": device ", r.device, " (", d.rdma_device,
                       ") is gone from this node, or has no uverbs node or CDI device"));
    }
    PreparedDevice& p = out.devices.emplace_back();
    p.request = r.request;
    p.pool = r.pool;
    p.device = r.device;
    p.rdma_device = d.rdma_device;
    p.port = d.port;
    p.cdi_ids.push_back(absl::StrCat(cdi::kKind, "=", d.rdma_device));
    ports.push_back(absl::StrCat(d.rdma_device, ":", d.port));
  }
  if (out.devices.empty()) return out;
  // The NICs' own CDI devices bring their nodes; the claim's brings the job environment of exactly
  // these ports, as the device plugin's Allocate renders it; a claim whose ports have no usable GID
  // gets no variables.
  if (absl::StatusOr<jobenv::Result> env = RenderPortsEnv(host, ports, policy); env.ok()) {
    spec_device.env = env->job;
  }
  out.spec_json = cdi::SpecJson({spec_device});
  out.spec_file = ClaimSpecFile(claim.uid);
  out.devices.front().cdi_ids.push_back(absl::StrCat(cdi::kKind, "=", ClaimCdiDevice(claim.uid)));
  return out;
}

std::vector<DeviceNetwork> NetworkOf(const ParsedClaim& claim,
                                     const std::vector<PreparedDevice>& devices,
                                     const std::vector<podrecord::PodRecord>& records) {
  std::vector<DeviceNetwork> out;
  for (const PreparedDevice& d : devices) {
    const podrecord::Interface* found = nullptr;
    for (const podrecord::PodRecord& r : records) {
      if (r.pod_uid.empty() ||
          std::find(claim.pods.begin(), claim.pods.end(), r.pod_uid) == claim.pods.end()) {
        continue;
      }
      for (const jobenv::Pick& p : r.ports) {
        if (p.device != d.rdma_device || p.port != d.port) continue;
        for (const podrecord::Interface& i : r.interfaces) {
          if (i.name == p.netdev) found = &i;
        }
        if (found != nullptr) break;
      }
      if (found != nullptr) break;
    }
    if (found == nullptr || found->name.size() > kMaxInterfaceName) continue;
    DeviceNetwork& n = out.emplace_back();
    n.pool = d.pool;
    n.device = d.device;
    n.data.interface_name = found->name;
    for (const std::string& a : found->addresses) {
      std::optional<std::string> cidr = InterfaceAddress(a);
      if (!cidr || n.data.ips.size() == kMaxNetworkIps ||
          std::find(n.data.ips.begin(), n.data.ips.end(), *cidr) != n.data.ips.end()) {
        continue;
      }
      n.data.ips.push_back(*std::move(cidr));
    }
    if (found->mac.size() <= kMaxHardwareAddress) n.data.hardware_address = found->mac;
  }
  return out;
}

absl::StatusOr<std::optional<std::string>> ClaimStatusUpdate(
    std::string_view body, const std::vector<DeviceNetwork>& net) {
  absl::StatusOr<json> parsed = ClaimJson(body);
  if (!parsed.ok()) return parsed.status();
  json& doc = *parsed;
  if (JsonString(doc, {"metadata", "uid"}).empty()) {
    return absl::InvalidArgumentError("ResourceClaim without metadata.uid");
  }
  json& status = doc["status"];
  if (!status.is_object())
    return absl::InvalidArgumentError("ResourceClaim: status is not an object");
  json& entries = status["devices"];
  if (entries.is_null()) entries = json::array();
  if (!entries.is_array()) {
    return absl::InvalidArgumentError("ResourceClaim: status.devices is not a list");
  }
  const json before = entries;
  for (const DeviceNetwork& n : net) {
    json data = {{"interfaceName", n.data.interface_name}};
    if (!n.data.ips.empty()) data["ips"] = n.data.ips;
    if (!n.data.hardware_address.empty()) data["hardwareAddress"] = n.data.hardware_address;
    json* entry = nullptr;
    for (json& e : entries) {
      if (e.is_object() && JsonString(e, {"driver"}) == kDriver &&
          JsonString(e, {"pool"}) == n.pool && JsonString(e, {"device"}) == n.device) {
        entry = &e;
        break;
      }
    }
    if (entry == nullptr) {
      entry =
          &entries.emplace_back(json{{"driver", kDriver}, {"pool", n.pool}, {"device", n.device}});
    }
    (*entry)["networkData"] = std::move(data);
  }
  if (entries == before) return std::nullopt;
  return doc.dump();
}

}  // namespace fabric::dra
