#!/usr/bin/env bash
# Installs what is needed, builds and runs every test: the format check, a -Werror build with GCC
# (unit tests first, then the rest, then line coverage) and a clang ASan+UBSan build that also
# holds the libFuzzer targets (unit tests, the VM and Slurm rigs and bounded fuzzing, side by side). Two
# builds, each system test in one of them: docs/TESTING.md says which and why, and the budget.
# .ci/run calls this; CI runs it as root.
#   FABRIC_TEST_STAGES="format werror asan fuzz" selects stages (default: all; fuzz runs in the
#   asan build's tests, or builds that build's fuzz targets alone if asan is not selected).
#   FABRIC_FUZZ_SECONDS (default 15) bounds each fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
stages=${FABRIC_TEST_STAGES:-"format werror asan fuzz"}
jobs=$(nproc)
failed=()

scripts/install-deps.sh

# Each stage's name and wall time, printed again at the end (docs/TESTING.md keeps the budget).
times=()
current=""
current_start=$SECONDS
end_stage() {
  if [[ -n $current ]]; then times+=("$(printf '%6ds  %s' $((SECONDS - current_start)) "$current")"); fi
  current=""
}
stage() {
  end_stage
  current=$1
  current_start=$SECONDS
  echo
  echo "===== $1 ===== (${SECONDS}s)"
}
finish() {
  end_stage
  echo
  echo "stage times:"
  printf '%s\n' "${times[@]}"
  if ((${#failed[@]})); then
    echo "FAILED: ${failed[*]}"
    exit 1
  fi
  echo "all stages passed: $stages (${SECONDS}s)"
  exit 0
}
has() { [[ " $stages " == *" $1 "* ]]; }

if has format; then
  stage "format (clang-format --dry-run)"
  # Vendored upstream files (proto/k8s: the kubelet's API) stay byte for byte as published.
  mapfile -t sources < <(git ls-files '*.cc' '*.h' '*.proto' ':!:proto/k8s/**' 2>/dev/null || true)
  if ((${#sources[@]})) && ! clang-format --dry-run -Werror "${sources[@]}"; then
    failed+=(format)
  fi
fi

# ccache and Ninja, as the quick start has them (launcher, generator, fresh_tree). The ASan build
# names sources relative to the checkout (CCACHE_BASEDIR) and maps the checkout's path out of
# debug info and __FILE__ (-ffile-prefix-map): without the map ccache hashes the working
# directory of every -g compile. The coverage build keeps absolute paths, which gcov needs to
# find the sources from its notes.
source scripts/build-env.sh

# Line tables only (-g1): stack traces keep files and lines, and the builds skip most of the debug
# info they would write and link. -O1 for both: the -Werror build's warnings that need data flow
# (-Wmaybe-uninitialized and kin) run from -O1, coverage is truer to the source than at -O2, and
# ASan advises it (exact reports); -O2 cost a fifth more compile time and found nothing more.
relocatable="-ffile-prefix-map=$PWD=."
o1=("-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
o1r=("-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG $relocatable"
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG $relocatable")

# Which build runs which tests: every test in exactly one build, except the unit tests and the
# corpus replays, which both run (minutes, and the first thing a broken change meets).
#  - ASan: the rigs that boot or start real things once (vm: the Soft-RoCE VM, the agent in the
#    guest checked for memory errors; slurm: the SPANK plugin and fabricctl in a real cluster) and
#    the tests that feed our servers hostile input (api, load: the gRPC API and its hostile
#    clients), where a memory error is what we look for.
#  - -Werror (GCC, coverage): everything else (system, e2e, golden, ops, bench): their lines count
#    in the coverage figure. Golden outputs compare bytes, and the podman tests need the static
#    fabric-env, which only this build links.
# Without the asan stage its tests run in the -Werror build, and the other way round.
unit_labels='^(unit|fuzz)$'
asan_only='^(unit|fuzz|vm|slurm|api|load)$'
werror_tests=(-LE "$asan_only")  # everything the ASan build does not run, unlabelled tests too
# The bounded fuzzing (label fuzzrun, tests/fuzz/run.sh: one single-threaded libFuzzer per
# core) rides in the ASan build's ctest run, beside the VM's tests, when both stages are chosen.
asan_run=$asan_only
if has fuzz; then asan_run='^(unit|fuzz|fuzzrun|vm|slurm|api|load)$'; fi
asan_tests=(-L "$asan_run")
if ! has asan; then werror_tests=(-LE "$unit_labels"); fi
if ! has werror; then
  asan_tests=(-LE '^(golden|fuzzrun)$')
  if has fuzz; then asan_tests=(-LE '^golden$'); fi
fi
# Neither build compiles the test binaries whose tests the other one runs (FABRIC_SKIP_TESTS):
# 44 of them in the ASan build, a few minutes of a cold run.
werror_skip=() asan_skip=()
if has asan; then werror_skip=("-DFABRIC_SKIP_TESTS=api;load"); fi
if has werror; then asan_skip=("-DFABRIC_SKIP_TESTS=system;e2e;golden;bench"); fi

# A unit-test binary is one ctest entry (FABRIC_TEST_PER_BINARY): a process per case cost the
# ASan build three times the time of one per binary, and no build needs its cases' own entries.
configure() {  # dir, extra cmake args...
  local dir=$1
  shift
  fresh_tree "$dir"
  cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFABRIC_WERROR=ON \
    -DFABRIC_TEST_PER_BINARY=ON "${launcher[@]}" "$@" >/dev/null
}

build_unit() {  # name, extra cmake args...: configure, build and run the unit tests
  local name=$1 dir=build-$1
  shift
  stage "build $name: unit tests first"
  configure "$dir" "$@"
  # The fast stage: unit tests and corpus replays, minutes in; a broken change stops here.
  if ! cmake --build "$dir" -j"$jobs" --target fabric_unit_tests; then
    failed+=("build-$name-unit"); finish
  fi
  stage "unit tests $name"
  if ! (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 300 -L "$unit_labels"); then
    failed+=("unit-$name"); finish
  fi
}
build_rest() {  # name, ctest's parallel runs, ctest's selection of this build's tests...
  local name=$1 dir=build-$1 parallel=$2
  shift 2
  stage "build $name"
  if ! cmake --build "$dir" -j"$jobs"; then failed+=("build-$name"); return 1; fi
  # The Debian packages, for their install test (label package, this build's).
  if [[ $name == werror ]] && ! cmake --build "$dir" --target fabric_debs >"$dir/debs.log" 2>&1; then
    tail -n 30 "$dir/debs.log"
    failed+=("debs-$name")
  fi
  stage "test $name"
  # Each test's time in the log: what docs/TESTING.md's budget is made of.
  if ! (cd "$dir" && ctest --output-on-failure -j"$parallel" --timeout 900 "$@"); then
    failed+=("test-$name")
  fi
}

# Line coverage of the product code from the -Werror build's tests (tests, benchmarks, fuzz
# drivers and generated code left out).
coverage() {  # build dir
  stage "coverage (gcovr)"
  if ! command -v gcovr >/dev/null; then echo "gcovr missing: no coverage figure"; return; fi
  if gcovr --root . --object-directory "$1" --gcov-ignore-parse-errors \
      --exclude '.*_test\.cc' --exclude '.*_fuzz\.cc' --exclude '.*_bench\.cc' \
      --exclude 'tests/.*' --exclude 'build.*' \
      --print-summary --txt "$1/coverage.txt" -j"$jobs" 2>"$1/coverage.log" | tail -n 3; then
    echo "(per file: $1/coverage.txt; gcov's warnings: $1/coverage.log)"
  else
    echo "gcovr failed: see $1/coverage.log"
  fi
}

# The clang build: ASan+UBSan, precompiled headers, and the fuzz targets with libFuzzer.
# Unity as well: behind the precompiled header a fresh clone misses in ccache anyway (below).
asan_args=(-DFABRIC_SANITIZE=ON -DFABRIC_FUZZ=ON -DFABRIC_UNITY=ON "${o1r[@]}")

if has werror; then
  # /usr: the packages' paths (the unit's ExecStart=, the SPANK plugin's fabricctl). No ccache:
  # behind GCC's precompiled header every compile is uncacheable and ccache's own pass first made
  # a test file 2.4 times slower (13.6 s -> 33 s), and a fresh clone misses anyway (coverage notes
  # and unity files name absolute paths); Ninja keeps the rebuilds of one checkout incremental.
  build_unit werror -DFABRIC_COVERAGE=ON -DFABRIC_UNITY=ON -DFABRIC_PCH=ON \
    -DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_INSTALL_PREFIX=/usr "${o1[@]}" \
    "${werror_skip[@]}"
  # One run per core. These tests mostly wait (on agents, namespaces, podman, sleeps): a third
  # of two cores idled at -j2 (227 s; 174 s at -j4), but at -j4 a podman test's fixed window
  # missed a frame once (fixed); more runs at once wait until the rest are proven under load.
  # One test more than cores: they mostly wait on agents, namespaces and podman (docs/TESTING.md).
  build_rest werror $((jobs + 1)) "${werror_tests[@]}" || true
  coverage build-werror
fi
if has asan; then
  export CCACHE_BASEDIR=$PWD ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # Everything at once, then its tests in one ctest run: the -Werror build has already met a
  # broken change with the unit tests, and here a one-VM test (one core, minutes) runs beside
  # the unit tests on the other core instead of after them (tests/vm/CMakeLists.txt).
  stage "configure asan"
  CC=clang CXX=clang++ configure build-asan "${asan_args[@]}" "${asan_skip[@]}"
  # One run per core: the VM's tests, the ASan unit tests and the fuzzers keep theirs busy.
  build_rest asan "$jobs" "${asan_tests[@]}" || true
fi
if has fuzz && ! has asan; then
  dir=build-asan
  stage "build fuzz targets (asan build)"
  if ! { CCACHE_BASEDIR=$PWD CC=clang CXX=clang++ configure "$dir" "${asan_args[@]}" &&
         CCACHE_BASEDIR=$PWD cmake --build "$dir" -j"$jobs" --target fabric_fuzzers; }; then
    failed+=(build-fuzz); finish
  fi
  stage "fuzz (libFuzzer, ${FABRIC_FUZZ_SECONDS:-15}s per target)"
  if ! (cd "$dir" && ctest --output-on-failure -j"$jobs" -L '^fuzzrun$'); then failed+=(fuzz); fi
fi

finish
