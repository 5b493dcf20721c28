# Sourced by the guest scripts: the rig's environment (README "What the guest script gets") with
# the one-VM defaults, the ok/fail tally every script reports with, and the two-VM handshake's
# waits.
# shellcheck shell=bash disable=SC2034
dev="${FABRIC_VM_RDMA_DEV:-rxe0}"
netdev="${FABRIC_VM_NETDEV:-veth0}"
ip="${FABRIC_VM_IP:-10.77.0.1}"
out="${FABRIC_VM_OUT:-/tmp}"

failures=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# wait_file SECONDS FILE...: 0 as soon as one of FILEs exists, 1 after SECONDS.
wait_file() {
  local limit=$(($1 * 10)) i f
  shift
  for ((i = 0; i < limit; i++)); do
    for f in "$@"; do [[ -e "$f" ]] && return 0; done
    sleep 0.1
  done
  return 1
}
# listening PORT: a TCP socket listens on PORT.
listening() { [[ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]]; }
