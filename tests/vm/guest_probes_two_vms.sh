#!/bin/bash
# Runs inside both of the rig's guests: `rig.sh run --vms 2 -- guest_probes_two_vms.sh
# FABRIC_PROBE`. fabric-probe across the virtual wire, each VM on its own rxe0: vm0 serves, vm1
# runs the client against vm0's IPv4 and checks its JSON: write_bw and read_lat with the TCP
# exchange, write_bw with rdma_cm (-R). Then the failures: a client asking vm0 on a port where no
# responder listens (refused, retried until --timeout), and an address on the wire where no host
# answers, both exit 1 within the client's --timeout.
#
# Handshake through $FABRIC_VM_SHARED (seen by both VMs): vm0 starts the responder of step I on
# its own port, waits until it listens and touches ready.I (or noserver.I when it did not come
# up); vm1 waits for either, runs the client and touches gone.I. vm0 waits for vm1's final
# done.vm1 before it exits, so that its address keeps answering during vm1's negative checks.
#
# With FABRIC_AGENT and FABRICCTL (and lldpd on the host) the same boot also checks the fabric
# position on a real RDMA port (section "LLDP" below): vm1's lldpd is the switch on its eth0; vm0's
# agent must show it on the netdev under rxe0 in `fabricctl neighbors`, the watch stream and the
# NFD leaf labels, follow its rename and drop it on its shutdown LLDPDU. It runs while vm1 does its
# negative checks, so it adds little to the run.
set -uo pipefail

usage="usage: guest_probes_two_vms.sh FABRIC_PROBE [FABRIC_AGENT FABRICCTL]"
probe="${1:?$usage}"
agent="${2:-}"
ctl="${3:-}"
# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
index="${FABRIC_VM_INDEX:?run me under rig.sh run --vms 2}"
[[ "${FABRIC_VM_COUNT:-1}" == 2 ]] || { echo "FAIL needs two VMs (rig.sh run --vms 2)"; exit 1; }
ip="${FABRIC_VM_IP:?}"
peer="${FABRIC_VM_PEER:?}"
shared="${FABRIC_VM_SHARED:?}"
base_port=18520

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# ------------------------------------------------------------------------------------------------
# LLDP: the switch (vm1's lldpd) and the agent that hears it (vm0), on rxe0's netdev.
#
# Handshake (every wait bounded; vm0 touches lldp.abort when it is through, early or not, and
# vm1's waits take that as the end): vm0 starts its agent before the probe steps (its start-up
# then costs no wall time) and after them a watcher (a packet socket on the netdev that
# timestamps each LLDP frame, and `fabricctl watch --json` that timestamps each event), then
# touches lldp.listen. vm1, after its clients, starts lldpd (its MAC in lldp.switch) and touches
# lldp.started (lldp.fail when it could not); vm0 checks the neighbour and touches lldp.rename;
# vm1 renames the switch with lldpcli and waits for lldp.stop; vm0 checks the new name and
# touches lldp.stop; vm1 stops lldpd (SIGTERM: the shutdown LLDPDU); vm0 checks that the
# neighbour is gone.
lldp=0
lldp_why=
if [[ -z "$agent" || -z "$ctl" ]]; then
  lldp_why="no FABRIC_AGENT and FABRICCTL given"
elif [[ ! -x /usr/sbin/lldpd || ! -x /usr/sbin/lldpcli ]]; then
  lldp_why="lldpd is not installed on the host"
else
  lldp=1
fi
switch_name=leaf-rail0
switch_rename=leaf-rail0-b
switch_port_desc="rail0 port 1 to vm0"
lldp_sock=/run/fabric-lldp/agent.sock
nfd_dir=/tmp/nfd
nfd_file=$nfd_dir/fabric-agent
lctl() { timeout 20 "$ctl" "$@" --target="unix://$lldp_sock" --timeout=10; }
# ms_between T1 T0: (T1 - T0) in milliseconds, both seconds with a fraction.
ms_between() { /usr/bin/python3 -c 'import sys; print(round((float(sys.argv[1]) - float(sys.argv[2])) * 1000))' "$1" "$2"; }

