# lld links the ~80 test and tool executables about 3x faster than ld.bfd (4.8 s -> 1.3 s for
# fabric-agent under ASan), which is minutes of every CI build; ld.bfd stays where lld is missing.
include(CheckLinkerFlag)
check_linker_flag(CXX -fuse-ld=lld FABRIC_HAVE_LLD)
if(FABRIC_HAVE_LLD)
  add_link_options(-fuse-ld=lld)
endif()

# Warnings and sanitizers for the project's own code (generated code gets none: see proto/).
set(FABRIC_WARNINGS -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wformat=2)
if(FABRIC_WERROR)
  list(APPEND FABRIC_WARNINGS -Werror)
endif()

if(FABRIC_FUZZ)
  # Coverage instrumentation for every library the fuzzers reach.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# Line coverage of the -Werror build (scripts/test.sh prints gcovr's figure for the product code).
if(FABRIC_COVERAGE)
  add_compile_options(--coverage)
  add_link_options(--coverage)
endif()

if(FABRIC_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# fabric_library(NAME SRCS ... DEPS ...)
function(fabric_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${FABRIC_WARNINGS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# fabric_binary(NAME SRCS ... DEPS ...)
function(fabric_binary name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${FABRIC_WARNINGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
endfunction()

# fabric_test(NAME SRCS ... DEPS ... [SYSTEM] [LABELS ...]): a GoogleTest binary, each case its own
# ctest entry. Tests are labelled "unit" and built by the fabric_unit_tests target (CI's fast
# stage) unless they are SYSTEM tests (they start the real binaries, need root, network
# namespaces or a container runtime: label "system") or name LABELS of their own.
function(fabric_test name)
  if(NOT FABRIC_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "SYSTEM" "" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${FABRIC_WARNINGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    FABRIC_SOURCE_DIR="${PROJECT_SOURCE_DIR}" FABRIC_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(labels ${ARG_LABELS})
  if(NOT labels)
    if(ARG_SYSTEM)
      set(labels system)
    else()
      set(labels unit)
      fabric_add_to_unit_tests(${name})
    endif()
  endif()
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${labels}")
endfunction()

# The targets of CI's fast stage: unit tests and corpus replays.
function(fabric_add_to_unit_tests target)
  if(NOT TARGET fabric_unit_tests)
    add_custom_target(fabric_unit_tests)
  endif()
  add_dependencies(fabric_unit_tests ${target})
endfunction()

# fabric_fuzz(NAME SRC DEPS ... CORPUS dir): a libFuzzer target. With FABRIC_FUZZ (clang) it is a
# real fuzzer; otherwise it links a small driver that replays the corpus, so every build runs the
# seeds and the regressions as a test.
function(fabric_fuzz name)
  cmake_parse_arguments(ARG "" "CORPUS" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${FABRIC_WARNINGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  if(FABRIC_FUZZ)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    if(NOT TARGET fabric_fuzzers)
      add_custom_target(fabric_fuzzers)
      file(WRITE ${PROJECT_BINARY_DIR}/fuzzers.txt "")
    endif()
    add_dependencies(fabric_fuzzers ${name})
    file(RELATIVE_PATH rel ${PROJECT_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/${name})
    file(APPEND ${PROJECT_BINARY_DIR}/fuzzers.txt "${rel} ${ARG_CORPUS}\n")
  else()
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.cc)
  endif()
  if(FABRIC_TESTS AND ARG_CORPUS)
    add_test(NAME ${name}.corpus COMMAND ${name} ${ARG_CORPUS})
    set_tests_properties(${name}.corpus PROPERTIES LABELS fuzz)
    fabric_add_to_unit_tests(${name})
  endif()
endfunction()

# fabric_cli_docs(BINARY SECTION [ARGS ...] [UNSET VAR ...]): BINARY's bash and zsh completion
# scripts and its man page (section SECTION), written at build time by the binary itself from its
# command line (agent/common/cli_docs.h) and installed where Debian's packages put them. The
# binary prints each with `BINARY --generate=KIND`, or `BINARY ARGS KIND` when ARGS are given;
# the UNSET variables (ones that change its defaults) are removed from its environment first.
function(fabric_cli_docs binary section)
  cmake_parse_arguments(ARG "" "" "UNSET" ${ARGN})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/generated)
  set(bash ${out}/${binary})
  set(zsh ${out}/_${binary})
  set(man ${out}/${binary}.${section})
  set(run ${CMAKE_COMMAND} -E env)
  foreach(var ${ARG_UNSET})
    list(APPEND run --unset=${var})
  endforeach()
  list(APPEND run $<TARGET_FILE:${binary}>)
  set(commands)
  foreach(kind bash zsh man)
    if(ARG_UNPARSED_ARGUMENTS)
      set(asks ${ARG_UNPARSED_ARGUMENTS} ${kind})
    else()
      set(asks --generate=${kind})
    endif()
    list(APPEND commands COMMAND ${run} ${asks} > ${${kind}})
  endforeach()
  add_custom_command(OUTPUT ${bash} ${zsh} ${man}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
    ${commands}
    DEPENDS ${binary}
    COMMENT "${binary}: completion scripts and man page")
  add_custom_target(${binary}_docs ALL DEPENDS ${bash} ${zsh} ${man})
  install(FILES ${bash} DESTINATION share/bash-completion/completions)
  install(FILES ${zsh} DESTINATION share/zsh/vendor-completions)
  install(FILES ${man} DESTINATION share/man/man${section})
endfunction()
