#include "agent/publish/dra/claim.h"

#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "agent/common/json_depth.h"
#include "agent/common/strings.h"
#include "agent/policy/select/env.h"
#include "agent/publish/cdi/cdi_spec.h"

namespace fabric::dra {
namespace {

using nlohmann::json;

constexpr int kMaxClaimDepth = 64;

const json* At(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

std::string StringAt(const json& j, std::initializer_list<const char*> path) {
  const json* at = At(j, path);
  return at != nullptr && at->is_string() ? at->get<std::string>() : "";
}

}  // namespace

absl::StatusOr<ParsedClaim> ParseClaim(std::string_view body) {
  if (body.size() > kMaxClaimBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResourceClaim of ", body.size(), " bytes, more than ", kMaxClaimBytes));
  }
  if (JsonNestingDepth(body) > kMaxClaimDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResourceClaim nests deeper than ", kMaxClaimDepth));
  }
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResourceClaim is not a JSON object: ", Excerpt(body)));
  }
  ParsedClaim c;
  c.uid = StringAt(doc, {"metadata", "uid"});
  c.namespace_ = StringAt(doc, {"metadata", "namespace"});
  c.name = StringAt(doc, {"metadata", "name"});
  c.resource_version = StringAt(doc, {"metadata", "resourceVersion"});
  if (c.uid.empty()) return absl::InvalidArgumentError("ResourceClaim without metadata.uid");
  const json* allocation = At(doc, {"status", "allocation"});
  c.allocated = allocation != nullptr && allocation->is_object();
  const json* results = c.allocated ? At(*allocation, {"devices", "results"}) : nullptr;
  if (results != nullptr && !results->is_null()) {
    if (!results->is_array()) {
      return absl::InvalidArgumentError("ResourceClaim: allocation results are not a list");
    }
    for (const json& r : *results) {
      if (!r.is_object()) {
        return absl::InvalidArgumentError("ResourceClaim: an allocation result is not an object");
      }
      if (StringAt(r, {"driver"}) != kDriver) continue;
      c.results.push_back(
          {StringAt(r, {"request"}), StringAt(r, {"pool"}), StringAt(r, {"device"})});
    }
  }
  return c;
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

}  // namespace fabric::dra
