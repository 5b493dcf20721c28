# Sourced by the guest scripts: the rig's environment (README "What the guest script gets") with
# the one-VM defaults, and the ok/fail tally every script reports with.
# shellcheck shell=bash disable=SC2034
dev="${FABRIC_VM_RDMA_DEV:-rxe0}"
netdev="${FABRIC_VM_NETDEV:-veth0}"
ip="${FABRIC_VM_IP:-10.77.0.1}"
out="${FABRIC_VM_OUT:-/tmp}"

failures=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