# lldp_watcher LOG: writes LOG, a line per LLDP frame on $netdev ("frame T TTL NAME", T the
# kernel's receive time) and per watch event ("event T JSON", T when fabricctl printed it).
lldp_watcher() {
  timeout 150 /usr/bin/python3 - "$ctl" "unix://$lldp_sock" "$netdev" "$1" <<'PY'
import socket, struct, subprocess, sys, threading, time
ctl, target, ifname, path = sys.argv[1:5]
log = open(path, "w", buffering=1)
lock = threading.Lock()
def emit(kind, t, text):
    with lock:
        log.write(f"{kind} {t:.6f} {text}\n")
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88CC))
s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
s.bind((ifname, 0))
def frames():
    while True:
        data, anc, _, _ = s.recvmsg(2048, 64)
        t = time.time()
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
                sec, nsec = struct.unpack("qq", value[:16])
                t = sec + nsec / 1e9
        pdu, i, ttl, name = data[14:], 0, -1, "-"
        while i + 2 <= len(pdu):
            (h,) = struct.unpack(">H", pdu[i:i + 2])
            typ, n = h >> 9, h & 0x1FF
            v = pdu[i + 2:i + 2 + n]
            i += 2 + n
            if typ == 0:
                break
            if typ == 3 and n >= 2:
                (ttl,) = struct.unpack(">H", v[:2])
            if typ == 5:
                name = v.decode(errors="replace").replace(" ", "_") or "-"
        emit("frame", t, f"{ttl} {name}")
threading.Thread(target=frames, daemon=True).start()
p = subprocess.Popen([ctl, "watch", "--json", "--target=" + target, "--duration=140"],
                     stdout=subprocess.PIPE, text=True)
for line in p.stdout:
    emit("event", time.time(), line.strip())
sys.exit(p.wait())
PY
}

# lldp_await LOG WANT SECS: waits (at most SECS) for a KIND_NEIGHBOR change of $netdev in the
# watch stream to a neighbour named WANT ("" for none). Prints "EVENT_T FRAME_T VALUE": FRAME_T
# is the first frame naming WANT (TTL > 0), or for none the first shutdown LLDPDU (TTL 0); "-"
# when the packet socket saw none. Exit 1 on time-out.
lldp_await() {
  /usr/bin/python3 - "$1" "$netdev" "$2" "$3" <<'PY'
import json, sys, time
path, netdev, want, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
deadline = time.time() + limit
while True:
    frame_t = None
    for line in open(path):
        if not line.endswith("\n"):
            break  # Still being written.
        kind, t, rest = line.rstrip("\n").split(" ", 2)
        if kind == "frame":
            ttl, name = rest.split(" ", 1)
            if frame_t is None and ((want and name == want and int(ttl) > 0) or
                                    (not want and int(ttl) == 0)):
                frame_t = t
            continue
        for c in json.loads(rest).get("changes", []):
            if c.get("kind") != "KIND_NEIGHBOR" or c.get("subject") != netdev:
                continue
            new = c.get("new_value", "")
            if (want and new.startswith(want + " ")) or (not want and new == ""):
                print(t, frame_t or "-", new or '""')
                sys.exit(0)
    if time.time() > deadline:
        sys.exit(1)
    time.sleep(0.1)
PY
}

# lldp_nfd WANT...: waits (at most 15 s) until the NFD feature file has every WANT line ("!TEXT":
# no line starting with TEXT). Exit 1, printing the file, on time-out.
lldp_nfd() {
  local i w good
  for ((i = 0; i < 150; i++)); do
    good=1
    for w in "$@"; do
      if [[ "$w" == !* ]]; then
        grep -q "^${w#!}" "$nfd_file" 2>/dev/null && good=0
      else
        grep -qxF "$w" "$nfd_file" 2>/dev/null || good=0
      fi
    done
    ((good)) && return 0
    sleep 0.1
  done
  cat "$nfd_file" 2>/dev/null
  return 1
}

# vm0, before the probe steps: the agent, writing the NFD feature file.
lldp_start_agent() {
  mkdir -p "$nfd_dir"
  "$agent" --socket="$lldp_sock" --rescan-interval=3600 --nfd-features-dir="$nfd_dir" \
    --log-level=debug 2>"$out/agent.log" &
  agent_pid=$!
}

