#!/usr/bin/env bash
# Installs what is needed, builds and runs every test: the format check, a -Werror build (unit
# tests first, then the rest, then line coverage), an ASan+UBSan build and bounded libFuzzer
# runs. .ci/run calls this; CI runs it as root.
#   FABRIC_TEST_STAGES="werror asan format fuzz" selects stages (default: all).
#   FABRIC_FUZZ_SECONDS (default 20) bounds each fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
stages=${FABRIC_TEST_STAGES:-"format werror asan fuzz"}
jobs=$(nproc)
failed=()

scripts/install-deps.sh

stage() { echo; echo "===== $1 ===== (${SECONDS}s)"; }
finish() {
  echo
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

# ccache (when present) keeps a rebuild of unchanged sources cheap. The ASan and fuzz builds name
# sources relative to the checkout (CCACHE_BASEDIR) and map the checkout's path out of debug info
# and __FILE__ (-ffile-prefix-map): without the map ccache hashes the working directory of every
# -g compile, and a clone in another folder (CI's) would hit nothing. The coverage build keeps
# absolute paths, which gcov needs to find the sources from its notes.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# Line tables only (-g1): stack traces keep files and lines, and the builds skip most of the debug
# info they would write and link (a quarter of the compile time of a gRPC-heavy test).
o2=("-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
relocatable="-ffile-prefix-map=$PWD=."
o2r=("-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG $relocatable"
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG $relocatable")
# ASan's advice: -O1 keeps its reports exact, and it builds faster.
o1=("-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG $relocatable"
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG $relocatable")

unit_labels='^(unit|fuzz)$'
# Golden outputs (tests/cli) compare bytes: the -Werror build runs them, the ASan build skips them.
rest_labels=$unit_labels
# The VM rig boots qemu for each test (4-5 minutes together): it runs once, in the ASan build,
# where the agent inside the guest is also checked for memory errors. So does the Slurm rig
# (slurm/spank), where the fabricctl each task runs is checked too.
if has asan; then rest_labels='^(unit|fuzz|vm|slurm)$'; fi
run_build() {  # name, label regex of the tests this build leaves out, extra cmake args...
  local name=$1 skip=$2 dir=build-$1
  shift 2
  stage "build $name: unit tests first"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFABRIC_WERROR=ON "${launcher[@]}" "$@" \
    >/dev/null
  # The fast stage: unit tests and corpus replays, minutes in; a broken change stops here.
  if ! cmake --build "$dir" -j"$jobs" --target fabric_unit_tests; then
    failed+=("build-$name-unit"); finish
  fi
  stage "unit tests $name"
  if ! (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 300 -L "$unit_labels"); then
    failed+=("unit-$name"); finish
  fi
  stage "build $name"
  if ! cmake --build "$dir" -j"$jobs"; then failed+=("build-$name"); return; fi
  stage "test $name"
  if ! (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 900 -LE "$skip"); then
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

if has werror; then
  run_build werror "$rest_labels" -DFABRIC_COVERAGE=ON "${o2[@]}"
  coverage build-werror
fi
if has asan; then
  CCACHE_BASEDIR=$PWD ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_build asan '^(unit|fuzz|golden)$' -DFABRIC_SANITIZE=ON "${o1[@]}"
fi
if has fuzz; then
  stage "fuzz (libFuzzer, ${FABRIC_FUZZ_SECONDS:-20}s per target)"
  dir=build-fuzz
  if CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DFABRIC_FUZZ=ON -DFABRIC_TESTS=OFF -DFABRIC_WERROR=ON "${launcher[@]}" "${o2r[@]}" \
        >/dev/null &&
      CCACHE_BASEDIR=$PWD cmake --build "$dir" -j"$jobs" --target fabric_fuzzers; then
    # One libFuzzer process per core: each is single-threaded, so $jobs of them at once give
    # every target its full time in a fraction of the wall clock.
    fuzz_one() {  # target corpus
      local work name
      work=$(mktemp -d)
      name=$(basename "$1")
      # Undefined behaviour fails the run, as a crash does (UBSan only reports by default).
      if ! UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
          "$dir/$1" -max_total_time="${FABRIC_FUZZ_SECONDS:-20}" -timeout=10 \
            -artifact_prefix="$dir/crash-$name-" "$work" "$2" >"$dir/$name.fuzz.log" 2>&1; then
        touch "$dir/$name.fuzz.failed"
      fi
      rm -rf "$work"
    }
    rm -f "$dir"/*.fuzz.failed
    while read -r target corpus; do
      while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
      fuzz_one "$target" "$corpus" &
    done < "$dir/fuzzers.txt"
    wait
    while read -r target corpus; do
      name=$(basename "$target")
      echo "-- $name: $(grep -E '^(Done|#[0-9]+ *DONE)' "$dir/$name.fuzz.log" | tail -n 1)"
      if [ -e "$dir/$name.fuzz.failed" ]; then
        tail -n 60 "$dir/$name.fuzz.log"
        failed+=("fuzz-$name")
      fi
    done < "$dir/fuzzers.txt"
  else
    failed+=(build-fuzz)
  fi
fi

finish
