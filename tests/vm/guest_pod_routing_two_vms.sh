#!/bin/bash
# Runs inside both of the rig's guests: `rig.sh run --vms 2 --vm0-nics 2 --
# guest_pod_routing_two_vms.sh FABRIC_PROBE FABRIC_CNI`. Issue 16 on real RDMA: vm0 has two NICs
# in one subnet (eth0 10.78.0.1, eth1 10.78.0.3) on one wire with vm1, an rxe device on each.
# fabric-cni's ADD (podRouting auto, the default) sets up the ARP sysctls and source routing for
# both, here in vm0's initial namespace: rxe on Debian's 6.1 kernel receives only there. Then
# vm1 asks each address by ARP (only the owner's MAC may answer) and runs fabric-probe over
# rdma_cm to each; the RoCE packets must land on the matching rxe device (its hw counters, the
# responder's device) and none on the other. Finally DEL takes the rules away again.
#
# Handshake through $FABRIC_VM_SHARED: vm0 writes its MACs to macs and touches ready (or
# setup-failed); vm1 touches done.vm1 when through; vm0 then runs DEL.
set -uo pipefail

probe="${1:?usage: guest_pod_routing_two_vms.sh FABRIC_PROBE FABRIC_CNI}"
cni="${2:?usage: guest_pod_routing_two_vms.sh FABRIC_PROBE FABRIC_CNI}"
# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
index="${FABRIC_VM_INDEX:?run me under rig.sh run --vms 2 --vm0-nics 2}"
[[ "${FABRIC_VM_COUNT:-1}" == 2 && "${FABRIC_VM0_NICS:-1}" == 2 ]] ||
  { echo "FAIL needs two VMs and two NICs on vm0 (rig.sh run --vms 2 --vm0-nics 2)"; exit 1; }
shared="${FABRIC_VM_SHARED:?}"
a=10.78.0.1 # vm0 eth0, rxe0 (set up by the rig)
b=10.78.0.3 # vm0 eth1, rxe1 (set up here)
ports=(18530 18531)
state=/tmp/fabric-cni-state # the guest's own tmpfs

counter() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"; }

# cni COMMAND IFNAME ADDRESS MAC: fabric-cni against vm0's initial namespace, as a runtime would
# call it for one attachment; its output in $out/cni.COMMAND.IFNAME.
cni() {
  local conf
  conf=$(printf '{"cniVersion":"1.0.0","name":"rails","type":"fabric-cni","stateDir":"%s",%s%s}' \
    "$state" '"agentSocket":"/nonexistent/announce.sock","announce":{"count":1,"tailMs":[300]},' \
    "$(printf '"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"%s","mac":"%s","sandbox":"/proc/1/ns/net"}],"ips":[{"address":"%s/24","interface":0}]}' "$2" "$4" "$3")")
  CNI_COMMAND="$1" CNI_CONTAINERID=rails-vm0 CNI_NETNS=/proc/1/ns/net CNI_IFNAME="$2" \
    CNI_PATH=/usr/lib/cni timeout 30 "$cni" <<<"$conf" >"$out/cni.$1.$2" 2>&1
}