# vm0, after the probe steps: the checks.
lldp_vm0() {
  local log=$out/lldp_watch.log wpid got ev_t fr_t val mac t0 i
  local -a labels
  for ((i = 0; i < 300; i++)); do
    lctl health --liveness >/dev/null 2>&1 && break
    sleep 0.1
  done
  if ! lctl health --liveness >/dev/null 2>&1; then
    fail "lldp: fabric-agent not serving"
    return
  fi
  lldp_watcher "$log" 2>"$out/lldp_watch.err" &
  wpid=$!
  for ((i = 0; i < 200; i++)); do
    grep -q '^event ' "$log" 2>/dev/null && break
    sleep 0.1
  done
  if ! grep -q '^event ' "$log" 2>/dev/null; then
    fail "lldp: no first watch event within 20 s: $(cat "$out/lldp_watch.err")"
    kill "$wpid" 2>/dev/null
    return
  fi
  touch "$shared/lldp.listen"
  if ! wait_file 60 "$shared/lldp.started" "$shared/lldp.fail"; then
    fail "lldp: vm1's lldpd did not start within 60 s"
  elif [[ -e "$shared/lldp.fail" ]]; then
    fail "lldp: vm1's lldpd did not start"
  elif ! got=$(lldp_await "$log" "$switch_name" 20); then
    fail "lldp: no neighbour $switch_name on $netdev in the watch stream within 20 s"
    cat "$log"
  else
    # 1. The neighbour in the watch stream, timed from the first frame's arrival.
    read -r ev_t fr_t val <<<"$got"
    if [[ "$fr_t" == - ]]; then
      fail "lldp: $netdev: $val in the watch stream, but the packet socket saw no frame"
    else
      ok "lldp: $netdev: $val in the watch stream $(ms_between "$ev_t" "$fr_t") ms after lldpd's first frame arrived"
    fi
    # 1. fabricctl neighbors --json: the netdev under rxe0, the switch's name, chassis and port.
    mac=$(cat "$shared/lldp.switch" 2>/dev/null)
    if lctl neighbors --json >"$out/neighbors.json" 2>"$out/neighbors.err" &&
      got=$(/usr/bin/python3 - "$out/neighbors.json" "$netdev" "$dev" "$switch_name" "$mac" \
        "$switch_port_desc" "$peer" 2>&1 <<'PY'
import json, sys
path, netdev, dev, name, mac, desc, mgmt = sys.argv[1:8]
n = {n["name"]: n for n in json.load(open(path))["netdevs"]}[netdev]
assert n["rdma_device"] == dev and n["rdma_port"] == 1, n
nb = n["neighbor"]
assert nb["source"] == "SOURCE_LLDP", nb
assert nb["system_name"] == name and nb["switch_label"] == name, nb
assert nb["chassis_id"] == mac and nb["port_id"] == mac, (nb, mac)
assert nb["port_description"] == desc, nb
assert nb["management_address"] == mgmt, nb
assert nb["ttl_seconds"] == 4, nb
print(f"{netdev} ({dev}:1) hears {name}, chassis {nb['chassis_id']}, port {nb['port_id']} "
      f"\"{nb['port_description']}\", management {mgmt}, TTL {nb['ttl_seconds']} s")
PY
      ); then
      ok "lldp: fabricctl neighbors --json: $got"
    else
      fail "lldp: fabricctl neighbors --json: $got $(cat "$out/neighbors.err")"
      cat "$out/neighbors.json"
    fi
    # 2. The NFD labels: the default-route netdev's switch is the front-end leaf, an active RDMA
    # port's otherwise a back-end one (the guest has no default route: back-end).
    if [[ -n "$(ip -4 route show default dev "$netdev" 2>/dev/null)" ]]; then
      labels=("rdma.fabric.io/leaf.frontend=$switch_name" "!rdma.fabric.io/backend-leaves=")
    else
      labels=("rdma.fabric.io/leaf.backend=$switch_name" "rdma.fabric.io/backend-leaves=1"
        "!rdma.fabric.io/leaf.frontend=")
    fi
    if lldp_nfd "${labels[@]}" && grep -q "^rdma.fabric.io/leaf-group=g-" "$nfd_file"; then
      ok "lldp: NFD labels: $(grep "^rdma.fabric.io/\(leaf\|backend\)" "$nfd_file" | tr '\n' ' ')"
    else
      fail "lldp: NFD labels: want ${labels[*]} and a leaf-group"
    fi
    # 3. Renamed on the switch: the new name in the watch stream and the label.
    t0=$(date +%s%N)
    touch "$shared/lldp.rename"
    if got=$(lldp_await "$log" "$switch_rename" 20); then
      read -r ev_t fr_t val <<<"$got"
      ok "lldp: renamed: $netdev: $val in the watch stream $(ms_since "$t0") ms after asking vm1"
      if lldp_nfd "${labels[0]%=*}=$switch_rename"; then
        ok "lldp: NFD label ${labels[0]%=*}=$switch_rename"
      else
        fail "lldp: NFD label ${labels[0]%=*}=$switch_rename"
      fi
    else
      fail "lldp: no rename to $switch_rename within 20 s"
      cat "$log"
    fi
    # 4. lldpd stopped: its shutdown LLDPDU takes the neighbour and the labels away.
    touch "$shared/lldp.stop"
    if got=$(lldp_await "$log" "" 20); then
      read -r ev_t fr_t val <<<"$got"
      if [[ "$fr_t" == - ]]; then
        fail "lldp: neighbour gone, but no shutdown LLDPDU (TTL 0) seen: expired on its TTL?"
      else
        ok "lldp: gone from the watch stream $(ms_between "$ev_t" "$fr_t") ms after the shutdown LLDPDU"
      fi
      if lldp_nfd "!rdma.fabric.io/leaf" "!rdma.fabric.io/backend-leaves="; then
        ok "lldp: no leaf labels left"
      else
        fail "lldp: leaf labels left after the neighbour went"
      fi
    else
      fail "lldp: neighbour still there 20 s after lldpd was asked to stop"
      cat "$log"
    fi
  fi
  touch "$shared/lldp.abort"
  kill "$wpid" 2>/dev/null
  wait "$wpid" 2>/dev/null
}

