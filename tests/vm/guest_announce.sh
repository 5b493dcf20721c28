#!/bin/bash
# Runs inside the rig's guest: `rig.sh run -- guest_announce.sh LINK_TEST`. The announce library's
# kernel tests on Debian's stock kernel, which has what this machine's kernel may lack: the VLAN
# case (802.1Q, module 8021q) must run here, not skip.
set -uo pipefail

bin="${1:?usage: guest_announce.sh LINK_TEST_BINARY}"
if [[ ! -x "$bin" ]]; then
  echo "FAIL $bin is not an executable in the guest (build trees under /tmp are not visible)"
  exit 1
fi
mkdir -p /run/netns
out="$("$bin" 2>&1)"
rc=$?
echo "$out" | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) ' || true
if ((rc != 0)); then
  echo "$out" | grep -B2 -A15 'Failure' | head -80
  echo "FAIL link_test exited $rc"
  exit 1
fi
if echo "$out" | grep -q 'SKIPPED'; then
  echo "FAIL a case skipped on a kernel that should run it"
  exit 1
fi
echo "ok   link_test: every case ran and passed, VLAN included"
