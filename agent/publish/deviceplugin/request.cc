#include "agent/publish/deviceplugin/request.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "agent/common/excerpt.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/unknown_field_set.h"

namespace fabric::deviceplugin {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// The kubelet's messages nest three deep; deeper is not one of them (the parse refuses it).
constexpr int kMaxDepth = 8;

// The first string field of `bytes` (a `d`) that is not UTF-8, walked without the schema's
// checks: its path in `where`, its bytes in `value`. False when there is none, or when the bytes
// are not a message at all (the real parse says so).
bool FindNonUtf8(const Descriptor* d, std::string_view bytes, const std::string& prefix, int depth,
                 std::string* where, std::string* value) {
  UnknownFieldSet set;
  if (depth > kMaxDepth || !set.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return false;
  }
  std::map<int, int> seen;  // Field number -> occurrences so far: a repeated field's index.
  for (int i = 0; i < set.field_count(); ++i) {
    const UnknownField& f = set.field(i);
    if (f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    const FieldDescriptor* fd = d->FindFieldByNumber(f.number());
    if (fd == nullptr) continue;
    const int k = seen[f.number()]++;
    const std::string path =
        absl::StrCat(prefix, ".", fd->name(), fd->is_repeated() ? absl::StrCat("[", k, "]") : "");
    const std::string& data = f.length_delimited();
    if (fd->type() == FieldDescriptor::TYPE_STRING) {
      if (!google::protobuf::internal::IsStructurallyValidUTF8(data.data(),
                                                               static_cast<int>(data.size()))) {
        *where = path;
        *value = data;
        return true;
      }
    } else if (fd->type() == FieldDescriptor::TYPE_MESSAGE &&
               FindNonUtf8(fd->message_type(), data, path, depth + 1, where, value)) {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::Status ParseRequest(std::string_view bytes, google::protobuf::Message* out) {
  const Descriptor* d = out->GetDescriptor();
  std::string where;
  std::string value;
  if (FindNonUtf8(d, bytes, d->name(), 0, &where, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(where, " is not UTF-8: ", Excerpt(value)));
  }
  if (!out->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a ", d->full_name(), " (", bytes.size(), " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace fabric::deviceplugin