# vm1, after its clients (in the background, while its negative checks run): the switch. Exit
# status 1 when one of its checks failed.
lldp_vm1() {
  local d=/tmp/lldp lpid rc i before=$failures
  if ! wait_file 90 "$shared/lldp.listen" "$shared/lldp.abort"; then
    fail "lldp: vm0 not listening within 90 s"
    return 1
  fi
  if [[ ! -e "$shared/lldp.listen" ]]; then
    echo "lldp: vm0 gave up before lldpd started"
    return
  fi
  # lldpd's unprivileged half chroots into /run/lldpd and runs lldpcli on the control socket.
  mkdir -p /run/lldpd "$d" && chmod 755 "$d"
  printf '%s\n' "configure system hostname $switch_name" "configure lldp tx-interval 1" \
    "configure ports $netdev lldp portdescription \"$switch_port_desc\"" >"$d/lldpd.conf"
  cat "/sys/class/net/$netdev/address" >"$shared/lldp.switch"
  /usr/sbin/lldpd -d -u "$d/lldpd.ctl" -I "$netdev" -O "$d/lldpd.conf" -S "fabric vm rig switch" \
    -m "$ip" >"$out/lldpd.log" 2>&1 &
  lpid=$!
  sleep 0.2
  if ! kill -0 "$lpid" 2>/dev/null; then
    touch "$shared/lldp.fail"
    fail "lldp: lldpd exited at once: $(tail -5 "$out/lldpd.log")"
    return 1
  fi
  touch "$shared/lldp.started"
  if wait_file 60 "$shared/lldp.rename" "$shared/lldp.abort" && [[ -e "$shared/lldp.rename" ]]; then
    if timeout 10 /usr/sbin/lldpcli -u "$d/lldpd.ctl" configure system hostname "$switch_rename" \
      >"$out/lldpcli.out" 2>&1; then
      ok "lldp: switch renamed to $switch_rename"
    else
      fail "lldp: lldpcli rename: $(cat "$out/lldpcli.out")"
    fi
  fi
  wait_file 60 "$shared/lldp.stop" "$shared/lldp.abort"
  kill -TERM "$lpid" 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    kill -0 "$lpid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$lpid" 2>/dev/null; then
    fail "lldp: lldpd still running 5 s after SIGTERM"
    kill -KILL "$lpid"
  fi
  wait "$lpid"
  rc=$?
  if ((rc == 0)); then ok "lldp: lldpd exit 0 on SIGTERM"; else
    fail "lldp: lldpd exit $rc: $(tail -5 "$out/lldpd.log")"
  fi
  ((failures == before))
}

