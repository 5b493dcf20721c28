// The one source of the precompiled-header targets (cmake/FabricHelpers.cmake): CMake compiles
// the header beside a target's sources, so each needs one.
