// The release every binary reports (--version, `fabricctl version`, the agent's Ping and its
// build-info metric): the CMake project's VERSION, the one place it is written.
#pragma once

#ifndef FABRIC_VERSION
#error "FABRIC_VERSION comes from CMake (agent/common/CMakeLists.txt)"
#endif

namespace fabric {

inline constexpr char kFabricVersion[] = FABRIC_VERSION;

}  // namespace fabric
