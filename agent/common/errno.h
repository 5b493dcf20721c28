// errno as text for messages: the one home of the project's strerror calls.
#pragma once

#include <cstring>
#include <string>

namespace fabric {

inline std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace fabric
