// A device plugin request's bytes, parsed by the agent rather than by gRPC: a string field that
// is not UTF-8 made gRPC's own parse fail with INTERNAL, an empty message and a protobuf error
// line per request. Here it is InvalidArgument naming the field, its bytes escaped, and nothing is
// logged.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace fabric::deviceplugin {

// Parses `bytes` into `out` (of any message type). InvalidArgument: a string field that is not
// UTF-8 ("AllocateRequest.container_requests[0].devices_ids[1] is not UTF-8: \"mlx5_\\xff\""),
// or bytes that are not such a message.
absl::Status ParseRequest(std::string_view bytes, google::protobuf::Message* out);

}  // namespace fabric::deviceplugin
