// Debian 12's abseil is built with its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW=0),
// which does not convert to or from std::string_view. Our APIs take std::string_view; these
// convert at the boundary to absl.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace fabric {

inline absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view Sv(absl::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace fabric
