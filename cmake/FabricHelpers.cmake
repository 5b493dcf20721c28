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
  # ASan+UBSan everywhere; libFuzzer's coverage instrumentation (what -fsanitize=fuzzer-no-link
  # adds) only on the fuzz targets and the libraries they name (fabric_fuzz): the same build also
  # runs the tests and the VM's probe loops, which need not pay a callback per comparison.
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  set(FABRIC_FUZZ_COVERAGE
    -fsanitize-coverage=inline-8bit-counters,indirect-calls,trace-cmp,pc-table,stack-depth)
endif()

# Line coverage of the -Werror build (scripts/test.sh prints gcovr's figure for the product code).
if(FABRIC_COVERAGE)
  # --coverage's two flags spelled out: the driver appends --coverage's after every other flag,
  # so the tests' -fno-* (below) could not turn it off.
  add_compile_options(-fprofile-arcs -ftest-coverage)
  add_link_options(--coverage)
endif()

if(FABRIC_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# The generated code (protoc's and gRPC's, proto/) without sanitizers and coverage notes: it is
# glue to libprotobuf and gRPC, which are not instrumented either, and our code's use of the
# messages still is (their accessors are inline, compiled into our files; their memory comes from
# ASan's malloc). ASan cost it 2.7 times its compile time (agent.pb.cc: 12.5 s -> 4.7 s), a minute
# of two cores in CI's ASan build; gcovr leaves it out of the figure anyway.
set(FABRIC_GENERATED_FLAGS)
if(FABRIC_SANITIZE OR FABRIC_FUZZ)
  list(APPEND FABRIC_GENERATED_FLAGS -fno-sanitize=all)
endif()
if(FABRIC_COVERAGE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND FABRIC_GENERATED_FLAGS -fno-profile-arcs -fno-test-coverage)
endif()

# Precompiled headers: two headers, built once each and reused by every target (REUSE_FROM):
# cmake/pch/product.h for the product code, cmake/pch/test.h (with GoogleTest) for tests. All
# targets share the same flags (the project-wide options), which the compiler checks when it
# loads the header. clang: both (a gRPC-heavy file 6.4 s -> 4.1 s at -O1). GCC: the tests' only,
# and off unless asked (CI's -Werror build asks): a test file at -O0 is mostly parsing (14 s ->
# 9 s), but the product's unity files gained a tenth, and GCC's 300 MB header differs on every
# build, so ccache can never hit behind it.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  option(FABRIC_PCH "Precompiled headers for the heavy library headers" ON)
  set(FABRIC_PCH_KINDS product test)
else()
  option(FABRIC_PCH "Precompiled headers for the heavy library headers" OFF)
  set(FABRIC_PCH_KINDS test)
endif()

# The tests' own files at -O0 and, in the coverage build, without coverage notes: what they
# test (the libraries) keeps the build's level, the figure counts product code only, and a test
# file compiles in a third less time with GCC and half with clang's ASan (select_test.cc: GCC
# 8.7 s -> 6.0 s, clang ASan 11.1 s -> 5.3 s), a fifth of a cold CI run. Last on the command
# line, so -O0 wins over the build type's level.
set(FABRIC_TEST_FLAGS -O0)
if(FABRIC_COVERAGE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND FABRIC_TEST_FLAGS -fno-profile-arcs -fno-test-coverage)
endif()

# Every file with -pthread (most get it from Threads::Threads anyway): clang refuses a
# precompiled header whose thread setting differs from the file's.
add_compile_options(-pthread)

# fabric_precompiled_headers(): the two header targets; after proto/ (the generated headers).
function(fabric_precompiled_headers)
  if(NOT FABRIC_PCH)
    return()
  endif()
  set(kinds ${FABRIC_PCH_KINDS})
  if(NOT FABRIC_TESTS)
    list(REMOVE_ITEM kinds test)
  endif()
  foreach(kind ${kinds})
    add_library(fabric_pch_${kind} OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch/anchor.cc)
    target_compile_options(fabric_pch_${kind} PRIVATE ${FABRIC_WARNINGS})
    if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
      # No timestamps of the headers in the .pch: ccache hashes the file, so it stays the same.
      target_compile_options(fabric_pch_${kind} PRIVATE -Xclang -fno-pch-timestamp)
    endif()
    target_include_directories(fabric_pch_${kind} PRIVATE ${PROJECT_SOURCE_DIR})
    # Include paths only: a definition here would have to be on every user's command line too.
    target_link_libraries(fabric_pch_${kind} PRIVATE fabric_grpc)
    if(kind STREQUAL "test")
      target_link_libraries(fabric_pch_${kind} PRIVATE GTest::gmock)
      # clang refuses a header built at another optimisation level (__OPTIMIZE__).
      target_compile_options(fabric_pch_${kind} PRIVATE ${FABRIC_TEST_FLAGS})
    endif()
    # Named relative to the source root, so the generated wrapper is the same in every clone.
    target_precompile_headers(fabric_pch_${kind} PRIVATE "\"cmake/pch/${kind}.h\"")
  endforeach()
endfunction()

# fabric_use_pch(TARGET KIND): TARGET's files start from the KIND header (product or test).
function(fabric_use_pch target kind)
  if(FABRIC_PCH AND kind IN_LIST FABRIC_PCH_KINDS)
    target_precompile_headers(${target} REUSE_FROM fabric_pch_${kind})
    # The generated headers' path too: whatever reads the file without the .pch (ccache's
    # preprocessor, clang-tidy) must find what the header includes. (Not the source root as a
    # system path: that would silence our own headers' warnings.)
    target_include_directories(${target} SYSTEM PRIVATE
      $<TARGET_PROPERTY:fabric_proto,INTERFACE_INCLUDE_DIRECTORIES>)
  endif()
endfunction()

# Unity builds of the product libraries and binaries: a library's files compiled as one, so
# their common headers are parsed and their shared templates instantiated once (GCC has no
# usable precompiled header: above). Off by default: the generated file names the sources by
# absolute path, so ccache hits only in the same checkout; scripts/test.sh turns it on for both
# CI builds, which miss in a fresh clone anyway (coverage notes and the .pch name absolute
# paths). Files that share a name in an anonymous namespace cannot be merged: keep such
# helpers' names distinct, or better in one home.
option(FABRIC_UNITY "Compile each product library's and binary's sources as one file" OFF)
function(fabric_unity target)
  if(FABRIC_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
    # GCC's warning for a header's class holding a type of an anonymous namespace: in a unity
    # file every .cc but the first reads as a header, so it fires on ordinary file-local types.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
    endif()
  endif()
endfunction()

# fabric_library(NAME SRCS ... DEPS ...)
function(fabric_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${FABRIC_WARNINGS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  fabric_use_pch(${name} product)
  fabric_unity(${name})
endfunction()

# fabric_binary(NAME SRCS ... DEPS ...)
function(fabric_binary name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${FABRIC_WARNINGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  fabric_use_pch(${name} product)
  fabric_unity(${name})
endfunction()

# fabric_test(NAME SRCS ... DEPS ... [SYSTEM] [LABELS ...]): a GoogleTest binary, each case its own
# ctest entry (a unit test's binary one entry with FABRIC_TEST_PER_BINARY). Tests are labelled "unit" and built by the fabric_unit_tests target (CI's fast
# stage) unless they are SYSTEM tests (they start the real binaries, need root, network
# namespaces or a container runtime: label "system") or name LABELS of their own. A label in
# FABRIC_SKIP_TESTS: neither built by default nor registered.
function(fabric_test name)
  if(NOT FABRIC_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "SYSTEM" "" "SRCS;DEPS;LABELS" ${ARGN})
  set(labels ${ARG_LABELS})
  if(NOT labels)
    set(labels unit)
    if(ARG_SYSTEM)
      set(labels system)
    endif()
  endif()
  add_executable(${name} ${ARG_SRCS})
  foreach(label ${labels})
    if(label IN_LIST FABRIC_SKIP_TESTS)
      # Still a target (callers add its definitions and dependencies), built only when named.
      set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
      set(skipped ON)
    endif()
  endforeach()
  target_compile_options(${name} PRIVATE ${FABRIC_WARNINGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${FABRIC_TEST_FLAGS})
  fabric_use_pch(${name} test)
  target_compile_definitions(${name} PRIVATE
    FABRIC_SOURCE_DIR="${PROJECT_SOURCE_DIR}" FABRIC_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(skipped)
    return()
  endif()
  if(labels STREQUAL "unit")
    fabric_add_to_unit_tests(${name})
  endif()
  if(FABRIC_TEST_PER_BINARY AND labels STREQUAL "unit")
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES LABELS unit)
    return()
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
# real fuzzer, instrumented for coverage with the libraries it names; otherwise it links a small
# driver that replays the corpus, so every build runs the seeds and the regressions as a test.
function(fabric_fuzz name)
  cmake_parse_arguments(ARG "" "CORPUS" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${FABRIC_WARNINGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  fabric_use_pch(${name} product)
  if(FABRIC_FUZZ)
    # Coverage feedback where the parser under test lives: this target and the project's own
    # libraries it names (set once per library, whichever fuzzer names it first).
    target_compile_options(${name} PRIVATE ${FABRIC_FUZZ_COVERAGE})
    foreach(dep ${ARG_DEPS})
      if(TARGET ${dep} AND dep MATCHES "^fabric_")
        get_target_property(imported ${dep} IMPORTED)
        get_target_property(opts ${dep} COMPILE_OPTIONS)
        if(NOT imported AND NOT "${FABRIC_FUZZ_COVERAGE}" IN_LIST opts)
          set_property(TARGET ${dep} APPEND PROPERTY COMPILE_OPTIONS ${FABRIC_FUZZ_COVERAGE})
        endif()
      endif()
    endforeach()
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    if(NOT TARGET fabric_fuzzers)
      add_custom_target(fabric_fuzzers)
    endif()
    add_dependencies(fabric_fuzzers ${name})
  else()
    # The driver, compiled once for every target (it was 34 compiles of the same file).
    if(NOT TARGET fabric_fuzz_replay)
      add_library(fabric_fuzz_replay OBJECT ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.cc)
      target_compile_options(fabric_fuzz_replay PRIVATE ${FABRIC_WARNINGS} ${FABRIC_TEST_FLAGS})
    endif()
    target_link_libraries(${name} PRIVATE fabric_fuzz_replay)
  endif()
  if(FABRIC_TESTS AND ARG_CORPUS)
    # libFuzzer given a folder fuzzes until stopped; -runs=0 runs the corpus once, as the driver.
    set(replay ${name})
    if(FABRIC_FUZZ)
      list(APPEND replay -runs=0)
    endif()
    add_test(NAME ${name}.corpus COMMAND ${replay} ${ARG_CORPUS})
    set_tests_properties(${name}.corpus PROPERTIES LABELS fuzz)
    fabric_add_to_unit_tests(${name})
    if(FABRIC_FUZZ)
      # The bounded run itself (FABRIC_FUZZ_SECONDS, 15 s): a test like the others, so ctest
      # runs it on whichever core is free, beside the VM's tests (scripts/test.sh).
      add_test(NAME ${name}.fuzz COMMAND ${PROJECT_SOURCE_DIR}/tests/fuzz/run.sh
        $<TARGET_FILE:${name}> ${ARG_CORPUS} ${PROJECT_BINARY_DIR}/crash-${name}-)
      set_tests_properties(${name}.fuzz PROPERTIES LABELS fuzzrun TIMEOUT 600)
    endif()
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
  # The installed page is compressed, as Debian's policy has it (-n: no name or time inside, so
  # the same page gives the same bytes).
  add_custom_command(OUTPUT ${bash} ${zsh} ${man} ${man}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
    ${commands}
    COMMAND gzip -9nkf ${man}
    DEPENDS ${binary}
    COMMENT "${binary}: completion scripts and man page")
  add_custom_target(${binary}_docs ALL DEPENDS ${bash} ${zsh} ${man} ${man}.gz)
  install(FILES ${bash} DESTINATION share/bash-completion/completions COMPONENT agent)
  install(FILES ${zsh} DESTINATION share/zsh/vendor-completions COMPONENT agent)
  install(FILES ${man}.gz DESTINATION share/man/man${section} COMPONENT agent)
endfunction()