# The steps: name, test, arguments (both sides get the same; small sizes and counts, the wire is
# tens of MB/s and a round trip tens of ms under emulation).
steps=(
  "write_bw|write_bw|-n 200 -s 16384"
  "read_lat|read_lat|-n 50"
  "write_bw_cm|write_bw|-R -n 200 -s 16384"
)

# check_json TEST FILE: one JSON object for TEST over rdma on $dev with positive figures.
check_json() {
  /usr/bin/python3 - "$1" "$2" "$dev" <<'PY'
import json, sys
test, path, dev = sys.argv[1:4]
lines = [l for l in open(path) if l.strip()]
assert len(lines) == 1, f"{len(lines)} lines"
j = json.loads(lines[0])
assert j["test"] == test, j
assert j["transport"] == "rdma", j
assert j["device"] == dev, j
assert j["iterations"] > 0 and j["bytes"] > 0, j
if test.endswith("_lat"):
    assert j["t_typical_us"] > 0, j
    assert all(k in j and j[k] > 0 for k in ["t_min_us", "t_max_us", "t_avg_us", "p99_us"]), j
    assert j["t_min_us"] <= j["t_typical_us"] <= j["t_max_us"], j
else:
    assert j["bw_avg_gbps"] > 0, j
    assert j["bw_peak_gbps"] >= j["bw_avg_gbps"] and j["msg_rate_mpps"] > 0, j
print(" ".join(f"{k}={v}" for k, v in j.items() if k not in ("test", "device", "transport", "clock")))
PY
}

echo "vm$index: kernel $(uname -r), $dev on ${FABRIC_VM_NETDEV:-eth0} ($ip), peer $peer"

((lldp)) || echo "vm$index: lldp: skipped ($lldp_why)"
if ((index == 0)); then
  # ---- vm0: the responder of every step ----
  if ((lldp)); then lldp_start_agent; fi
  for i in "${!steps[@]}"; do
    IFS='|' read -r name test args <<<"${steps[i]}"
    port=$((base_port + i))
    # The responder waits for its client without a bound of its own: timeout bounds it.
    # shellcheck disable=SC2086
    timeout 90 "$probe" "$test" -d "$dev" -p "$port" --timeout 20 $args \
      >"$out/$name.server.out" 2>"$out/$name.server.err" &
    spid=$!
    up=0
    for ((t = 0; t < 300; t++)); do
      if listening "$port"; then up=1; break; fi
      kill -0 "$spid" 2>/dev/null || break
      sleep 0.1
    done
    if ((!up)); then
      touch "$shared/noserver.$i"
      kill "$spid" 2>/dev/null
      wait "$spid"
      fail "$name: responder did not listen on port $port (exit $?)"
      cat "$out/$name.server.err"
      continue
    fi
    touch "$shared/ready.$i"
    # Once vm1's client is gone (finished or gave up) the responder has 15 s left to end.
    grace=150
    while kill -0 "$spid" 2>/dev/null; do
      if [[ -e "$shared/gone.$i" ]] && ((--grace <= 0)); then
        echo "$name: responder still running 15 s after the client left; killing it"
        kill "$spid" 2>/dev/null
        break
      fi
      sleep 0.1
    done
    wait "$spid"
    src=$?
    if ((src == 0)); then
      ok "$name: responder on port $port served the client from $peer"
    else
      fail "$name: responder exit $src"
      cat "$out/$name.server.err"
    fi
  done
  # ---- vm0: LLDP, while vm1 does its negative checks ----
  if ((lldp)); then
    lldp_vm0
    touch "$shared/lldp.abort"
    kill -TERM "$agent_pid" 2>/dev/null
    wait "$agent_pid"
    arc=$?
    if ((arc == 0)); then ok "lldp: agent exit 0 on SIGTERM"; else fail "lldp: agent exit $arc"; fi
    ((failures)) && { echo "--- agent log"; tail -40 "$out/agent.log"; }
  fi
  # Stay up (answering on the wire) until vm1 is through its negative checks.
  if wait_file 150 "$shared/done.vm1"; then
    ok "vm1 finished"
  else
    fail "vm1 did not finish"
  fi