if ((index == 0)); then
  # ---- vm0: the host with two rails ----
  if ! ip link show eth1 >/dev/null 2>&1; then
    fail "no eth1"
    touch "$shared/setup-failed"
    exit 1
  fi
  mac0=$(cat /sys/class/net/eth0/address)
  mac1=$(cat /sys/class/net/eth1/address)
  ip addr add "$b/24" dev eth1 && ip link set eth1 up && rdma link add rxe1 type rxe netdev eth1 ||
    fail "eth1/rxe1 setup"
  for ((i = 0; i < 100; i++)); do
    [[ "$(cat /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null)" == *ACTIVE* &&
      "$(cat /sys/class/infiniband/rxe1/ports/1/gids/1 2>/dev/null)" == 0000:0000:0000:0000:0000:ffff:* ]] &&
      break
    sleep 0.2
  done
  ((i < 100)) && ok "rxe1 on eth1 ($b) ready" || fail "rxe1 not ready"

  # Both interfaces exist before either ADD, so auto mode routes both (each has a sibling).
  for spec in "eth0 $a $mac0" "eth1 $b $mac1"; do
    read -r ifname addr mac <<<"$spec"
    if cni ADD "$ifname" "$addr" "$mac"; then
      ok "fabric-cni ADD $ifname ($addr)"
    else
      fail "fabric-cni ADD $ifname: $(cat "$out/cni.ADD.$ifname")"
    fi
  done
  rules=$(ip -4 rule show)
  declare -A table=()
  for spec in "eth0 $a" "eth1 $b"; do
    read -r ifname addr <<<"$spec"
    t=$(awk -v from="$addr" '$1 == "1000:" && $3 == from && $4 == "lookup" { print $5 }' <<<"$rules")
    table[$ifname]=$t
    routes=$(ip -4 route show table "${t:-none}" 2>&1)
    if [[ -n "$t" ]] && grep -q "^10.78.0.0/24 dev $ifname " <<<"$routes"; then
      ok "rule from $addr lookup $t; table $t: $(tr '\n' ';' <<<"$routes")"
    else
      fail "no rule/table for $addr on $ifname: rules: $rules; table: $routes"
    fi
    got=$(ip -4 route get 10.78.0.2 from "$addr")
    [[ "$got" == *" dev $ifname "* ]] && ok "route get from $addr: dev $ifname" ||
      fail "route get from $addr: $got"
    s="$(cat "/proc/sys/net/ipv4/conf/$ifname/arp_ignore") $(cat "/proc/sys/net/ipv4/conf/$ifname/arp_announce")"
    [[ "$s" == "1 2" ]] && ok "$ifname arp_ignore=1 arp_announce=2" ||
      fail "$ifname arp_ignore/arp_announce: $s"
  done
  [[ -n "${table[eth0]}" && "${table[eth0]}" != "${table[eth1]}" ]] || fail "tables: ${table[*]}"

  # One responder per address; rdma_cm binds its listener to the address the client came to.
  for i in 0 1; do
    timeout 120 "$probe" write_bw -R -p "${ports[i]}" --timeout 30 -n 200 -s 16384 \
      >"$out/server$i.out" 2>"$out/server$i.err" &
    spid[i]=$!
  done
  for ((t = 0; t < 300; t++)); do
    listening "${ports[0]}" && listening "${ports[1]}" && break
    sleep 0.1
  done
  echo "$mac0 $mac1" >"$shared/macs"
  # shellcheck disable=SC2034 # read through the nameref below
  c0=("$(counter rxe0 rcvd_pkts)" "$(counter rxe1 rcvd_pkts)" "$(counter rxe0 sent_pkts)" "$(counter rxe1 sent_pkts)")
  touch "$shared/ready"
  # vm1 tests a first, then b: the counters between the responders' ends belong to one test.
  for i in 0 1; do
    wait "${spid[i]}"
    rc=$?
    declare -a "c$((i + 1))=($(counter rxe0 rcvd_pkts) $(counter rxe1 rcvd_pkts) $(counter rxe0 sent_pkts) $(counter rxe1 sent_pkts))"
    want=rxe$i addr=$a
    ((i == 1)) && addr=$b
    if ((rc == 0)) && grep -q "served write_bw over rdma on $want to 10.78.0.2" "$out/server$i.err"; then
      ok "responder for $addr: $(grep served "$out/server$i.err")"
    else
      fail "responder for $addr (want $want): exit $rc: $(cat "$out/server$i.err")"
    fi
  done
  # rcvd/sent per device and test: [rxe0 rcvd, rxe1 rcvd, rxe0 sent, rxe1 sent].
  for i in 0 1; do
    declare -n before="c$i" after="c$((i + 1))"
    d=()
    for k in 0 1 2 3; do d[k]=$((after[k] - before[k])); done
    right=$i wrong=$((1 - i))
    # 200 messages of 16 KiB: 3200 packets at rxe's 1024-byte MTU, at least one per message.
    if ((d[right] >= 200 && d[wrong] == 0 && d[2 + right] > 0 && d[2 + wrong] == 0)); then
      ok "test $i: rxe$right rcvd ${d[right]} sent $((d[2 + right])); rxe$wrong rcvd 0 sent 0"
    else
      fail "test $i: want rxe$right only: rcvd rxe0 ${d[0]} rxe1 ${d[1]}, sent rxe0 ${d[2]} rxe1 ${d[3]}"
    fi
    unset -n before after
  done

  if wait_file 150 "$shared/done.vm1"; then ok "vm1 finished"; else fail "vm1 did not finish"; fi
  for spec in "eth1 $b $mac1" "eth0 $a $mac0"; do
    read -r ifname addr mac <<<"$spec"
    cni DEL "$ifname" "$addr" "$mac" || fail "fabric-cni DEL $ifname: $(cat "$out/cni.DEL.$ifname")"
  done
  left=$(ip -4 rule show | grep -v -e '^0:' -e '^32766:' -e '^32767:')
  [[ -z "$left" ]] && ok "DEL: no rules left" || fail "DEL left rules: $left"
  left=$(ip route show table all proto 245)
  [[ -z "$left" ]] && ok "DEL: no routes of proto 245 left" || fail "DEL left routes: $left"
  left=$(ls "$state"/*.routes 2>/dev/null)
  [[ -z "$left" ]] && ok "DEL: no records left" || fail "DEL left records: $left"
else
  # ---- vm1: asks vm0's two addresses over its single rxe0 ----
  if ! wait_file 150 "$shared/ready" "$shared/setup-failed" || [[ ! -e "$shared/ready" ]]; then
    fail "vm0 never got ready"
    exit 1
  fi
  read -r mac0 mac1 <"$shared/macs"
  for i in 0 1; do
    addr=$a mac=$mac0
    ((i == 1)) && addr=$b mac=$mac1
    # No ARP flux: only the interface holding the address answers (with arp_ignore=0 both would).
    macs=$(busybox arping -I eth0 -c 3 -w 4 "$addr" 2>&1 | grep -oi 'reply from [0-9.]* \[[0-9a-f:]*\]' |
      grep -oi '[0-9a-f]\{2\}\(:[0-9a-f]\{2\}\)\{5\}' | tr 'A-F' 'a-f' | sort -u | tr '\n' ' ')
    [[ "$macs" == "$mac " ]] && ok "ARP for $addr answered by $mac only" ||
      fail "ARP for $addr answered by '$macs', want $mac"
    timeout 120 "$probe" write_bw "$addr" -R -d "$dev" -p "${ports[i]}" --retry 10 --timeout 30 --json \
      -n 200 -s 16384 >"$out/client$i.json" 2>"$out/client$i.err"
    rc=$?
    if ((rc == 0)) && /usr/bin/python3 -c '
import json, sys
j = json.loads(open(sys.argv[1]).read())
assert j["transport"] == "rdma" and j["device"] == sys.argv[2] and j["bw_avg_gbps"] > 0, j
' "$out/client$i.json" "$dev"; then
      ok "write_bw over rdma_cm to $addr: $(cat "$out/client$i.json")"
    else
      fail "write_bw to $addr: exit $rc: $(cat "$out/client$i.err" "$out/client$i.json")"
    fi
    neigh=$(ip neigh show "$addr" dev eth0)
    [[ "$neigh" == *"lladdr $mac "* ]] && ok "neighbour $addr: $mac" || fail "neighbour $addr: $neigh"
  done
  touch "$shared/done.vm1"
fi

if ((failures)); then
  echo "vm$index: $failures check(s) failed"
  exit 1
fi
echo "vm$index: all checks passed"
