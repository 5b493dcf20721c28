#!/bin/bash
# Runs inside the rig's guest:
#   `rig.sh run -- guest_pod_env.sh FABRIC_AGENT FABRIC_CNI FABRIC_ENV FABRICCTL`.
# Issue 34 on real RoCE GIDs: two "pods" (network namespaces) each get a macvlan of rxe0's netdev
# in one subnet, so the kernel lists both pods' addresses in rxe0's GID table (shared RDMA mode).
# The real fabric-cni ADD (envDir = the agent's published host directory) records each pod's
# port and GID; fabric-env inside each pod must answer with that pod's own GID index (different
# for the two pods, equal to the kernel's index of the pod's address), run a command unchanged in
# a pod without a record, and DEL must leave no record.
# Issue 35: the doctor in pod 1, on the kernel's own GID table and real verbs (fabricctl opens
# rxe0 with ibv_open_device): the answer fabric-env exec hands over is OK; pod 2's GID index and
# the parent netdev's (the address of the namespace the macvlan came from) are not this pod's.
set -uo pipefail

agent="${1:?usage: guest_pod_env.sh FABRIC_AGENT FABRIC_CNI FABRIC_ENV}"
cni="${2:?usage: guest_pod_env.sh FABRIC_AGENT FABRIC_CNI FABRIC_ENV}"
fenv="${3:?usage: guest_pod_env.sh FABRIC_AGENT FABRIC_CNI FABRIC_ENV FABRICCTL}"
ctl="${4:?usage: guest_pod_env.sh FABRIC_AGENT FABRIC_CNI FABRIC_ENV FABRICCTL}"
# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
dir=/run/fabric-env-test
sock=/run/fabric-agent-test/agent.sock

"$agent" --socket="$sock" --host-file-dir="$dir" --log-level=debug 2>"$out/agent.log" &
apid=$!
wait_file 30 "$dir/host.pb" && ok "the agent published $dir/host.pb" ||
  { fail "no published host"; cat "$out/agent.log"; exit 1; }