else
  # ---- vm1: the clients, against vm0 ----
  for i in "${!steps[@]}"; do
    IFS='|' read -r name test args <<<"${steps[i]}"
    port=$((base_port + i))
    if ! wait_file 120 "$shared/ready.$i" "$shared/noserver.$i"; then
      fail "$name: vm0's responder never got ready"
      touch "$shared/gone.$i"
      continue
    fi
    if [[ -e "$shared/noserver.$i" ]]; then
      fail "$name: vm0's responder did not start"
      continue
    fi
    start=$(date +%s%N)
    # shellcheck disable=SC2086
    timeout 90 "$probe" "$test" "$peer" -d "$dev" -p "$port" --retry 10 --timeout 20 --json $args \
      >"$out/$name.json" 2>"$out/$name.client.err"
    rc=$?
    took=$(ms_since "$start")
    touch "$shared/gone.$i"
    if ((rc != 0)); then
      fail "$name: client exit $rc after $took ms"
      cat "$out/$name.client.err" "$out/$name.json"
      continue
    fi
    if summary=$(check_json "$test" "$out/$name.json" 2>&1); then
      ok "$name ($args) with $peer in $took ms: $summary"
    else
      fail "$name: bad JSON: $summary"
      cat "$out/$name.json"
    fi
  done

  # ---- vm1: the LLDP switch, in the background while the negative checks run ----
  if ((lldp)); then
    lldp_vm1 &
    switch_pid=$!
  fi

  # No responder on vm0's port (vm0 is up and answers with RST): the client fails at once, as
  # perftest does (no --retry), naming the peer and the refusal.
  t_s=4
  port=18599
  start=$(date +%s%N)
  err=$(timeout 60 "$probe" write_bw "$peer" -d "$dev" -p "$port" --timeout "$t_s" 2>&1 >/dev/null)
  rc=$?
  took=$(ms_since "$start")
  if ((rc == 1 && took < t_s * 1000 + 8000)) &&
    grep -q "nothing listens on $peer:$port (is the peer's responder running?)" <<<"$err"; then
    ok "no responder at $peer port $port: exit 1 after $took ms (--timeout $t_s): $err"
  else
    fail "no responder at $peer port $port: exit $rc after $took ms (--timeout $t_s): $err"
  fi

  # An address on the wire where no host answers (no ARP reply): exit 1 within the timeout too
  # (timed out connecting, or no route to host once ARP gives up).
  absent=${peer%.*}.77
  start=$(date +%s%N)
  err=$(timeout 60 "$probe" read_lat "$absent" -d "$dev" -p "$base_port" --timeout "$t_s" 2>&1 >/dev/null)
  rc=$?
  took=$(ms_since "$start")
  if ((rc == 1 && took < t_s * 1000 + 8000)) &&
    grep -q "fabric-probe: error: read_lat with $absent" <<<"$err"; then
    ok "no host at $absent: exit 1 after $took ms (--timeout $t_s): $err"
  else
    fail "no host at $absent: exit $rc after $took ms (--timeout $t_s): $err"
  fi
  # Bounded: every wait in lldp_vm1 is.
  if ((lldp)) && ! wait "$switch_pid"; then
    fail "lldp: the switch side failed"
  fi
  touch "$shared/done.vm1"
fi

if ((failures)); then
  echo "vm$index: $failures check(s) failed"
  exit 1
fi
echo "vm$index: all checks passed"
