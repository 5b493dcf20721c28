// Where the project's binaries are in the build tree, for the tests and benchmarks that run them.
// FABRIC_BINARY_DIR is defined for every test target (fabric_test) and for the benchmarks.
#pragma once

#ifndef FABRIC_BINARY_DIR
#error "FABRIC_BINARY_DIR is not defined: tests/testing/binaries.h is for test targets"
#endif

namespace fabric::testing {

inline constexpr const char* kAgentBinary = FABRIC_BINARY_DIR "/agent/daemon/fabric-agent";
inline constexpr const char* kFabricctlBinary = FABRIC_BINARY_DIR "/agent/fabricctl/fabricctl";
inline constexpr const char* kFabricEnvBinary = FABRIC_BINARY_DIR "/agent/fabricenv/fabric-env";
inline constexpr const char* kProbeBinary =
    FABRIC_BINARY_DIR "/agent/fabric/probe_cli/fabric-probe";
inline constexpr const char* kCniPluginDir = FABRIC_BINARY_DIR "/cni-hook";
inline constexpr const char* kCniBinary = FABRIC_BINARY_DIR "/cni-hook/fabric-cni";
inline constexpr const char* kMkhostBinary = FABRIC_BINARY_DIR "/tests/hosts/fabric-mkhost";

}  // namespace fabric::testing
