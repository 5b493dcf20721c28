#!/usr/bin/env bash
# Installs what is needed, builds and runs every test: a -Werror build, an ASan+UBSan build,
# the format check and bounded libFuzzer runs. .ci/run calls this; CI runs it as root.
#   FABRIC_TEST_STAGES="werror asan format fuzz" selects stages (default: all).
#   FABRIC_FUZZ_SECONDS (default 20) bounds each fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
stages=${FABRIC_TEST_STAGES:-"format werror asan fuzz"}
jobs=$(nproc)
failed=()

scripts/install-deps.sh

stage() { echo; echo "===== $1 ===== (${SECONDS}s)"; }
has() { [[ " $stages " == *" $1 "* ]]; }

if has format; then
  stage "format (clang-format --dry-run)"
  mapfile -t sources < <(git ls-files '*.cc' '*.h' '*.proto' 2>/dev/null || true)
  if ((${#sources[@]})) && ! clang-format --dry-run -Werror "${sources[@]}"; then
    failed+=(format)
  fi
fi

run_build() {  # name, extra cmake args...
  local name=$1 dir=build-$1
  shift
  stage "build $name"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFABRIC_WERROR=ON "$@" >/dev/null
  if ! cmake --build "$dir" -j"$jobs"; then failed+=("build-$name"); return; fi
  stage "test $name"
  if ! (cd "$dir" && ctest --output-on-failure -j"$jobs" --timeout 900); then
    failed+=("test-$name")
  fi
}
has werror && run_build werror
if has asan; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_build asan -DFABRIC_SANITIZE=ON
fi

if has fuzz; then
  stage "fuzz (libFuzzer, ${FABRIC_FUZZ_SECONDS:-20}s per target)"
  dir=build-fuzz
  if CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DFABRIC_FUZZ=ON -DFABRIC_TESTS=OFF -DFABRIC_WERROR=ON >/dev/null &&
      cmake --build "$dir" -j"$jobs" --target fabric_fuzzers; then
    while read -r target corpus; do
      work=$(mktemp -d)
      echo "-- $target"
      # Undefined behaviour fails the run, as a crash does (UBSan only reports by default).
      if ! UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
          "$dir/$target" -max_total_time="${FABRIC_FUZZ_SECONDS:-20}" -timeout=10 \
            -artifact_prefix="$dir/crash-$(basename "$target")-" "$work" "$corpus"; then
        failed+=("fuzz-$(basename "$target")")
      fi
      rm -rf "$work"
    done < "$dir/fuzzers.txt"
  else
    failed+=(build-fuzz)
  fi
fi

echo
if ((${#failed[@]})); then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all stages passed: $stages (${SECONDS}s)"
