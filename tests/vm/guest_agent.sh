#!/bin/bash
# Runs inside the rig's guest: `rig.sh run -- guest_agent.sh FABRIC_AGENT FABRICCTL`. Starts the
# real agent on the real kernel and checks that it follows the kernel without polling: an RDMA
# device deleted and re-added (uevents), an address added and removed (route netlink, and the
# GID table rewritten by the kernel), with the safety-net rescan an hour away; and the health
# monitor on rxe0's real link: a flap of its netdev is a port_state.flap that stays after the
# link is back.
set -uo pipefail

agent="${1:?usage: guest_agent.sh FABRIC_AGENT FABRICCTL}"
ctl="${2:?usage: guest_agent.sh FABRIC_AGENT FABRICCTL}"
# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
sock=/run/fabric-agent-test/agent.sock

echo '{"health": {"pollIntervalS": 0.5}}' >"$out/config.json"
"$agent" --socket="$sock" --rescan-interval=3600 --log-level=debug --config="$out/config.json" \
  --state-dir="$out/state" 2>"$out/agent.log" &
pid=$!
ctl_() { "$ctl" "$@" --target="unix://$sock" --timeout=5; }
for _ in $(seq 200); do
  ctl_ health --liveness >/dev/null 2>&1 && break
  sleep 0.05
done
if ctl_ health --liveness >/dev/null 2>&1; then ok "fabric-agent serving"; else
  fail "fabric-agent not serving"; cat "$out/agent.log"; exit 1
fi

# Polls `fabricctl inventory` until the shell test COND holds for its text in $inv, for at most
# 10 s of wall-clock time (each poll costs a process start, slow under emulation); prints how
# long it took. Devices are rows "  NAME  PCI ..."; GIDs rows "  DEV:PORT  INDEX  GID ... IPV4".
wait_for() {
  local what=$1 cond=$2 start now
  start=$(date +%s%N)
  while :; do
    inv=$(ctl_ inventory 2>/dev/null)
    now=$(date +%s%N)
    if eval "$cond"; then
      ok "$what (seen after $(((now - start) / 1000000)) ms)"
      return 0
    fi
    if (((now - start) > 10000000000)); then
      fail "$what: not seen within 10 s"
      echo "$inv"
      return 1
    fi
    sleep 0.02
  done
}
has_dev() { grep -qE "^  $1 " <<<"$inv"; }
has_ip() { grep -qE "^  $1:1 .* $2 *\$" <<<"$inv"; }

wait_for "$dev present at start" 'has_dev $dev'
rdma link delete "$dev" || fail "rdma link delete $dev"
wait_for "$dev gone after rdma link delete (uevent)" '! has_dev $dev'
rdma link add "$dev" type rxe netdev "$netdev" || fail "rdma link add $dev"
wait_for "$dev back after rdma link add (uevent)" 'has_dev $dev && has_ip $dev $ip'
ip addr add 10.77.0.9/24 dev "$netdev" || fail "ip addr add"
wait_for "new address's GID after ip addr add (route netlink)" 'has_ip $dev 10.77.0.9'
ip addr del "$ip/24" dev "$netdev" || fail "ip addr del"
wait_for "old address's GID gone after ip addr del" '! has_ip $dev $ip'

# The port's RoCE v2 IPv4 GID is no longer where it was at start: health says so.
health=$(ctl_ health)
rc=$?
if grep -q "gid_table $dev:1" <<<"$health" && ((rc == 1)); then
  ok "health reports the GID table change since start (exit $rc)"
else
  fail "health after the GID move (exit $rc): $health"
fi
# A real link flap: rxe0's netdev down and up. The monitor counts it once (the port leaving
# ACTIVE, and carrier_changes +2), and the finding stays after the link is back (sticky).
ip link set "$netdev" down || fail "ip link set $netdev down"
sleep 1  # the agent sees the port leave ACTIVE (netlink) and a poll or two pass
ip link set "$netdev" up || fail "ip link set $netdev up"
start=$(date +%s%N)
while :; do
  health=$(ctl_ health)
  grep -q "port_state.flap $dev:1" <<<"$health" && break
  (($(date +%s%N) - start > 15000000000)) && break
  sleep 0.2
done
if grep -q "WARNING port_state.flap $dev:1: .*1 flap in" <<<"$health"; then
  ok "health reports the link flap of $dev:1 once"
else
  fail "health after the link flap: $health"
fi
sleep 1  # a few polls with the link up
health=$(ctl_ health)
if grep -q "port_state.flap $dev:1" <<<"$health"; then ok "the flap stays reported once the link is back (sticky)"; else
  fail "the flap was forgotten once the link came back: $health"
fi

# Each kind of event refreshes only what it names: the device by its uevent, the GIDs by the
# address's route netlink message (a full rescan would be logged as "rescan (").
grep -q "targeted refresh of .*(infiniband" "$out/agent.log" &&
  grep -q "targeted refresh of rxe0.*(address\|targeted refresh of rxe0.*(route" "$out/agent.log" &&
  ok "targeted refreshes were triggered by uevents and route netlink" ||
  fail "no event-triggered targeted refresh in the agent log"

kill -TERM "$pid"
start=$(date +%s%N)
wait "$pid"
rc=$?
end=$(date +%s%N)
if ((rc == 0)); then ok "SIGTERM: exit 0 in $(((end - start) / 1000000)) ms"; else
  fail "SIGTERM: exit $rc"
fi

if ((failures)); then
  echo "--- agent log"
  cat "$out/agent.log"
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