# The RoCE v2 GID index of rxe0 port 1 holding IPv4 address $1; empty when none.
gid_of() {
  local want f
  # shellcheck disable=SC2086 # the four octets, split, are printf's arguments
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${1//./ })
  for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
    [[ "$(cat "$f" 2>/dev/null)" == "$want" ]] || continue
    [[ "$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/${f##*/}" 2>/dev/null)" == "RoCE v2" ]] &&
      { echo "${f##*/}"; return; }
  done
}

# pod N ADDRESS: namespace podN with net1, a macvlan of $netdev, holding ADDRESS/24.
pod() {
  ip netns add "pod$1" && ip link add link "$netdev" name "mv$1" type macvlan mode bridge &&
    ip link set "mv$1" netns "pod$1" && ip -n "pod$1" link set "mv$1" name net1 &&
    ip -n "pod$1" addr add "$2/24" dev net1 && ip -n "pod$1" link set net1 up &&
    ip -n "pod$1" link set lo up
}
# cni COMMAND N ADDRESS: fabric-cni for pod N's net1, as a runtime calls it.
cni() {
  local mac conf
  mac=$(ip -n "pod$2" -br link show net1 2>/dev/null | awk '{print $3}')
  conf=$(printf '{"cniVersion":"1.0.0","name":"rdma","type":"fabric-cni","stateDir":"/tmp/pe-state","envDir":"%s","agentSocket":"/nonexistent/a.sock","announce":{"count":0,"tailMs":[]},"podRouting":{"mode":"off"},"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"net1","mac":"%s","sandbox":"/run/netns/pod%s"}],"ips":[{"address":"%s/24","interface":0}]}}' \
    "$dir" "$mac" "$2" "$3")
  CNI_COMMAND="$1" CNI_CONTAINERID="ctr$2" CNI_NETNS="/run/netns/pod$2" CNI_IFNAME=net1 \
    CNI_PATH=/usr/lib/cni timeout 30 "$cni" <<<"$conf" >"$out/cni.$1.$2" 2>&1
}
# in_pod N ARGS...: fabric-env in pod N, as a container's entrypoint starts it.
in_pod() {
  ip netns exec "pod$1" env -i PATH=/usr/bin:/bin "$fenv" --host-file="$dir/host.pb" "${@:2}"
}

declare -A addr=([1]=10.77.0.21 [2]=10.77.0.22) gid=()
for n in 1 2; do
  pod "$n" "${addr[$n]}" || fail "pod$n setup"
done
for n in 1 2; do
  for _ in $(seq 100); do
    gid[$n]=$(gid_of "${addr[$n]}")
    [[ -n "${gid[$n]}" ]] && break
    sleep 0.1
  done
  [[ -n "${gid[$n]}" ]] && ok "pod$n's ${addr[$n]} is $dev GID ${gid[$n]} (the kernel's)" ||
    fail "no GID for ${addr[$n]} on $dev"
done
[[ -n "${gid[1]}" && "${gid[1]}" != "${gid[2]}" ]] || fail "the pods' GIDs: ${gid[*]}"

for n in 1 2; do
  if cni ADD "$n" "${addr[$n]}"; then ok "fabric-cni ADD pod$n"; else
    fail "fabric-cni ADD pod$n: $(cat "$out/cni.ADD.$n")"
  fi
  ino=$(stat -L -c %i "/run/netns/pod$n")
  rec="$dir/pods/$ino-ctr$n-net1.json"
  if [[ -f "$rec" ]] && grep -q "\"device\": \"$dev\"" "$rec" &&
    grep -q "\"gid_index\": ${gid[$n]}," "$rec"; then
    ok "pod$n's record $rec: $dev GID ${gid[$n]}"
  else
    fail "pod$n's record $rec: $(cat "$rec" 2>&1)"
  fi
done

# Each pod gets its own GID, whatever the other pod's address in the same subnet.
for n in 1 2; do
  env_out=$(in_pod "$n" env 2>"$out/fenv.$n.err")
  rc=$?
  if ((rc == 0)) && grep -qx "NCCL_IB_GID_INDEX=${gid[$n]}" <<<"$env_out" &&
    grep -qx "NCCL_IB_HCA==$dev:1" <<<"$env_out" && grep -qx "NCCL_SOCKET_IFNAME==net1" <<<"$env_out"; then
    ok "fabric-env env in pod$n: NCCL_IB_GID_INDEX=${gid[$n]}, NCCL_IB_HCA==$dev:1"
  else
    fail "fabric-env env in pod$n (exit $rc): $env_out $(cat "$out/fenv.$n.err")"
  fi
  ran=$(in_pod "$n" exec -- /usr/bin/env 2>&1)
  grep -qx "UCX_IB_GID_INDEX=${gid[$n]}" <<<"$ran" && ok "fabric-env exec in pod$n: UCX_IB_GID_INDEX=${gid[$n]}" ||
    fail "fabric-env exec in pod$n: $ran"
done

# doctor_check NAME WANT_EXIT WANT_JSON_PART ARGS...: the doctor in pod 1, its JSON report.
doctor_check() {
  local name=$1 want=$2 part=$3 report rc
  report=$(ip netns exec pod1 env -i PATH=/usr/bin:/bin "${@:4}" 2>"$out/doctor.err")
  rc=$?
  if ((rc == want)) && grep -q -- "$part" <<<"$report"; then
    ok "doctor: $name (exit $rc, $part)"
  else
    fail "doctor: $name: exit $rc (want $want), no $part in: $report $(cat "$out/doctor.err")"
  fi
}
ulimit -n 65536 # A job's own setting: the doctor warns about 1024 (NCCL's sockets).
parent_addr=$(ip -4 -br addr show dev "$netdev" | awk '{print $3}' | cut -d/ -f1)
parent_gid=$(gid_of "$parent_addr")
# What fabric-env exec hands the job is judged OK, NET/IB over rxe0 with pod 1's own GID.
doctor_check "the job's own answer" 0 '"verdict": "SEVERITY_OK"' \
  "$fenv" --host-file="$dir/host.pb" exec -- "$fenv" --host-file="$dir/host.pb" doctor --json
doctor_check "pod 1's own GID" 0 "\"verdict\": \"GID index ${gid[1]} (RoCE v2, ${addr[1]}, this namespace's own)\"" \
  "$fenv" --host-file="$dir/host.pb" exec -- "$fenv" --host-file="$dir/host.pb" doctor --json
# Real ibv_open_device and ibv_query_port from the pod (fabricctl, dynamic).
doctor_check "fabricctl opens $dev with verbs" 0 "\"verdict\": \"NCCL will open $dev:1\"" \
  "$fenv" --host-file="$dir/host.pb" exec -- "$ctl" doctor --json --host-file="$dir/host.pb"
doctor_check "pod 2's GID index" 2 '"check": "gid_not_ours"' NCCL_IB_GID_INDEX="${gid[2]}" \
  "$fenv" --host-file="$dir/host.pb" exec -- "$fenv" --host-file="$dir/host.pb" doctor --json
if [[ -n "$parent_gid" ]]; then
  doctor_check "the parent's GID index $parent_gid" 2 '"check": "gid_not_ours"' \
    NCCL_IB_GID_INDEX="$parent_gid" \
    "$fenv" --host-file="$dir/host.pb" exec -- "$fenv" --host-file="$dir/host.pb" doctor --json
else
  fail "no RoCE v2 GID of $netdev's own address $parent_addr"
fi
doctor_check "NCCL_IB_DISABLE=1" 2 '"transport": "NCCL_TRANSPORT_NET_SOCKET"' NCCL_IB_DISABLE=1 \
  "$fenv" --host-file="$dir/host.pb" exec -- "$fenv" --host-file="$dir/host.pb" doctor --json

# A pod without a record (no fabric-cni in its network): the command runs unchanged.
ip netns add pod3 && ip -n pod3 link set lo up
ran=$(ip netns exec pod3 env -i PATH=/usr/bin:/bin "$fenv" --host-file="$dir/host.pb" exec -- sh -c 'echo ran; env' 2>&1)
if grep -qx ran <<<"$ran" && ! grep -q NCCL_IB <<<"$ran" && grep -q "no valid fabric-cni record" <<<"$ran"; then
  ok "pod3 without a record: the command ran unchanged, stderr says why"
else
  fail "pod3: $ran"
fi

for n in 1 2; do
  cni DEL "$n" "${addr[$n]}" || fail "fabric-cni DEL pod$n: $(cat "$out/cni.DEL.$n")"
done
left=$(ls "$dir/pods" 2>/dev/null)
[[ -z "$left" ]] && ok "DEL: no record left" || fail "DEL left records: $left"

for n in 1 2 3; do ip netns del "pod$n" 2>/dev/null; done
kill "$apid" 2>/dev/null
wait "$apid" 2>/dev/null
if ((failures > 0)); then
  tail -20 "$out/agent.log"
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
