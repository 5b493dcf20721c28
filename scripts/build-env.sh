# Sourced by scripts/test.sh and scripts/quickstart.sh: how both configure their build trees.
#  - ccache (when present) as the compiler launcher. The sloppiness lets it cache files compiled
#    behind a precompiled header (clang's, built without timestamps: cmake/FabricHelpers.cmake);
#    depend mode takes the compiler's own dependency list (-MD) instead of a second
#    preprocessing pass on every miss (a second per file of a cold build).
#  - Ninja: a leaner scheduler than make, and .ninja_log gives each file's compile time.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  export CCACHE_DEPEND=1
fi
generator=(-G Ninja)

# A build tree configured with another generator (make, before the switch) is configured anew.
fresh_tree() {  # dir
  if [[ -f $1/CMakeCache.txt ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$1/CMakeCache.txt"; then
    rm -rf "$1"
  fi
}
