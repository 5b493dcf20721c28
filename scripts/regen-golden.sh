#!/usr/bin/env bash
# Rewrites fabricctl's golden outputs (tests/cli/golden/<host>/<command>) from the current build,
# for review in the diff: scripts/regen-golden.sh [BUILD_DIR, default build-werror].
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-werror}
cmake --build "$build" --target fabricctl_golden_test fabricctl build_test cdi_spec_test
rm -rf tests/cli/golden agent/daemon/cycle/testdata/build_golden agent/publish/cdi/testdata/golden
FABRIC_UPDATE_GOLDEN=1 "$build/tests/cli/fabricctl_golden_test"
# BuildSnapshot's first snapshot on every example host (agent/daemon/cycle/build_test.cc).
FABRIC_UPDATE_GOLDEN=1 "$build/agent/daemon/cycle/build_test" --gtest_filter='*Golden*'
# The CDI spec on every example host (agent/publish/cdi/cdi_spec_test.cc).
FABRIC_UPDATE_GOLDEN=1 "$build/agent/publish/cdi/cdi_spec_test" --gtest_filter='*Golden*'
git status --short tests/cli/golden agent/daemon/cycle/testdata/build_golden \
  agent/publish/cdi/testdata/golden
