// A device plugin request's bytes come from whoever connects to the plugin's socket: the parse
// answers or refuses, never crashes, and what it takes has only UTF-8 strings (it serializes
// and parses back whole).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "agent/publish/deviceplugin/request.h"
#include "k8s/deviceplugin/v1beta1/api.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  v1beta1::AllocateRequest a;
  v1beta1::PreferredAllocationRequest p;
  v1beta1::PreStartContainerRequest s;
  for (google::protobuf::Message* m :
       {static_cast<google::protobuf::Message*>(&a), static_cast<google::protobuf::Message*>(&p),
        static_cast<google::protobuf::Message*>(&s)}) {
    if (!fabric::deviceplugin::ParseRequest(bytes, m).ok()) continue;
    std::unique_ptr<google::protobuf::Message> back(m->New());
    if (!back->ParseFromString(m->SerializeAsString())) abort();
  }
  return 0;
}
