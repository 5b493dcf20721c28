// fabricctl's JSON contract, on its own so that the static fabric-env prints the same JSON.
#pragma once

#include <google/protobuf/message.h>

#include <string>

namespace fabric {

// fabricctl's JSON contract: the proto3 JSON mapping with the .proto's own field names
// (snake_case, as fabric-probe's JSON and the metrics' labels), every scalar field printed (a
// zero is 0; a value the host did not give, an unset `optional` field, is absent), map keys
// sorted (the same state prints the same bytes), and 64-bit integers as numbers when they fit
// 53 bits (as strings, per proto3, only beyond). Indented, with a trailing newline.
std::string ToJson(const google::protobuf::Message& message);
// The same on one line (JSON Lines, for streams).
std::string ToJsonLine(const google::protobuf::Message& message);

}  // namespace fabric
