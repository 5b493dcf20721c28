// An Ethernet address, the one type the frames (frames.h) and the announcements (announce.h)
// share: apart so that the pure frames do not include the runner.
#pragma once

#include <array>
#include <cstdint>

namespace fabric::announce {

using Mac = std::array<uint8_t, 6>;

}  // namespace fabric::announce
