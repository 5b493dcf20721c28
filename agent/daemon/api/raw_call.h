// Requests and answers of the API as bytes. The service decodes each request itself: gRPC's own
// decoding answers a request that does not parse with INTERNAL and an empty message (and a raw
// Ping with UNIMPLEMENTED), where the caller's mistake is INVALID_ARGUMENT naming the message.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fabric {

template <typename Message>
absl::Status DecodeRequest(const grpc::ByteBuffer& in, Message* out) {
  grpc::ByteBuffer copy(in);  // Shares the slices; the reader wants a mutable buffer.
  grpc::ProtoBufferReader reader(&copy);
  if (!out->ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError(absl::StrCat("the request is not a valid ",
                                                   out->GetTypeName(), " (", in.Length(),
                                                   " bytes that do not parse)"));
  }
  return absl::OkStatus();
}

template <typename Message>
grpc::Status EncodeResponse(const Message& message, grpc::ByteBuffer* out) {
  bool own = false;
  return grpc::SerializationTraits<Message>::Serialize(message, out, &own);
}

// Bytes already serialized (a cached SelectNics answer, a watch event shared by many streams).
inline grpc::ByteBuffer BytesToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

// The same without a copy: the slice holds a reference to the bytes until gRPC has sent them (a
// watch event carries the whole inventory, hundreds of kilobytes on a big host).
inline grpc::ByteBuffer BytesToBuffer(std::shared_ptr<const std::string> bytes) {
  using Ref = std::shared_ptr<const std::string>;
  auto* ref = new Ref(std::move(bytes));
  grpc::Slice slice(
      const_cast<char*>((*ref)->data()), (*ref)->size(),
      [](void* p) { delete static_cast<Ref*>(p); }, ref);
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace fabric
