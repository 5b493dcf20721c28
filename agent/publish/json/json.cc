// fabricctl's JSON contract (json.h): the proto3 JSON mapping made stable and explicit.
#include "agent/publish/json/json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace fabric {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using Json = nlohmann::ordered_json;

// Integers a JSON reader holds exactly as a double (JavaScript's Number.MAX_SAFE_INTEGER).
constexpr uint64_t kMaxSafe = (uint64_t{1} << 53) - 1;

void Settle(Json& object, const Descriptor& type);

void SettleValue(Json& v, const FieldDescriptor& field) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE:
      // Well-known types (Timestamp, Duration, ...) have JSON forms of their own.
      if (v.is_object() &&
          !absl::StartsWith(field.message_type()->full_name(), "google.protobuf.")) {
        Settle(v, *field.message_type());
      }
      return;
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t n = 0;
      if (v.is_string() && absl::SimpleAtoi(v.get<std::string>(), &n) &&
          (n >= 0 ? static_cast<uint64_t>(n) : 0 - static_cast<uint64_t>(n)) <= kMaxSafe) {
        v = n;
      }
      return;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t n = 0;
      if (v.is_string() && absl::SimpleAtoi(v.get<std::string>(), &n) && n <= kMaxSafe) v = n;
      return;
    }
    default:
      return;
  }
}

// Sorts map fields by key and turns 64-bit numbers that fit 53 bits into numbers, down the tree.
void Settle(Json& object, const Descriptor& type) {
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor& field = *type.field(i);
    auto it = object.find(field.name());
    if (it == object.end()) continue;
    if (field.is_map()) {
      if (!it->is_object()) continue;
      std::vector<std::pair<std::string, Json>> entries;
      for (auto& [key, value] : it->items()) entries.emplace_back(key, std::move(value));
      std::sort(entries.begin(), entries.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      Json sorted = Json::object();
      const FieldDescriptor& value_field = *field.message_type()->map_value();
      for (auto& [key, value] : entries) {
        SettleValue(value, value_field);
        sorted[key] = std::move(value);
      }
      *it = std::move(sorted);
    } else if (field.is_repeated()) {
      if (!it->is_array()) continue;
      for (Json& element : *it) SettleValue(element, field);
    } else {
      SettleValue(*it, field);
    }
  }
}

std::string Print(const google::protobuf::Message& message, int indent) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;     // snake_case, as fabric-probe and metric labels
  options.always_print_primitive_fields = true;  // a zero is printed; unknown (unset) is absent
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) return "{}\n";
  Json j = Json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return out + "\n";
  Settle(j, *message.GetDescriptor());
  return j.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string ToJson(const google::protobuf::Message& message) { return Print(message, 2); }
std::string ToJsonLine(const google::protobuf::Message& message) { return Print(message, -1); }

}  // namespace fabric
