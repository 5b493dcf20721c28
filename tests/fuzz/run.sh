#!/bin/bash
# One bounded libFuzzer run (ctest's NAME.fuzz, label fuzzrun, the ASan build's):
#   run.sh FUZZER CORPUS ARTIFACT_PREFIX
# FABRIC_FUZZ_SECONDS (default 15) bounds it. New inputs go to a scratch folder, so the seed
# corpus in the checkout stays as committed; a crash, a leak, undefined behaviour or an input
# slower than 10 s fails it and leaves the input at ARTIFACT_PREFIX*.
set -uo pipefail
fuzzer=${1:?usage: run.sh FUZZER CORPUS ARTIFACT_PREFIX}
corpus=${2:?corpus}
prefix=${3:?artifact prefix}
work=$(mktemp -d)
log=$work/log
trap 'rm -rf "$work"' EXIT
mkdir "$work/new"
# Undefined behaviour fails the run, as a crash does (UBSan only reports by default).
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$fuzzer" -max_total_time="${FABRIC_FUZZ_SECONDS:-15}" -timeout=10 -artifact_prefix="$prefix" \
  "$work/new" "$corpus" >"$log" 2>&1
rc=$?
if ((rc != 0)); then
  tail -n 60 "$log"
  exit 1
fi
# The run's last figures (executions, coverage), for the log.
grep -E '^(Done|#[0-9]+ *DONE)' "$log" | tail -n 1
