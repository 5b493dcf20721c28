// Cell formatting the fabricctl views share (render.cc, render_host.cc).
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "fabric/v1/host.pb.h"

namespace fabric::render_internal {

inline std::string Or(const std::string& s, const char* dflt = "-") { return s.empty() ? dflt : s; }

inline std::string Numa(const v1::PciFunction& f) {
  return f.has_numa_node() ? absl::StrCat(f.numa_node()) : "-";
}

}  // namespace fabric::render_internal
