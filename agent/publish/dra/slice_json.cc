#include "agent/publish/dra/slice_json.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "agent/common/json_depth.h"
#include "agent/common/strings.h"
#include "agent/publish/dra/json_at.h"

namespace fabric::dra {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 32;

json AttributeJson(const AttributeValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return {{"int", *i}};
  if (const auto* b = std::get_if<bool>(&v)) return {{"bool", *b}};
  return {{"string", std::get<std::string>(v)}};
}

json DeviceJson(const Device& d, bool with_time) {
  json out = {{"name", d.name}};
  json attrs = json::object();
  for (const auto& [name, value] : d.attributes) attrs[name] = AttributeJson(value);
  if (!attrs.empty()) out["attributes"] = std::move(attrs);
  if (!d.taints.empty()) {
    json taints = json::array();
    for (const Taint& t : d.taints) {
      json j = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) j["value"] = t.value;
      if (with_time && !t.time_added.empty()) j["timeAdded"] = t.time_added;
      taints.push_back(std::move(j));
    }
    out["taints"] = std::move(taints);
  }
  return out;
}

// The listed devices as DevicesKey renders ours: every field but the taints' timeAdded.
std::string ListedDevicesKey(const json& spec) {
  auto it = spec.find("devices");
  if (it == spec.end() || !it->is_array()) return json::array().dump();
  json devices = *it;
  for (json& d : devices) {
    if (!d.is_object()) continue;
    auto taints = d.find("taints");
    if (taints == d.end() || !taints->is_array()) continue;
    for (json& t : *taints) {
      if (t.is_object()) t.erase("timeAdded");
    }
  }
  return devices.dump();
}

}  // namespace

std::string SliceName(std::string_view node, size_t index) {
  const std::string suffix = absl::StrCat("-", kDriver, "-", index);
  return absl::StrCat(Av(node.substr(0, 253 - suffix.size())), suffix);
}

std::string SliceJson(const SliceMeta& meta, const std::vector<Device>& devices) {
  json metadata = {{"name", SliceName(meta.node, meta.index)}};
  if (!meta.resource_version.empty()) metadata["resourceVersion"] = meta.resource_version;
  if (!meta.node_uid.empty()) {
    metadata["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                {"kind", "Node"},
                                                {"name", meta.node},
                                                {"uid", meta.node_uid},
                                                {"controller", true}}});
  }
  json list = json::array();
  for (const Device& d : devices) list.push_back(DeviceJson(d, true));
  json spec = {{"driver", kDriver},
               {"nodeName", meta.node},
               {"pool",
                {{"name", meta.node},
                 {"generation", meta.generation},
                 {"resourceSliceCount", meta.slice_count}}},
               {"devices", std::move(list)}};
  return json{{"apiVersion", kApiVersion},
              {"kind", "ResourceSlice"},
              {"metadata", std::move(metadata)},
              {"spec", std::move(spec)}}
      .dump();
}

std::string DevicesKey(const std::vector<Device>& devices) {
  json list = json::array();
  for (const Device& d : devices) list.push_back(DeviceJson(d, false));
  return list.dump();
}

absl::StatusOr<std::vector<ListedSlice>> ParseSliceList(std::string_view body) {
  if (body.size() > kMaxListBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResourceSlice list of ", body.size(), " bytes, more than ", kMaxListBytes));
  }
  if (JsonNestingDepth(body) > kMaxDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResourceSlice list nests deeper than ", kMaxDepth));
  }
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResourceSlice list is not a JSON object: ", Excerpt(body)));
  }
  auto items = doc.find("items");
  if (items == doc.end() || items->is_null()) return std::vector<ListedSlice>{};
  if (!items->is_array())
    return absl::InvalidArgumentError("ResourceSlice list: items not an array");
  std::vector<ListedSlice> out;
  for (const json& item : *items) {
    if (!item.is_object())
      return absl::InvalidArgumentError("ResourceSlice list: an item not an object");
    ListedSlice s;
    auto meta = item.find("metadata");
    if (meta != item.end() && meta->is_object()) {
      s.name = JsonString(*meta, {"name"});
      s.resource_version = JsonString(*meta, {"resourceVersion"});
    }
    if (s.name.empty())
      return absl::InvalidArgumentError("ResourceSlice list: an item without a name");
    auto spec = item.find("spec");
    if (spec != item.end() && spec->is_object()) {
      s.node = JsonString(*spec, {"nodeName"});
      s.driver = JsonString(*spec, {"driver"});
      auto pool = spec->find("pool");
      if (pool != spec->end() && pool->is_object()) {
        s.pool = JsonString(*pool, {"name"});
        s.generation = JsonInt(*pool, {"generation"});
        s.slice_count = JsonInt(*pool, {"resourceSliceCount"});
      }
      s.devices_key = ListedDevicesKey(*spec);
    } else {
      s.devices_key = json::array().dump();
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace fabric::dra
