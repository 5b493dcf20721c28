// libFuzzer target for the frame parsers: received frames are anyone's bytes on the segment.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/fabric/announce/frames.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);
  (void)fabric::announce::ParseArp(frame);
  (void)fabric::announce::ParseNd(frame);
  (void)fabric::announce::ParseNeighborAdvert(frame);
  return 0;
}
